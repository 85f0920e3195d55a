/*
 * seg_zst.h -- archived segments: NAME.seg compressed whole into
 * NAME.seg.zst (docs/FORMAT.md, "Archived segments"), and the calls that
 * read a segment whichever of the two it is now.
 *
 * An archive is one zstd frame with its content size and content checksum
 * set, whose content is the segment file byte for byte.  It is made by
 * this sequence, so that a crash at any point leaves one whole copy that
 * readers take (and never two that they both read):
 *
 *   1. NAME.seg.zst.tmp written from NAME.seg, its times set to NAME.seg's
 *   2. fdatasync(NAME.seg.zst.tmp)
 *   3. rename(NAME.seg.zst.tmp, NAME.seg.zst)
 *   4. fsync of the shard directory
 *   5. unlink(NAME.seg)
 *
 * Readers open NAME.seg first and the archive only when NAME.seg is gone,
 * so while both exist (a crash between 3 and 5) the original is read and
 * the archive is not.  le_open removes what a crash left (le__zst_tidy):
 * NAME.seg.zst.tmp always, NAME.seg.zst when NAME.seg is there too.
 *
 * Retention deletes in the other order's mirror: it unlinks NAME.seg, and
 * NAME.seg.zst only when NAME.seg was already gone (le__seg_unlink); an
 * archiver that finds NAME.seg gone at step 5 (retention took it while it
 * compressed) removes its own NAME.seg.zst.  Either way no archive of a
 * deleted segment is left behind, whatever the interleaving.
 *
 * Without libzstd at build time (LE_HAVE_ZSTD unset) archives can be
 * neither written nor read: le__zst_archive returns -ENOTSUP and opening
 * one fails with LE_ECORRUPT saying so.
 */
#ifndef LE_SEG_ZST_H
#define LE_SEG_ZST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/segname.h"

#define LE_ZST_SUFFIX ".zst"
/* Segments larger than this are never compressed, and an archive whose
 * content is larger is refused: a reader holds one decompressed segment
 * per shard in memory. */
#define LE_ZST_MAX_BYTES (1ull << 30)
/* zstd's level when le_config.archive_level is 0. */
#define LE_ZST_LEVEL_DEFAULT 3
#define LE_ZST_LEVEL_MAX 19

/* 1 when this build reads and writes archives. */
int le__zst_built(void);

/*
 * Compress segment `index` of shard_dir into its archive by the sequence
 * above, at zstd level `level`, reading and writing 1 MiB at a time.
 * *stop set (by another thread) abandons it between steps: the temporary
 * file is removed and the segment stays as it was.  @return 0, *bytes
 * the segment's size and *zbytes the archive's; -ENOENT (the segment is gone: deleted by
 * retention, before or during); -ECANCELED (stopped); -ENOTSUP (no
 * zstd); -EFBIG (above LE_ZST_MAX_BYTES); another -errno.
 */
int le__zst_archive(const char *shard_dir, uint64_t index, int level,
                    const _Atomic int *stop, uint64_t *bytes,
                    uint64_t *zbytes);

/*
 * Open segment seg_path (.../NAME.seg) for reading: the file itself, or,
 * when it is gone and NAME.seg.zst exists, a memfd holding the archive's
 * content (the segment's bytes).  *archived is set to 1 when the archive
 * was the one tried, also when it failed.  A file with a second name
 * (a hard link: another log's, maybe, linked in; the engine never links
 * its own) is refused.  @return a descriptor; -ENOENT (neither exists);
 * LE_ECORRUPT (the archive is damaged: *why says how); LE_EUNSAFE (a
 * second name: le_errmsg names "shard-NNN/NAME"); -errno.
 */
int le__seg_open_read(const char *seg_path, int *archived, const char **why);

/* The first cap bytes of segment seg_path (decompressed from its archive
 * when it is archived: only as much as asked), and its length in *len
 * (the content size of an archive).  @return bytes read, or < 0 as
 * le__seg_open_read. */
ssize_t le__seg_head(const char *seg_path, void *buf, size_t cap,
                     uint64_t *len, int *archived);

/* Size on disk and last modification time (ns) of segment seg_path or of
 * its archive.  @return 0, 1 (it is the archive), or -errno. */
int le__seg_stat(const char *seg_path, uint64_t *bytes, uint64_t *mtime_ns);

/* Delete segment seg_path: NAME.seg, or NAME.seg.zst when NAME.seg was
 * already gone.  @return 0, -ENOENT (neither), -errno. */
int le__seg_unlink(const char *seg_path);

/* What a crash in the sequence above left in shard_dir: temporary files,
 * and archives whose segment is still there.  Only for the engine that
 * owns the directory (le_open), before any archiver runs. */
void le__zst_tidy(const char *shard_dir);

#endif
