/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), slice-by-8.
 *
 * Only metadata is checksummed (a few KiB per superblock or metadata save),
 * so portable slice-by-8 is plenty; the SSE4.2 instruction would add a CPU
 * dispatch for no measurable gain. The tables are built once, thread-safely,
 * with pthread_once.
 */
#include "crc32c.h"

#include <pthread.h>

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = crc32c_table[0][n];

		for (int t = 1; t < 8; t++) {
			c = crc32c_table[0][c & 0xff] ^ (c >> 8);
			crc32c_table[t][n] = c;
		}
	}
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	/* Byte-wise until 8-aligned, then 8 bytes per step, then the tail. */
	while (len && ((uintptr_t)p & 7)) {
		crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		/* Assemble little-endian words by hand: correct on any host. */
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
				     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
			      (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;

		crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		      crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		      crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		      crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
