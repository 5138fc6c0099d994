/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The member's rmr store callbacks: the front's requests (kv_wire.h)
 * applied to the bucket pages, bucket copies for a peer's resync, and
 * librmr's metadata. All on librmr's event loop, synchronously: a page is
 * never half-changed while a peer copies it, so a bucket copy is always a
 * consistent snapshot.
 *
 * Errors: a request that is wrong in itself (malformed, a key in the wrong
 * bucket, a bucket too full for the entry) gets -EINVAL or -ERANGE, which
 * every member answers alike and librmr does not hold against the member;
 * a damaged page or a failed file write gets -EIO, which takes this member
 * out until it resyncs.
 */
#include "kv_log.h"
#include "kv_sha256.h"
#include "kv_store.h"
#include "kv_util.h"
#include "kv_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* The bucket whose first byte is @addr; false if @addr is not one. */
static bool bucket_at(const struct kv_store *s, uint64_t addr, uint64_t *b)
{
	if (addr % s->bucket_size || addr / s->bucket_size >= s->nbuckets)
		return false;
	*b = addr / s->bucket_size;
	return true;
}

/* The index of bucket @b, built at first use; NULL if memory is short (the page is walked then). */
static struct kv_index *bucket_index(struct kv_store *s, uint64_t b)
{
	struct kv_index *x = &s->index[b];

	if (!x->cap && kv_index_build(x, kv_store_page(s, b)) < 0)
		return NULL;
	return x;
}

/* Find @key in @page through its index @x, or by a walk if it has none. */
static bool page_find(const struct kv_index *x, const uint8_t *page, const void *key,
		      uint32_t klen, uint64_t hash, struct kv_entry *e)
{
	return x ? kv_index_find(x, page, key, klen, hash, e)
		 : kv_bucket_find(page, key, klen, hash, e);
}

static bool store_find(struct kv_store *s, uint64_t b, const void *key, uint32_t klen,
		       uint64_t hash, struct kv_entry *e)
{
	return page_find(bucket_index(s, b), kv_store_page(s, b), key, klen, hash, e);
}

/* SET on bucket @b's page, its index kept in step. @return 0 or -ENOSPC. */
static int store_set(struct kv_store *s, uint64_t b, const struct kv_write *w, uint64_t hash,
		     struct kv_change *ch)
{
	struct kv_index *x = bucket_index(s, b);
	uint8_t *page = kv_store_page(s, b);
	struct kv_entry old;
	bool present = page_find(x, page, w->key, w->klen, hash, &old);
	uint32_t at;
	int ret = kv_bucket_set_found(page, b, &s->geom, w->key, w->klen, hash, w->value, w->vlen,
				      w->expire_ms, present ? &old : NULL, ch, &at);

	if (ret < 0 || !x || (present && old.size == kv_entry_size(w->klen, w->vlen)))
		return ret; /* refused, no index, or rewritten in place */
	if (present)
		kv_index_removed(x, old.off, old.size, old.tag);
	kv_index_added(x, at, kv_entry_tag(hash)); /* out of memory: dropped, rebuilt later */
	return 0;
}

/* DEL (with @deadline_ms: only if expired by then) on bucket @b. @return whether it went. */
static bool store_del(struct kv_store *s, uint64_t b, const struct kv_write *w, uint64_t hash,
		      uint64_t deadline_ms, struct kv_change *ch)
{
	struct kv_index *x = bucket_index(s, b);
	struct kv_entry e;

	*ch = (struct kv_change){ 0 };
	if (!store_find(s, b, w->key, w->klen, hash, &e) ||
	    (deadline_ms && (!e.expire_ms || e.expire_ms > deadline_ms)))
		return false;
	kv_bucket_del_found(kv_store_page(s, b), b, &s->geom, &e, ch);
	if (x)
		kv_index_removed(x, e.off, e.size, e.tag);
	return true;
}

static int page_failed(struct kv_store *s, uint64_t b, int err)
{
	/* Not on stable storage as asked (or a bug): serve nothing from it until a peer's copy comes. */
	if (!s->damaged[b]) {
		s->damaged[b] = 1;
		s->ndamaged++;
		s->keys -= kv_bucket_count(kv_store_page(s, b));
	}
	kv_index_drop(&s->index[b]);
	kv_log(KV_LOG_ERR, "bucket %" PRIu64 ": cannot write its page: %s", b, strerror(-err));
	return -EIO;
}

/* Empty the whole buckets of the range. */
static int apply_flushall(struct kv_store *s, const struct rmr_store_io *io)
{
	uint64_t first, end;
	int ret;

	if (!bucket_at(s, io->addr, &first) || !io->len || io->len % s->bucket_size || io->data ||
	    io->len / s->bucket_size > s->nbuckets - first)
		return -EINVAL;
	end = first + io->len / s->bucket_size;
	for (uint64_t b = first; b < end; b++) {
		uint8_t *page = kv_store_page(s, b);
		struct kv_change ch;

		kv_index_drop(&s->index[b]);
		if (s->damaged[b]) {
			/* Emptied, a damaged page is good again. */
			memset(page, 0, s->bucket_size);
			ret = kv_store_persist_page(s, b);
			if (ret < 0)
				return page_failed(s, b, ret);
			s->damaged[b] = 0;
			s->ndamaged--;
			continue;
		}
		if (kv_bucket_is_empty(page))
			continue;
		s->keys -= kv_bucket_count(page);
		kv_bucket_clear(page, &ch);
		ret = kv_store_persist(s, b, &ch, 1);
		if (ret < 0)
			return page_failed(s, b, ret);
	}
	return 0;
}

/* Byte ranges a batch changed, merged where close: each goes to the file once. */
#define BATCH_RANGES 16
#define RANGE_GAP 512u

static void note_change(struct kv_change *r, unsigned *n, const struct kv_change *c)
{
	unsigned i;

	if (c->hi <= c->lo)
		return;
	for (i = 0; i < *n; i++)
		if (c->lo <= r[i].hi + RANGE_GAP && r[i].lo <= c->hi + RANGE_GAP)
			break;
	if (i == *n && *n == BATCH_RANGES)
		i = *n - 1; /* no room: widen the last one */
	if (i == *n) {
		r[(*n)++] = (struct kv_change){ .lo = c->lo, .hi = c->hi };
		return;
	}
	r[i].lo = c->lo < r[i].lo ? c->lo : r[i].lo;
	r[i].hi = c->hi > r[i].hi ? c->hi : r[i].hi;
}

/*
 * Do the records [@start, @end) of a batch payload, all of bucket @b, fit
 * it together? Tried on a copy: the page is the file's (a shared mapping),
 * so records applied and then undone could leave it torn by a kill, and
 * the batch that tore it failed everywhere: nobody would hold it missed.
 */
static bool group_fits(struct kv_store *s, uint64_t b, const void *data, uint32_t start,
		       uint32_t end)
{
	uint8_t *page = s->scratch;
	const char *why = "";
	struct kv_change ch;
	struct kv_write w;

	memcpy(page, kv_store_page(s, b), s->bucket_size);
	for (uint32_t off = start; kv_wire_batch_next(data, end, &off, &w, &why) == 1;) {
		uint64_t hash = kv_hash(w.key, w.klen);

		if (w.op == KV_OP_SET) {
			if (kv_bucket_set(page, b, &s->geom, w.key, w.klen, hash, w.value, w.vlen,
					  w.expire_ms, &ch) < 0)
				return false;
		} else {
			kv_bucket_del(page, b, &s->geom, w.key, w.klen, hash,
				      w.op == KV_OP_DEL_EXPIRED ? w.expire_ms : 0, &ch);
		}
	}
	return true;
}

/*
 * The records [@start, @end) of a batch payload, all of bucket @b, that
 * grow its page by at most @grow bytes: all apply, or none (-ERANGE: the
 * bucket is too full for them together, and nothing changed).
 */
static int apply_group(struct kv_store *s, uint64_t b, const void *data, uint32_t start,
		       uint32_t end, uint64_t grow)
{
	struct kv_change ranges[BATCH_RANGES] = { { 0 } }, ch;
	uint8_t *page = kv_store_page(s, b);
	uint32_t before = kv_bucket_count(page);
	const char *why = "";
	unsigned nranges = 0;
	struct kv_write w;
	bool hdr = false;
	int ret;

	/* Only records that might not fit are tried first. */
	if (KV_BUCKET_HDR + kv_bucket_used(page) + grow > s->bucket_size &&
	    !group_fits(s, b, data, start, end))
		return -ERANGE;
	for (uint32_t off = start; kv_wire_batch_next(data, end, &off, &w, &why) == 1;) {
		uint64_t hash = kv_hash(w.key, w.klen);

		if (w.op == KV_OP_SET) {
			if (store_set(s, b, &w, hash, &ch) < 0) /* cannot be: they fit */
				return page_failed(s, b, -ENOSPC);
		} else {
			store_del(s, b, &w, hash, w.op == KV_OP_DEL_EXPIRED ? w.expire_ms : 0, &ch);
		}
		note_change(ranges, &nranges, &ch);
		hdr |= ch.hdr;
	}
	s->keys += kv_bucket_count(page);
	s->keys -= before;
	ranges[0].hdr = hdr;
	ret = kv_store_persist(s, b, ranges, nranges ? nranges : 1);
	return ret < 0 ? page_failed(s, b, ret) : 0;
}

/*
 * A batch: records of one bucket (a plain write inside it), or with
 * RMR_IO_PATCH of the whole buckets of the range, grouped by bucket in
 * ascending order. Every record is checked before any applies. All apply,
 * or none: a batch of several buckets any of which might be too full for
 * its records is refused whole (-ERANGE), before anything changes; the
 * front then sends each bucket's records on their own.
 */
static int apply_batch(struct kv_store *s, const struct rmr_store_io *io)
{
	const char *why = "";
	uint32_t off = 0;
	uint64_t first, nb, b = UINT64_MAX, grow = 0;
	unsigned groups = 0, risky = 0;
	struct kv_write w;
	int ret;

	if (!bucket_at(s, io->addr, &first) || !io->len || !io->data_len)
		return -EINVAL;
	if (io->flags & RMR_IO_PATCH) {
		if (io->len % s->bucket_size || io->len / s->bucket_size > s->nbuckets - first)
			return -EINVAL;
		nb = io->len / s->bucket_size;
	} else {
		if (io->len >= s->bucket_size || io->data_len != io->len)
			return -EINVAL;
		nb = 1;
	}
	for (;;) {
		uint64_t rb = 0;

		ret = kv_wire_batch_next(io->data, io->data_len, &off, &w, &why);
		if (ret < 0) {
			kv_log(KV_LOG_DEBUG, "batch at bucket %" PRIu64 ": %s", first, why);
			return -EINVAL;
		}
		if (ret == 1) {
			rb = kv_bucket_of_hash(kv_hash(w.key, w.klen), s->nbuckets);
			if (rb < first || rb - first >= nb || (groups && rb < b))
				return -EINVAL; /* outside the range, or not in bucket order */
		}
		if (groups && (ret == 0 || rb != b)) {
			/* Bucket b's records end here. */
			if (s->damaged[b])
				return -EIO;
			if (KV_BUCKET_HDR + kv_bucket_used(kv_store_page(s, b)) + grow > s->bucket_size)
				risky++;
		}
		if (ret == 0)
			break;
		if (!groups || rb != b) {
			b = rb;
			grow = 0;
			groups++;
		}
		if (w.op == KV_OP_SET)
			grow += kv_entry_size(w.klen, w.vlen);
	}
	if (!groups)
		return -EINVAL;
	if (groups > 1 && risky)
		return -ERANGE;
	/* Apply group by group. */
	for (off = 0; off < io->data_len;) {
		uint32_t gstart = off, next;

		kv_wire_batch_next(io->data, io->data_len, &off, &w, &why);
		b = kv_bucket_of_hash(kv_hash(w.key, w.klen), s->nbuckets);
		grow = w.op == KV_OP_SET ? kv_entry_size(w.klen, w.vlen) : 0;
		for (next = off; kv_wire_batch_next(io->data, io->data_len, &next, &w, &why) == 1 &&
				 kv_bucket_of_hash(kv_hash(w.key, w.klen), s->nbuckets) == b;
		     off = next)
			grow += w.op == KV_OP_SET ? kv_entry_size(w.klen, w.vlen) : 0;
		ret = apply_group(s, b, io->data, gstart, off, grow);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int apply_write(struct kv_store *s, const struct rmr_store_io *io)
{
	struct kv_write w;
	struct kv_change ch;
	const char *why = "";
	uint64_t b, hash;
	uint8_t *page;
	uint32_t before;
	int ret;

	if (io->op == KV_OP_FLUSHALL)
		return apply_flushall(s, io);
	if (io->op == KV_OP_BATCH)
		return apply_batch(s, io);
	if (!bucket_at(s, io->addr, &b) || io->len >= s->bucket_size || io->data_len != io->len) {
		kv_log(KV_LOG_DEBUG, "write op %u at %" PRIu64 "+%" PRIu32 ": not inside one bucket",
		       io->op, io->addr, io->len);
		return -EINVAL;
	}
	ret = kv_wire_decode_write(io->op, io->data, io->data_len, &w, &why);
	if (ret < 0) {
		kv_log(KV_LOG_DEBUG, "write op %u to bucket %" PRIu64 ": %s", io->op, b, why);
		return ret;
	}
	hash = kv_hash(w.key, w.klen);
	if (kv_bucket_of_hash(hash, s->nbuckets) != b)
		return -EINVAL;
	if (s->damaged[b])
		return -EIO;
	page = kv_store_page(s, b);
	before = kv_bucket_count(page);
	if (io->op == KV_OP_SET) {
		ret = store_set(s, b, &w, hash, &ch);
		if (ret == -ENOSPC)
			return -ERANGE; /* the same on every member: not this member's fault */
	} else {
		store_del(s, b, &w, hash, io->op == KV_OP_DEL_EXPIRED ? w.expire_ms : 0, &ch);
	}
	s->keys += kv_bucket_count(page);
	s->keys -= before;
	ret = kv_store_persist(s, b, &ch, 1);
	return ret < 0 ? page_failed(s, b, ret) : 0;
}

static uint32_t state_flags(const struct kv_store *s)
{
	return (atomic_load(&s->own_dirty) ? KV_STATE_RESYNCING : 0) |
	       (s->ndamaged ? KV_STATE_DAMAGED : 0);
}

/* Answer a read: the number of bytes filled, or -errno. */
static int serve_get(struct kv_store *s, const struct rmr_store_io *io)
{
	bool meta = io->op_flags & KV_GET_F_META;
	const void *key = io->arg ? io->arg : ""; /* the empty key is a key too */
	uint8_t *out = io->data;
	struct kv_entry e;
	uint64_t b, hash;

	if (io->op_flags & ~KV_GET_F_META || io->arg_len > KV_KEY_MAX || io->len < KV_GET_ANSWER_HDR ||
	    !bucket_at(s, io->addr, &b))
		return -EINVAL;
	hash = kv_hash(key, io->arg_len);
	if (kv_bucket_of_hash(hash, s->nbuckets) != b)
		return -EINVAL;
	if (s->damaged[b])
		return -EIO;
	memset(out, 0, KV_GET_ANSWER_HDR);
	if (!store_find(s, b, key, io->arg_len, hash, &e))
		return KV_GET_ANSWER_HDR;
	if (!meta && (uint64_t)KV_GET_ANSWER_HDR + e.vlen > io->len)
		return -ERANGE;
	kv_put_le32(out, 1);
	kv_put_le32(out + 4, e.vlen);
	kv_put_le64(out + 8, e.expire_ms);
	if (meta)
		return KV_GET_ANSWER_HDR;
	memcpy(out + KV_GET_ANSWER_HDR, e.value, e.vlen);
	return (int)(KV_GET_ANSWER_HDR + e.vlen);
}

/* One key of a KV_OP_MGET being answered. */
struct mget_key {
	const uint8_t *key;
	uint32_t klen;
	uint64_t hash, bucket;
	struct kv_index *x;          /* the bucket's index, or NULL */
};

/* Keys looked up together: enough to overlap their cache misses. */
#define MGET_WINDOW 16u

/*
 * Take the next @nw keys at *@p (checked already) and start fetching what
 * their lookups read: all their index slots, then the entries those point
 * to. A random key costs two cache misses; a window pays them about once.
 */
static void mget_window_fetch(struct kv_store *s, const uint8_t **p, struct mget_key *w,
			      unsigned nw)
{
	for (unsigned k = 0; k < nw; k++) {
		w[k].klen = kv_get_le32(*p);
		w[k].key = *p + 4;
		w[k].hash = kv_hash(w[k].key, w[k].klen);
		w[k].bucket = kv_bucket_of_hash(w[k].hash, s->nbuckets);
		w[k].x = bucket_index(s, w[k].bucket);
		if (w[k].x)
			kv_index_prefetch_slot(w[k].x, w[k].hash);
		*p += 4 + w[k].klen;
	}
	for (unsigned k = 0; k < nw; k++)
		if (w[k].x)
			kv_index_prefetch_entry(w[k].x, kv_store_page(s, w[k].bucket), w[k].hash);
}

/* Append @k's answer record at *@pos; false if it does not fit in @len bytes. */
static bool mget_answer(struct kv_store *s, const struct mget_key *k, uint8_t *out, uint32_t len,
			uint32_t *pos)
{
	struct kv_entry e;
	bool found = page_find(k->x, kv_store_page(s, k->bucket), k->key, k->klen, k->hash, &e);
	uint32_t need = KV_GET_ANSWER_HDR + (found ? e.vlen : 0);

	if (need > len - *pos)
		return false;
	kv_put_le32(out + *pos, found);
	kv_put_le32(out + *pos + 4, found ? e.vlen : 0);
	kv_put_le64(out + *pos + 8, found ? e.expire_ms : 0);
	if (found)
		memcpy(out + *pos + KV_GET_ANSWER_HDR, e.value, e.vlen);
	*pos += need;
	return true;
}

/*
 * Keys of many buckets in one read. librmr synced only the bucket the range
 * names, so this member answers only while it misses no bucket at all.
 */
static int serve_mget(struct kv_store *s, const struct rmr_store_io *io)
{
	const uint8_t *arg = io->arg, *end = arg + io->arg_len, *p;
	uint8_t *out = io->data;
	uint32_t count, n = 0, pos = KV_MGET_ANSWER_HDR;
	uint64_t b;

	if (io->op_flags || io->arg_len < 4 || io->len < KV_MGET_ANSWER_HDR ||
	    !bucket_at(s, io->addr, &b))
		return -EINVAL;
	count = kv_get_le32(arg);
	/* Every key checked before any is answered: a malformed request gets nothing. */
	p = arg + 4;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t klen;
		uint64_t hash;

		if (end - p < 4 || (klen = kv_get_le32(p)) > KV_KEY_MAX || (uint64_t)(end - p - 4) < klen)
			return -EINVAL;
		hash = kv_hash(p + 4, klen);
		if (i == 0 && kv_bucket_of_hash(hash, s->nbuckets) != b)
			return -EINVAL; /* the range names the first key's bucket */
		if (s->damaged[kv_bucket_of_hash(hash, s->nbuckets)])
			return -EIO;
		p += 4 + klen;
	}
	if (p != end || !count)
		return -EINVAL;
	if (atomic_load(&s->own_dirty))
		count = 0; /* key by key, please */
	for (p = arg + 4; n < count;) {
		struct mget_key w[MGET_WINDOW];
		unsigned nw = count - n < MGET_WINDOW ? count - n : MGET_WINDOW, k;

		mget_window_fetch(s, &p, w, nw);
		for (k = 0; k < nw && mget_answer(s, &w[k], out, io->len, &pos); k++)
			;
		n += k;
		if (k < nw)
			break; /* the rest in another request */
	}
	kv_put_le32(out, n);
	kv_put_le32(out + 4, state_flags(s));
	return (int)pos;
}

static int serve_dbsize(struct kv_store *s, const struct rmr_store_io *io)
{
	uint64_t now, keys = 0;

	if (io->op_flags || io->arg_len != KV_DBSIZE_ARG || io->len < KV_DBSIZE_ANSWER)
		return -EINVAL;
	now = kv_get_le64(io->arg);
	for (uint64_t b = 0; b < s->nbuckets; b++) {
		const uint8_t *page = kv_store_page(s, b);
		struct kv_entry e;
		uint32_t off = 0;

		if (s->damaged[b] || kv_bucket_is_empty(page))
			continue;
		while (kv_bucket_next(page, &off, &e))
			keys += !e.expire_ms || e.expire_ms > now;
	}
	kv_put_le64(io->data, keys);
	kv_put_le32((uint8_t *)io->data + 8, state_flags(s));
	kv_put_le32((uint8_t *)io->data + 12, 0);
	return KV_DBSIZE_ANSWER;
}

static int serve_digest(struct kv_store *s, const struct rmr_store_io *io)
{
	uint8_t *out = io->data;
	uint64_t keys, damaged;
	int ret;

	if (io->op_flags || io->arg_len || io->len < KV_DIGEST_ANSWER)
		return -EINVAL;
	ret = kv_store_digest(s, out, &keys, &damaged);
	if (ret < 0)
		return ret;
	kv_put_le64(out + KV_SHA256_LEN, keys);
	kv_put_le32(out + KV_SHA256_LEN + 8, state_flags(s));
	kv_put_le32(out + KV_SHA256_LEN + 12, 0);
	return KV_DIGEST_ANSWER;
}

int kv_store_apply(struct kv_store *s, struct rmr_store_io *io)
{
	int ret;

	if (io->kind == RMR_IO_WRITE) {
		ret = apply_write(s, io);
	} else {
		switch (io->op) {
		case KV_OP_GET:
			ret = serve_get(s, io);
			break;
		case KV_OP_MGET:
			ret = serve_mget(s, io);
			break;
		case KV_OP_DBSIZE:
			ret = serve_dbsize(s, io);
			break;
		case KV_OP_DIGEST:
			ret = serve_digest(s, io);
			break;
		default:
			ret = -EOPNOTSUPP;
			break;
		}
	}
	return ret;
}

static void store_io(void *arg, struct rmr_store_io *io)
{
	rmr_store_io_done(io, kv_store_apply(arg, io));
}

/* A bucket copy is exactly one whole page: every member's max io is at least a bucket. */
static int whole_page(const struct kv_store *s, uint64_t addr, uint32_t len, uint64_t *b)
{
	if (!bucket_at(s, addr, b) || len != s->bucket_size) {
		kv_log(KV_LOG_ERR, "bucket copy of %" PRIu32 " bytes at %" PRIu64 ": only whole buckets are copied (max io below the bucket size?)",
		       len, addr);
		return -EINVAL;
	}
	return 0;
}

/*
 * A peer's resync copies a whole bucket, from memory: one consistent
 * snapshot, never a damaged page (the peer then asks another member). Any
 * other range inside a bucket is librmr checking that this store still
 * works before it takes the dirty maps: read from the file, as is.
 */
static int store_chunk_export(void *arg, uint64_t addr, void *buf, uint32_t len)
{
	struct kv_store *s = arg;
	uint64_t b;

	if (len == s->bucket_size && bucket_at(s, addr, &b)) {
		if (s->damaged[b])
			return -EIO;
		memcpy(buf, kv_store_page(s, b), len);
		return 0;
	}
	if (!len || addr >= s->pool_size || len > s->bucket_size - addr % s->bucket_size)
		return -EINVAL;
	return kv_pread_full(s->fd, buf, len, s->data_offset + addr);
}

/* Through the page cache: librmr calls flush before it records the bucket clean. */
static int store_chunk_import(void *arg, uint64_t addr, const void *buf, uint32_t len)
{
	struct kv_store *s = arg;
	char why[160];
	bool was_damaged;
	uint64_t b;
	uint8_t *page;
	int ret = whole_page(s, addr, len, &b);

	if (ret < 0)
		return ret;
	if (kv_bucket_check(buf, b, &s->geom, why, sizeof(why)) < 0) {
		kv_log(KV_LOG_ERR, "bucket %" PRIu64 ": the copy from a peer is bad: %s", b, why);
		return -EIO;
	}
	page = kv_store_page(s, b);
	was_damaged = s->damaged[b];
	if (!was_damaged)
		s->keys -= kv_bucket_count(page);
	memcpy(page, buf, len);
	kv_index_drop(&s->index[b]);
	ret = kv_store_persist_page(s, b);
	if (ret < 0) {
		if (!was_damaged) {
			s->damaged[b] = 1;
			s->ndamaged++;
		}
		kv_log(KV_LOG_ERR, "bucket %" PRIu64 ": cannot write the copy from a peer: %s", b,
		       strerror(-ret));
		return -EIO;
	}
	if (was_damaged) {
		s->damaged[b] = 0;
		s->ndamaged--;
		kv_log(KV_LOG_NOTICE, "bucket %" PRIu64 ": damaged page replaced by a peer's copy", b);
	}
	s->keys += kv_bucket_count(page);
	return 0;
}

static int store_meta_load(void *arg, void *buf, size_t cap, size_t *len)
{
	return kv_store_meta_load(arg, buf, cap, len);
}

static int store_meta_save(void *arg, const void *buf, size_t len)
{
	return kv_store_meta_save(arg, buf, len);
}

static int store_flush(void *arg)
{
	return kv_store_flush(arg);
}

static int store_map_read(void *arg, uint64_t off, void *buf, size_t len)
{
	return kv_store_map_read(arg, off, buf, len);
}

static int store_map_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	return kv_store_map_write(arg, off, buf, len);
}

const struct rmr_store_ops kv_store_ops = {
	.size = sizeof(struct rmr_store_ops),
	.io = store_io,
	.chunk_export = store_chunk_export,
	.chunk_import = store_chunk_import,
	.meta_load = store_meta_load,
	.meta_save = store_meta_save,
	.flush = store_flush,
	.map_read = store_map_read,
	.map_write = store_map_write,
};
