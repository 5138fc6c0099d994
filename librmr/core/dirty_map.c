/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dirty_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

#define SLP_ENTRIES (1u << DIRTY_SLP_SHIFT)
/* What dirty_map_count() counts: misses and records. */
#define MARKED (DIRTY_BIT | RECORD_BIT)
#define FLP_ENTRIES (1u << DIRTY_FLP_SHIFT)
/*
 * A sparse SLP holds up to this many non-zero entries. Past it, the dense
 * array (4096 bytes) is smaller than the list would grow to be worth.
 */
#define SPARSE_MAX 128

struct dirty_slp {
	uint16_t used;   /* non-zero entries */
	bool dense;
	union {
		uint8_t bytes[SLP_ENTRIES]; /* dense */
		struct {
			uint16_t idx[SPARSE_MAX]; /* sorted */
			uint8_t val[SPARSE_MAX];
		} sp;
	} u;
};

#define SPARSE_SIZE (offsetof(struct dirty_slp, u) + sizeof(((struct dirty_slp *)0)->u.sp))
#define DENSE_SIZE (offsetof(struct dirty_slp, u) + SLP_ENTRIES)

struct dirty_flp {
	unsigned used; /* SLPs present */
	struct dirty_slp *slp[FLP_ENTRIES];
};

int dirty_map_init(struct dirty_map *m, uint64_t nchunks)
{
	if (nchunks == 0 || nchunks > DIRTY_MAP_MAX_CHUNKS)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->nchunks = nchunks;
	return 0;
}

static void free_flp(struct dirty_map *m, unsigned r)
{
	struct dirty_flp *flp = m->root[r];

	for (unsigned i = 0; i < FLP_ENTRIES && flp->used; i++) {
		struct dirty_slp *slp = flp->slp[i];

		if (!slp)
			continue;
		m->bytes -= slp->dense ? DENSE_SIZE : SPARSE_SIZE;
		free(slp);
		flp->used--;
	}
	m->bytes -= sizeof(*flp);
	free(flp);
	m->root[r] = NULL;
}

void dirty_map_clear_all(struct dirty_map *m)
{
	for (unsigned r = 0; r < DIRTY_ROOT_SIZE; r++)
		if (m->root[r])
			free_flp(m, r);
	m->dirty = 0;
	m->records = 0;
}

void dirty_map_destroy(struct dirty_map *m)
{
	dirty_map_clear_all(m);
}

static inline void split(uint64_t chunk, unsigned *r, unsigned *f, unsigned *e)
{
	*e = (unsigned)(chunk & (SLP_ENTRIES - 1));
	*f = (unsigned)((chunk >> DIRTY_SLP_SHIFT) & (FLP_ENTRIES - 1));
	*r = (unsigned)(chunk >> (DIRTY_SLP_SHIFT + DIRTY_FLP_SHIFT));
}

/* Position of @e in a sparse page: its index, or where it would go. */
static unsigned sparse_find(const struct dirty_slp *slp, unsigned e, bool *found)
{
	unsigned lo = 0, hi = slp->used;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (slp->u.sp.idx[mid] < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < slp->used && slp->u.sp.idx[lo] == e;
	return lo;
}

static uint8_t slp_get(const struct dirty_slp *slp, unsigned e)
{
	bool found;
	unsigned pos;

	if (slp->dense)
		return slp->u.bytes[e];
	pos = sparse_find(slp, e, &found);
	return found ? slp->u.sp.val[pos] : 0;
}

uint8_t dirty_map_get(const struct dirty_map *m, uint64_t chunk)
{
	unsigned r, f, e;
	const struct dirty_flp *flp;

	if (chunk >= m->nchunks)
		return 0;
	split(chunk, &r, &f, &e);
	flp = m->root[r];
	if (!flp || !flp->slp[f])
		return 0;
	return slp_get(flp->slp[f], e);
}

/* Turn a full sparse page into a dense one. */
static struct dirty_slp *densify(struct dirty_map *m, struct dirty_slp *sp)
{
	struct dirty_slp *d = calloc(1, DENSE_SIZE);

	if (!d)
		return NULL;
	d->dense = true;
	d->used = sp->used;
	for (unsigned i = 0; i < sp->used; i++)
		d->u.bytes[sp->u.sp.idx[i]] = sp->u.sp.val[i];
	m->bytes += DENSE_SIZE;
	m->bytes -= SPARSE_SIZE;
	free(sp);
	return d;
}

int dirty_map_set(struct dirty_map *m, uint64_t chunk, uint8_t value)
{
	unsigned r, f, e, pos;
	struct dirty_flp *flp;
	struct dirty_slp *slp;
	uint8_t old;
	bool found;

	if (chunk >= m->nchunks)
		return -ERANGE;
	split(chunk, &r, &f, &e);
	flp = m->root[r];
	if (!flp) {
		if (!value)
			return 0;
		flp = calloc(1, sizeof(*flp));
		if (!flp)
			return -ENOMEM;
		m->root[r] = flp;
		m->bytes += sizeof(*flp);
	}
	slp = flp->slp[f];
	if (!slp) {
		if (!value)
			return 0;
		slp = calloc(1, SPARSE_SIZE);
		if (!slp)
			goto nomem;
		flp->slp[f] = slp;
		flp->used++;
		m->bytes += SPARSE_SIZE;
	}

	if (slp->dense) {
		old = slp->u.bytes[e];
		slp->u.bytes[e] = value;
	} else {
		pos = sparse_find(slp, e, &found);
		old = found ? slp->u.sp.val[pos] : 0;
		if (found && value) {
			slp->u.sp.val[pos] = value;
		} else if (found) {
			memmove(&slp->u.sp.idx[pos], &slp->u.sp.idx[pos + 1],
				(slp->used - pos - 1) * sizeof(uint16_t));
			memmove(&slp->u.sp.val[pos], &slp->u.sp.val[pos + 1], slp->used - pos - 1);
		} else if (value) {
			if (slp->used == SPARSE_MAX) {
				struct dirty_slp *d = densify(m, slp);

				if (!d)
					goto nomem;
				flp->slp[f] = slp = d;
				slp->u.bytes[e] = value;
			} else {
				memmove(&slp->u.sp.idx[pos + 1], &slp->u.sp.idx[pos],
					(slp->used - pos) * sizeof(uint16_t));
				memmove(&slp->u.sp.val[pos + 1], &slp->u.sp.val[pos], slp->used - pos);
				slp->u.sp.idx[pos] = (uint16_t)e;
				slp->u.sp.val[pos] = value;
			}
		}
	}

	if (!old && value)
		slp->used++;
	else if (old && !value)
		slp->used--;
	if ((old & MARKED) && !(value & MARKED))
		m->dirty--;
	else if (!(old & MARKED) && (value & MARKED))
		m->dirty++;
	if ((old & RECORD_BIT) && !(value & RECORD_BIT))
		m->records--;
	else if (!(old & RECORD_BIT) && (value & RECORD_BIT))
		m->records++;

	if (!slp->used) {
		m->bytes -= slp->dense ? DENSE_SIZE : SPARSE_SIZE;
		free(slp);
		flp->slp[f] = NULL;
		flp->used--;
	}
	if (!flp->used) {
		m->bytes -= sizeof(*flp);
		free(flp);
		m->root[r] = NULL;
	}
	return 0;

nomem:
	if (!flp->used) {
		m->bytes -= sizeof(*flp);
		free(flp);
		m->root[r] = NULL;
	}
	return -ENOMEM;
}

/* Install a dense page with every entry dirty where there was none. */
static int mark_whole_page(struct dirty_map *m, uint64_t chunk)
{
	unsigned r, f, e;
	struct dirty_flp *flp;
	struct dirty_slp *slp;

	split(chunk, &r, &f, &e);
	flp = m->root[r];
	if (!flp) {
		flp = calloc(1, sizeof(*flp));
		if (!flp)
			return -ENOMEM;
		m->root[r] = flp;
		m->bytes += sizeof(*flp);
	}
	slp = malloc(DENSE_SIZE);
	if (!slp) {
		if (!flp->used) {
			m->bytes -= sizeof(*flp);
			free(flp);
			m->root[r] = NULL;
		}
		return -ENOMEM;
	}
	slp->dense = true;
	slp->used = SLP_ENTRIES;
	memset(slp->u.bytes, DIRTY_BIT, SLP_ENTRIES);
	flp->slp[f] = slp;
	flp->used++;
	m->bytes += DENSE_SIZE;
	m->dirty += SLP_ENTRIES;
	return 0;
}

/* Set the dirty bit on every entry of an existing page, making it dense. */
static int mark_present_page(struct dirty_map *m, uint64_t chunk)
{
	unsigned r, f, e, dirty = 0, records = 0;
	struct dirty_flp *flp;
	struct dirty_slp *slp;

	split(chunk, &r, &f, &e);
	flp = m->root[r];
	slp = flp->slp[f];
	if (!slp->dense) {
		slp = densify(m, slp);
		if (!slp)
			return -ENOMEM;
		flp->slp[f] = slp;
	}
	for (unsigned i = 0; i < SLP_ENTRIES; i++) {
		dirty += (slp->u.bytes[i] & MARKED) != 0;
		records += (slp->u.bytes[i] & RECORD_BIT) != 0;
		slp->u.bytes[i] = (uint8_t)((slp->u.bytes[i] & ~(RECORD_BIT | RECORD_OLD_BIT)) |
					    DIRTY_BIT);
	}
	m->dirty += SLP_ENTRIES - dirty;
	m->records -= records;
	slp->used = SLP_ENTRIES;
	return 0;
}

static bool page_present(const struct dirty_map *m, uint64_t chunk)
{
	unsigned r, f, e;

	split(chunk, &r, &f, &e);
	return m->root[r] && m->root[r]->slp[f];
}

int dirty_map_mark(struct dirty_map *m, uint64_t first, uint64_t count)
{
	uint64_t c = first, end;

	if (first > m->nchunks || count > m->nchunks - first)
		return -ERANGE;
	end = first + count;
	while (c < end) {
		int ret;

		/* Whole pages (a replaced member, a long outage) are filled in one go. */
		if (!(c & (SLP_ENTRIES - 1)) && end - c >= SLP_ENTRIES) {
			ret = page_present(m, c) ? mark_present_page(m, c) : mark_whole_page(m, c);
			if (ret < 0)
				return ret;
			c += SLP_ENTRIES;
			continue;
		}
		uint8_t v = dirty_map_get(m, c);

		if ((v & (DIRTY_BIT | RECORD_BIT)) != DIRTY_BIT) {
			ret = dirty_map_set(m, c,
					    (uint8_t)((v & ~(RECORD_BIT | RECORD_OLD_BIT)) | DIRTY_BIT));
			if (ret < 0)
				return ret;
		}
		c++;
	}
	return 0;
}

int dirty_map_record(struct dirty_map *m, uint64_t first, uint64_t count)
{
	if (first > m->nchunks || count > m->nchunks - first)
		return -ERANGE;
	for (uint64_t c = first; c < first + count; c++) {
		uint8_t v = dirty_map_get(m, c);
		int ret;

		if (v & (DIRTY_BIT | RECORD_BIT))
			continue;
		ret = dirty_map_set(m, c, v | RECORD_BIT);
		if (ret < 0)
			return ret;
	}
	return 0;
}

uint64_t dirty_map_next(const struct dirty_map *m, uint64_t from, uint8_t bits)
{
	uint64_t c = from;

	while (c < m->nchunks) {
		unsigned r, f, e;
		const struct dirty_flp *flp;
		const struct dirty_slp *slp;

		split(c, &r, &f, &e);
		flp = m->root[r];
		if (!flp) {
			c = (uint64_t)(r + 1) << (DIRTY_SLP_SHIFT + DIRTY_FLP_SHIFT);
			continue;
		}
		slp = flp->slp[f];
		if (!slp) {
			c = ((c >> DIRTY_SLP_SHIFT) + 1) << DIRTY_SLP_SHIFT;
			continue;
		}
		if (slp->dense) {
			for (; e < SLP_ENTRIES; e++)
				if (slp->u.bytes[e] & bits)
					goto found;
		} else {
			bool hit;
			unsigned pos = sparse_find(slp, e, &hit);

			for (; pos < slp->used; pos++) {
				if (slp->u.sp.val[pos] & bits) {
					e = slp->u.sp.idx[pos];
					goto found;
				}
			}
		}
		c = ((c >> DIRTY_SLP_SHIFT) + 1) << DIRTY_SLP_SHIFT;
		continue;
found:
		c = (c & ~(uint64_t)(SLP_ENTRIES - 1)) | e;
		return c < m->nchunks ? c : UINT64_MAX;
	}
	return UINT64_MAX;
}

/* The runs of aligned 2^@shift-chunk blocks holding dirty chunks; @max + 1 if more. */
static unsigned cover_at(const struct dirty_map *m, uint8_t bits, unsigned shift, unsigned max,
			 struct dirty_range *out)
{
	uint64_t block = 1ull << shift, c = dirty_map_next(m, 0, bits);
	unsigned n = 0;

	while (c != UINT64_MAX) {
		uint64_t first = c >> shift << shift, end = first + block;

		/* The run goes on while the next dirty chunk lies in the block after it. */
		for (;;) {
			c = end < m->nchunks ? dirty_map_next(m, end, bits) : UINT64_MAX;
			if (c == UINT64_MAX || c >= end + block)
				break;
			end += block;
		}
		if (n == max)
			return max + 1;
		out[n].first = first;
		out[n].count = RMR_MIN(end, m->nchunks) - first;
		n++;
	}
	return n;
}

unsigned dirty_map_cover_bits(const struct dirty_map *m, uint8_t bits, unsigned max,
			      struct dirty_range *out)
{
	/* One block of the whole map is one range: the loop ends there at the latest. */
	for (unsigned shift = 0;; shift++) {
		unsigned n = cover_at(m, bits, shift, max, out);

		if (n <= max)
			return n;
	}
}

unsigned dirty_map_cover(const struct dirty_map *m, unsigned max, struct dirty_range *out)
{
	return dirty_map_cover_bits(m, DIRTY_BIT, max, out);
}

int dirty_map_age(struct dirty_map *m, uint64_t first, uint64_t count)
{
	if (first > m->nchunks || count > m->nchunks - first)
		return -ERANGE;
	for (uint64_t c = dirty_map_next(m, first, RECORD_BIT); c < first + count;
	     c = dirty_map_next(m, c + 1, RECORD_BIT)) {
		uint8_t v = dirty_map_get(m, c);
		int ret = (v & RECORD_OLD_BIT) ? 0 : dirty_map_set(m, c, v | RECORD_OLD_BIT);

		if (ret < 0)
			return ret;
	}
	return 0;
}

int dirty_map_merge_records(struct dirty_map *dst, const struct dirty_map *src, bool absorb,
			    bool age)
{
	for (uint64_t c = dirty_map_next(src, 0, DIRTY_BIT | RECORD_BIT); c != UINT64_MAX;
	     c = dirty_map_next(src, c + 1, DIRTY_BIT | RECORD_BIT)) {
		uint8_t v = dirty_map_get(src, c), d = dirty_map_get(dst, c);
		uint8_t old = (age || (v & RECORD_OLD_BIT)) ? RECORD_OLD_BIT : 0;
		int ret = 0;

		if (v & DIRTY_BIT)
			ret = dirty_map_mark(dst, c, 1);
		else if (absorb && !(d & DIRTY_BIT))
			ret = dirty_map_set(dst, c, d | DIRTY_BIT | RECORD_BIT | old);
		else if (absorb && (d & RECORD_BIT))
			ret = dirty_map_set(dst, c, d | old); /* a record already: the older boot counts */
		else if (!absorb && !(d & DIRTY_BIT))
			ret = dirty_map_set(dst, c, d | RECORD_BIT | old);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int dirty_map_merge(struct dirty_map *dst, const struct dirty_map *src)
{
	return dirty_map_merge_records(dst, src, false, false);
}

int dirty_map_absorb(struct dirty_map *dst, const struct dirty_map *src)
{
	return dirty_map_merge_records(dst, src, true, false);
}
