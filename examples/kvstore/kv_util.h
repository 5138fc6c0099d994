/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* kv_util.h: small helpers the kvstore programs share. */
#ifndef KVSTORE_UTIL_H
#define KVSTORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Parse a decimal in [min, max]. @return 0 or -EINVAL. */
int kv_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parse a size: a number with an optional K, M, G (binary) suffix. @return 0 or -EINVAL. */
int kv_parse_size(const char *s, uint64_t *out);
/*
 * Parse a signed 64-bit decimal as Redis does for integers: an optional
 * '-', no '+', no leading zeroes or spaces, nothing after it.
 */
bool kv_parse_i64(const char *s, size_t len, int64_t *out);
/* Write @text to @path through PATH.tmp and rename(): all or nothing. @return 0 or -errno. */
int kv_write_file_atomic(const char *path, const char *text);
/* Unix time in milliseconds (expiry times are absolute, kept in the data). */
uint64_t kv_now_ms(void);
/* Monotonic milliseconds. */
uint64_t kv_mono_ms(void);
/* Read exactly @len bytes at @off. @return 0, -EIO at an early end, or -errno. */
int kv_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Write exactly @len bytes at @off; with @dsync durable on return. @return 0 or -errno. */
int kv_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, bool dsync);
/* Listen on a unix socket (mode 0600), replacing a stale one. @return fd or -errno. */
int kv_listen_unix(const char *path, char *why, size_t whylen);

#endif
