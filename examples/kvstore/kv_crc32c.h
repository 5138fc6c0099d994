/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CRC-32C (Castagnoli), as on every checksummed byte the kvstore writes:
 * reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF,
 * so kv_crc32c(0, "123456789", 9) == 0xE3069283. Chains: pass the previous
 * result as @crc to continue a checksum over more bytes.
 */
#ifndef KVSTORE_CRC32C_H
#define KVSTORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t kv_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same without the CPU instruction (the tests compare the two). */
uint32_t kv_crc32c_portable(uint32_t crc, const void *buf, size_t len);

#endif
