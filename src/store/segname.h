/*
 * segname.h -- the names of a log directory's shards and segments:
 * DIR/shard-NNN/IIIIIIIIIIIIIIII.seg (docs/FORMAT.md).  Below both the
 * segments (segment.h) and their archives (seg_zst.h), which name files
 * the same way.
 */
#ifndef LE_SEGNAME_H
#define LE_SEGNAME_H

#include <stddef.h>
#include <stdint.h>

#define LE_PATH_MAX 4096

/* DIR/shard-NNN.  @return 0, or -ENAMETOOLONG when cap is too small. */
int le__shard_dir(char *buf, size_t cap, const char *dir, uint32_t shard);
/* DIR/shard-NNN/IIIIIIIIIIIIIIII.seg.  @return 0 or -ENAMETOOLONG. */
int le__seg_path(char *buf, size_t cap, const char *shard_dir, uint64_t index);

#endif
