/*
 * config.h -- le_config's defaults and checks (config.c), on full-size
 * structs (abi.c converts a caller's smaller one first).
 */
#ifndef LE_CONFIG_H
#define LE_CONFIG_H

#include <stdint.h>

#include "logengine.h"

/* Every field's default (le_config_init). */
void le__config_defaults(le_config *c);
/* Replace the zeros of the settings whose 0 means their default. */
void le__config_zeros(le_config *c);
/* The records a batch holds: batch_size, or for 0 2048, or less for a
 * small queue (a quarter of it). */
uint32_t le__config_batch(const le_config *c);
/* @return 0, or LE_EINVAL with le_errmsg naming the field. */
int le__config_check(const le_config *c);

#endif
