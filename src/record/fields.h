/*
 * fields.h -- typed fields: the field block a record's payload starts
 * with when it has LE_REC_FIELDS (fields.c), and the one formatting of
 * fields every output shares (recfmt.c): the stream sink's text and JSON
 * lines, the syslog sink's structured data, logengine cat.
 *
 * Payload with LE_REC_FIELDS (docs/FORMAT.md, "Field block"):
 *
 *   u32  B        bytes of the fields that follow
 *   B    fields   back to back, each:
 *                   u8 type (enum le_field_type), u8 K (1..255), K key bytes,
 *                   value: STRING, BYTES  u32 L, L bytes
 *                          INT64, UINT64, DOUBLE  8 bytes
 *                          BOOL  1 byte, 0 or 1
 *   rest message
 */
#ifndef LE_FIELDS_H
#define LE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"

#define LE_FIELD_KEY_MAX 255

/* A record's fields as the hot path assembles them, in this order: pre
 * (already encoded: a named logger's "logger" field), the caller's f[n],
 * then code.file, code.line and code.func from site (when not NULL). */
typedef struct le__fieldset {
	const unsigned char *pre;
	uint32_t pre_len;
	const le_field *f;
	size_t n;
	const le__site *site;
} le__fieldset;

/* The hot path of le_logf_kv and the level macros (submit.c): format a
 * record and queue it with fs's fields (fs NULL: none), from the calling
 * thread.  @return as le_logf. */
int le__submitf(le_engine *e, int level, const le__fieldset *fs,
                const char *fmt, va_list ap);
/* The same for a level macro's literal format (src/record/defer.h): the record
 * holds the site's number and the arguments, formatted later; a site or
 * a record the deferred path does not take goes to le__submitf. */
int le__submitd(le_engine *e, le__dsite *ds, const le__fieldset *fs,
                const char *fmt, va_list ap);
/* The flight recorder's keeping of a record formatted at the call, below
 * its logger's threshold (h: the macro's handle): its text, cut to a
 * ring entry, in the calling thread's shard's ring.  @return 0. */
int le__bt_keepf(le_engine *e, const struct le__head *h, int level,
                 const le__fieldset *fs, const char *fmt, va_list ap);

/* Encoded bytes of one field (type, key, value). */
size_t le__field_size(const le_field *f);
/* Encode one field at out (le__field_size(f) bytes).  @return them. */
size_t le__field_put(unsigned char *out, const le_field *f);

/* Bytes of fs's block: its length word and every field; 0 when fs has no
 * field.  -1 when a field has an unknown type. */
int64_t le__fields_size(const le__fieldset *fs);
/* Bytes of the block holding as many of fs's fields, from the first, as
 * fit in cap (a record cut to max_record_bytes); 0 when none does. */
size_t le__fields_fit(const le__fieldset *fs, size_t cap);
/* Encode the block le__fields_fit(fs, cap) measured.  @return its bytes. */
size_t le__fields_encode(unsigned char *out, size_t cap,
                         const le__fieldset *fs);

/* The block of a payload with LE_REC_FIELDS: *fields (after the length
 * word) and *flen, the message *msg and *mlen.  @return 0, or -1 when the
 * length word does not fit the payload. */
int le__fields_split(const unsigned char *p, size_t len,
                     const unsigned char **fields, size_t *flen,
                     const unsigned char **msg, size_t *mlen);
/* Is b[0..len) a whole, valid run of fields?  @return 0 or -1 (*why). */
int le__fields_check(const unsigned char *b, size_t len, const char **why);
/* Decode the field at *pos of b[0..len) and step over it.  @return 1, 0
 * at the end, -1 for one that does not decode. */
int le__field_next(const unsigned char *b, size_t len, size_t *pos,
                   le_field *out);

/* Recorded history (the flight recorder, docs/FORMAT.md): the bool field
 * "le.backtrace" = true, first in a record's field block. */
#define LE_BT_FIELD "\x05\x0c" "le.backtrace" "\x01"
#define LE_BT_FIELD_LEN 15u
/* A field block b[0..*len) that starts with that field: step *b and
 * *len past it.  @return 1 (recorded history) or 0 (b left as it was). */
int le__fields_unmark(const unsigned char **b, size_t *len);
/* A record read back: that field, when first, taken out of rec's fields
 * and reported as LE_REC_BACKTRACE (a block of it alone leaves none):
 * the reader's and le_tail's. */
void le__rec_backtrace(le_record *rec);

/* ---- recfmt.c: fields and values as text ---- */

enum {
	LE__FMT_TEXT = 0, /* " key=value" each */
	LE__FMT_JSON = 1, /* ,"fields":{"key":value,...} */
	LE__FMT_SD = 2    /* [fields@32473 key="value" ...] (RFC 5424) */
};

/* The SD-ID of the structured data element fields go to in syslog. */
#define LE_SYSLOG_SD_ID "fields@32473"

/* Format the fields of block b[0..len) at out in `style`.  Writes only
 * whole fields: one whose worst case does not fit in what is left of cap
 * is left out with those after it, so the output is well formed whatever
 * cap is; LE_FIELDS_TEXT_MAX(len) always holds them all.  A block that
 * does not decode ends the output where it stops decoding.
 * @return bytes written (no NUL). */
size_t le__fields_format(unsigned char *out, size_t cap, int style,
                         const unsigned char *b, size_t len);

/* JSON string body of p[0..n): '"' and '\' escaped, bytes below 0x20
 * and 0x7f as \u00XX, valid UTF-8 as it is, any other byte as \u00XX.
 * Stops before a character that would leave fewer than 12 bytes of cap.
 * @return bytes written. */
size_t le__json_escape(unsigned char *out, size_t cap, const unsigned char *p,
                       size_t n);

/* "2026-11-30T21:30:27.123456789Z" (frac 9 digits, 30 bytes) or
 * "...27.123456Z" (frac 6, RFC 5424's limit, 27 bytes) for ns since the
 * epoch.  A per-thread cache keeps the text of the last second: gmtime_r
 * and snprintf would cost more than the rest of a line.  @return bytes. */
size_t le__put_ts(char *out, uint64_t ns, int frac);

#endif
