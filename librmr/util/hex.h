/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One hex digit, for the text forms of UUIDs and pool keys. */
#ifndef RMR_UTIL_HEX_H
#define RMR_UTIL_HEX_H

/* The value of hex digit @c (either case), or -1 if it is not one. */
static inline int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
