/*
 * deadq.c -- a dead process's queue, slot by slot, as the writer walks it
 * at recovery (recover.c, le__recover_queue; the writer's collect calls
 * these only while sh->w.recovering): what in a slot's header no producer
 * writes, the walk on past damage to the next slot that can be framed,
 * which records the segments hold already, and the damage named for
 * le__recover_queue to report.
 */
#define _GNU_SOURCE
#include "engine/deadq.h"

#include "record/fields.h"

/* A slot's payload with LE_REC_FIELDS holds a field block that decodes. */
static int fields_ok(const le__slot *sl, uint32_t len)
{
	const unsigned char *b, *m;
	size_t blen, mlen;
	const char *why;

	if (!(sl->flags & LE_REC_FIELDS))
		return 1;
	return le__fields_split((const unsigned char *)(sl + 1), len, &b, &blen,
	                        &m, &mlen) == 0 &&
	       le__fields_check(b, blen, &why) == 0;
}

/* A slot framed whole (its size, length, level and flags agree) whose
 * bytes changed under its checksum: the walk steps over it alone. */
static const char ck_bad[] = "record not its checksum's";

/* What in a published slot's header no producer writes, or NULL.  In a
 * version 2 queue the level byte holds the check over level and flags
 * (queue.h): any one of their bits flipped is named here; with slot
 * checksums, ck_bad for a slot that fails only that. */
static const char *slot_damage(const le__ring *r, const le__slot *sl,
                               uint32_t sbytes)
{
	int checked = r->version >= 2;
	uint32_t level = checked ? sl->level & LE_SLOT_LEVEL_MASK : sl->level;
	uint32_t plen = sl->len, ck = r->csum ? LE_SLOT_CSUM : 0;
	if (plen > sbytes - LE_SLOT_HDR - ck)
		return "length past its slot";
	/* le_write takes le__ring_slot_bytes(len), le_logf one byte more */
	if (sbytes != le__slot_bytes(plen + ck) &&
	    sbytes != le__slot_bytes(plen + 1 + ck))
		return "length not its slot's";
	if (level > LE_FATAL)
		return "level above FATAL";
	if (sl->flags & ~LE_SLOT_KNOWN_FLAGS)
		return "unknown flags";
	if (checked && sl->level != le__slot_lvbyte(level, sl->flags))
		return "level or flags not their check's";
	if (ck) {
		uint32_t c;
		memcpy(&c, (const unsigned char *)sl + sbytes - ck, sizeof c);
		if (c != le__slot_crc(sl, plen))
			return ck_bad;
	}
	if (!fields_ok(sl, plen))
		return "field block does not decode";
	return NULL;
}

/* A slot framed whole, for le__ring_resync: its checksum aside (a slot
 * failing only that is then dropped alone, le__deadq_slot). */
static int slot_whole(const le__ring *r, const le__slot *sl, uint32_t sbytes)
{
	const char *bad = slot_damage(r, sl, sbytes);
	return bad == NULL || bad == ck_bad;
}

/*
 * How far to step over a slot at pos that failed only its checksum, or 0
 * (resync instead).  Its size is the state word's, which the checksum
 * does not cover, and which slot_damage only checked against the two
 * sizes its length allows (le_write's and le_logf's, 64 bytes apart for
 * some lengths): one flipped bit there passes that, and stepping by it
 * would land on a later slot, losing the one between without a word, or
 * inside this one.  So: the other size when the check holds at its end
 * (the state word is what changed: *why says so); else the smaller size
 * after which a slot starts (le__ring_starts 2: a state word, head),
 * then the larger; then the same for a FREE word there (1: an abandoned
 * claim -- or this slot's own padding, which holds FREE words too, so it
 * comes after a real state word).
 */
static uint32_t ck_step(const le__ring *r, const le__slot *sl, uint64_t pos,
                        uint32_t sbytes, uint64_t end, const char **why)
{
	uint32_t len = sl->len;
	uint32_t a = le__slot_bytes(len + LE_SLOT_CSUM),
	         b = le__slot_bytes(len + 1 + LE_SLOT_CSUM);
	uint32_t other = sbytes == a ? b : a;
	uint64_t room = r->size - (pos & (r->lap - 1));
	if (other != sbytes && other <= room) {
		uint32_t c;
		memcpy(&c, (const unsigned char *)sl + other - LE_SLOT_CSUM,
		       sizeof c);
		if (c == le__slot_crc(sl, len) &&
		    le__ring_starts(r, pos + other, end)) {
			*why = "state word";
			return other;
		}
	}
	for (int want = 2; want >= 1; want--) {
		if (a <= room && le__ring_starts(r, pos + a, end) == want)
			return a;
		if (b != a && b <= room &&
		    le__ring_starts(r, pos + b, end) == want)
			return b;
	}
	return 0;
}

void le__deadq_note(le__qrecov *q, uint64_t pos, const char *why,
                    int dropped)
{
	if (dropped)
		q->dropped++;
	else
		q->doubtful++;
	if (q->named < LE_QDMG_NAMED) {
		q->pos[q->named] = pos;
		q->why[q->named++] = why;
	}
}

/* A damaged record at rd: counted dropped and named -- unless the
 * segments hold it already. */
static void drop_damaged(le__qrecov *q, uint64_t rd, const char *why)
{
	if (q->have_mark && rd >= q->mark_pos && q->written) {
		q->written--; /* that record is in a segment */
		q->skipped++;
	} else {
		le__deadq_note(q, rd, why, 1);
	}
}

/* The walk met damage at *rd (a record that cannot be framed, counted
 * dropped -- the slots up to the next one that can be framed count as
 * one, how many they were being unknown): go on at that one.
 * @return 1 (*rd moved), 0 when none is left. */
static int skip_damage(le__shard *sh, uint64_t *rd, const char *why)
{
	le__qrecov *q = &sh->w.rq;
	uint64_t at;
	int found = le__ring_resync(&sh->ring, *rd, q->end, slot_whole, &at);
	drop_damaged(q, *rd, why);
	if (!found)
		return 0;
	*rd = at;
	return 1;
}

int le__deadq_slot(le__shard *sh, uint64_t *rd, int k, le__slot *sl,
                   uint32_t sbytes, uint64_t seq)
{
	le__qrecov *q = &sh->w.rq;

	if (k == LE_PEEK_EMPTY) {
		/* Before head every line was claimed: a state word there
		 * that says otherwise was damaged. */
		if (*rd >= q->end || !q->head_sane)
			return -1;
		const le__ring *r = &sh->ring;
		uint64_t w = atomic_load_explicit(
			(_Atomic uint64_t *)(r->data + (*rd & (r->lap - 1))),
			memory_order_relaxed);
		/* The FREE word of its lap: a producer moved head and died
		 * before its claim word, and nothing of its slot was
		 * written -- every line of it still holds that word.  The
		 * walk goes on at the first line that does not (the next
		 * slot, whatever it holds), or ends at head.  Such a slot is
		 * no record, so it takes nothing from the mark's count of
		 * records written (a recovery that stepped over it and was
		 * killed before its release left it among them). */
		if (w == le__free_word(*rd >> r->lap_shift)) {
			atomic_fetch_add(&sh->prog.abandoned, 1);
			q->abandoned++;
			*rd = le__ring_skip_free(r, *rd, q->end);
			return 1;
		}
		return skip_damage(sh, rd, "state word") ? 1 : -1;
	}
	if (k == LE_PEEK_CLAIMED) {
		/* claimed, never published: never accepted */
		atomic_fetch_add(&sh->prog.abandoned, 1);
		q->abandoned++;
		*rd += sbytes;
		return 1;
	}
	const char *bad = slot_damage(&sh->ring, sl, sbytes);
	if (bad == ck_bad) {
		uint32_t step = ck_step(&sh->ring, sl, *rd, sbytes, q->end, &bad);
		if (step) {
			drop_damaged(q, *rd, bad);
			*rd += step;
			return 1;
		}
	}
	if (bad)
		return skip_damage(sh, rd, bad) ? 1 : -1;
	int written;
	if (q->have_mark && *rd >= q->mark_pos) {
		written = q->written > 0;
		q->written -= (uint64_t)written;
	} else {
		/* written, then killed before the ring moved on */
		written = sl->seq && sl->seq < seq;
	}
	if (written) {
		q->skipped++;
		*rd += sbytes;
		return 1;
	}
	return 0;
}

/* A stamp no clock of the dead process can have made, by more than the
 * order of stamps across threads explains: the record is written (at a
 * clamped time) and counted doubtful. */
#define DOUBT_NS (3600ull * 1000000000u)

void le__deadq_time(le__qrecov *q, uint64_t pos, uint64_t ts, uint64_t now,
                    uint64_t last)
{
	if (ts > now + DOUBT_NS || ts + DOUBT_NS < last)
		le__deadq_note(q, pos, "time out of range", 0);
}

void le__deadq_site(le__qrecov *q, uint64_t pos, uint32_t site,
                    const char *why)
{
	if (!q->sites_lost++) {
		q->site_pos = pos;
		q->site_id = site;
		q->site_why = why;
	}
}
