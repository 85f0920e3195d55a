/*
 * fuzz_recover.c -- libFuzzer target for recovery at le_open: the reads of
 * fuzz_segment.c, then le_open on the same segment files and CHECKPOINT,
 * one record appended, le_close, and a read that must find every record
 * it found before.  See fuzz_segment.c for the input layout and the
 * invariants.
 */
#define FUZZ_RECOVER 1
#include "fuzz_segment.c"
