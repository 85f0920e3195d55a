/*
 * segname.c -- the names of shard directories and segment files
 * (segname.h).
 */
#include "store/segname.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

int le__shard_dir(char *buf, size_t cap, const char *dir, uint32_t shard)
{
	int n = snprintf(buf, cap, "%s/shard-%03" PRIu32, dir, shard);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

int le__seg_path(char *buf, size_t cap, const char *shard_dir, uint64_t index)
{
	int n = snprintf(buf, cap, "%s/%016" PRIx64 ".seg", shard_dir, index);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}
