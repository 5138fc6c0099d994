/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "compiler.h"
#include "hex.h"
#include <rmr/rmr.h>

RMR_EXPORT int rmr_uuid_parse(const char *text, rmr_uuid *out)
{
	size_t i, n = 0;

	if (!text || !out || strlen(text) != 36)
		return -EINVAL;
	for (i = 0; i < 36;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (text[i++] != '-')
				return -EINVAL;
			continue;
		}
		int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out->b[n++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

RMR_EXPORT void rmr_uuid_format(const rmr_uuid *u, char buf[37])
{
	const uint8_t *b = u->b;

	snprintf(buf, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		 b[12], b[13], b[14], b[15]);
}

RMR_EXPORT int rmr_uuid_generate(rmr_uuid *out)
{
	size_t got = 0;

	while (got < sizeof(out->b)) {
		ssize_t n = getrandom(out->b + got, sizeof(out->b) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	out->b[6] = (out->b[6] & 0x0f) | 0x40;
	out->b[8] = (out->b[8] & 0x3f) | 0x80;
	return 0;
}
