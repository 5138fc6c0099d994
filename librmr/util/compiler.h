/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by every librmr source file. */
#ifndef RMR_UTIL_COMPILER_H
#define RMR_UTIL_COMPILER_H

#include <stddef.h>

/* Marks a symbol of the public API; everything else is hidden. */
#define RMR_EXPORT __attribute__((visibility("default")))

#define RMR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define rmr_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define rmr_likely(x) __builtin_expect(!!(x), 1)
#define rmr_unlikely(x) __builtin_expect(!!(x), 0)
#define RMR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RMR_MAX(a, b) ((a) > (b) ? (a) : (b))

/*
 * Options structs carry their size so that they can grow: a caller built
 * against an older header passes a smaller size and the missing fields read
 * as zero. Copies @p src (which says its size in its first field) into
 * @p dst, zero-filling the rest. Returns false if @p src is too small to
 * hold the size field itself.
 */
#include <stdbool.h>
#include <string.h>
static inline bool rmr_opts_copy(void *dst, size_t dst_size, const void *src)
{
	size_t src_size;

	if (!src)
		return false;
	memcpy(&src_size, src, sizeof(src_size));
	if (src_size < sizeof(size_t))
		return false;
	memset(dst, 0, dst_size);
	memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
	memcpy(dst, &dst_size, sizeof(dst_size));
	return true;
}

#endif
