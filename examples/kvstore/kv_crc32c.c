/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CRC-32C: the SSE4.2 instruction where the CPU has it (a bucket header and
 * an entry are checksummed on every write), else slicing-by-8 tables.
 */
#include "kv_crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static bool use_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= c; /* little-endian hosts only (x86-64, aarch64 as built here) */
		c = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
		    table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^
		    table[2][(v >> 40) & 0xff] ^ table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		len--;
	}
	c64 = c;
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	while (len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t kv_crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	return ~crc_sw(~crc, buf, len);
}

uint32_t kv_crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&once, init);
#if defined(__x86_64__)
	if (use_hw)
		return ~crc_hw(c, buf, len);
#endif
	return ~crc_sw(c, buf, len);
}
