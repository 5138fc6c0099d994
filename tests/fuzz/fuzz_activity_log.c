/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_activity_log: an activity-log record as read back from a member's
 * dirty-map area, through al_decode() and al_load().
 *
 * Input: 1 flag byte, the pool's chunk count (4 bytes LE), then the record.
 * Flag bit 0 makes the harness seal the record with a correct CRC first, so
 * that the fuzzer also reaches the checks behind the checksum.
 *
 * Besides "no crash": a record that decodes loads, and the log it loads
 * encodes to a record that decodes and loads to the same log (one sequence
 * number on), with every range inside the pool.
 */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "activity_log.h"
#include "crc32c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Record header fields the seal needs (see struct al_wire_header). */
#define AL_COUNT_OFF 32
#define AL_CRC_OFF 36

static struct activity_log al, al2;
static uint8_t enc[AL_RECORD_BYTES];

static void seal(uint8_t *rec, size_t len)
{
	uint32_t count, crc;
	size_t body;

	memcpy(&count, rec + AL_COUNT_OFF, 4);
	count = le32toh(count);
	if (count > AL_MAX_ENTRIES)
		return;
	body = AL_HEADER_BYTES + (size_t)count * AL_ENTRY_BYTES;
	if (body > len)
		return;
	memset(rec + AL_CRC_OFF, 0, 4);
	crc = htole32(crc32c(0, rec, body));
	memcpy(rec + AL_CRC_OFF, &crc, 4);
}

static void check_range(void *ctx, uint64_t first, uint32_t count)
{
	uint64_t nchunks = *(const uint64_t *)ctx;

	if (!count || first >= nchunks || count > nchunks - first)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_record r, r2;
	char why[160] = "";
	uint64_t nchunks;
	uint32_t nc;
	uint8_t *rec;
	size_t len;
	int ret;

	if (size < 5)
		return 0;
	memcpy(&nc, data + 1, 4);
	nchunks = le32toh(nc);
	len = size - 5;
	/* An exact-size copy: ASan sees any read past the record. */
	rec = malloc(len ? len : 1);
	if (!rec)
		return 0;
	memcpy(rec, data + 5, len);
	if ((data[0] & 1) && len >= AL_HEADER_BYTES)
		seal(rec, len);

	ret = al_decode(rec, len, nchunks, &r, why, sizeof(why));
	if (ret < 0) {
		if (!why[0])
			abort();
		free(rec);
		return 0;
	}
	if (r.count > AL_MAX_ENTRIES)
		abort();
	al_init(&al);
	al_load(&al, rec, &r);
	free(rec);
	if (al.n > r.count || al.seq != r.seq || al.writer != r.writer)
		abort();
	al_for_each(&al, check_range, &nchunks);

	/* Round trip: what the member would write next decodes to the same log. */
	len = al_encode(&al, enc);
	if (len > AL_RECORD_BYTES || len != al_record_len(al.n))
		abort();
	if (al_decode(enc, len, nchunks, &r2, why, sizeof(why)) < 0)
		abort();
	if (r2.seq != r.seq + 1 || r2.count != al.n || r2.writer != r.writer ||
	    r2.writer_epoch != r.writer_epoch || r2.holder != r.holder)
		abort();
	al_init(&al2);
	al_load(&al2, enc, &r2);
	if (al2.n != al.n)
		abort();
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++)
		if (al2.e[i].used != al.e[i].used || al2.e[i].first != al.e[i].first ||
		    al2.e[i].count != al.e[i].count)
			abort();
	return 0;
}
