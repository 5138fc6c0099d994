/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by libbrmr's source files. */
#ifndef BRMR_INTERNAL_H
#define BRMR_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

/* Marks a symbol of the public API; everything else is hidden. */
#define BRMR_EXPORT __attribute__((visibility("default")))

/* Format a one-line reason into @p why (which may be NULL) and return @p err. */
static inline int __attribute__((format(printf, 4, 5)))
fail(int err, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

#endif
