/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CRC-32C (Castagnoli), the checksum of every on-disk record of librmr and libbrmr. */
#ifndef RMR_CRC32C_H
#define RMR_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC-32C over @p len bytes at @p buf. Start with crc = 0; the
 * pre- and post-inversion are done inside, so crc32c(crc32c(0, a), b) equals
 * the CRC of a followed by b. crc32c(0, "123456789", 9) == 0xe3069283.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The same, always without the CPU's crc32 instruction (for tests). */
uint32_t crc32c_portable(uint32_t crc, const void *buf, size_t len);

/* Does crc32c() use the CPU's crc32 instruction here? */
bool crc32c_hardware(void);

#endif
