/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_config: a pool file through brmr_config_parse(), the parser that
 * brmr-server, nbd-brmr and brmrctl share.
 *
 * Input: the file's text, as is.
 *
 * Besides "no crash": a refusal says "FILE:LINE: reason"; an accepted file
 * holds together: a name, a UUID that is not all zero, a size that is a
 * positive multiple of 4096, a power-of-two chunk size, 1..RMR_MAX_MEMBERS
 * members with distinct ids 1..RMR_MAX_MEMBER_ID and NUL-terminated
 * strings, 1 <= min_legs <= members, and it parses the same way twice.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rmr/brmr_config.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct brmr_config cfg, again;

static void check_accepted(const struct brmr_config *c)
{
	static const uint8_t zero[sizeof(c->uuid)];
	uint64_t seen = 0;

	if (!c->name[0] || strnlen(c->name, sizeof(c->name)) > RMR_NAME_MAX ||
	    !memcmp(&c->uuid, zero, sizeof(zero)) || !c->pool_size || c->pool_size % 4096 ||
	    c->chunk_size < 4096 || (c->chunk_size & (c->chunk_size - 1)) || !c->nmembers ||
	    c->nmembers > RMR_MAX_MEMBERS || !c->min_legs || c->min_legs > c->nmembers)
		abort();
	for (unsigned i = 0; i < c->nmembers; i++) {
		const struct brmr_config_member *m = &c->members[i];

		if (!m->id || m->id > RMR_MAX_MEMBER_ID || (seen & (1ull << m->id)) ||
		    strnlen(m->address, sizeof(m->address)) == sizeof(m->address) ||
		    strnlen(m->store, sizeof(m->store)) == sizeof(m->store) ||
		    strnlen(m->control, sizeof(m->control)) == sizeof(m->control))
			abort();
		seen |= 1ull << m->id;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	int ret;

	if (size > BRMR_CONFIG_FILE_MAX)
		return 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	err[0] = '\0';
	ret = brmr_config_parse("f.conf", (const char *)data, size, &cfg, err, sizeof(err));
	if (ret < 0) {
		if (ret != -EINVAL || strncmp(err, "f.conf:", 7))
			abort();
		return 0;
	}
	check_accepted(&cfg);
	memset(&again, 0, sizeof(again));
	again.size = sizeof(again);
	if (brmr_config_parse("f.conf", (const char *)data, size, &again, NULL, 0) != 0 ||
	    memcmp(&cfg, &again, sizeof(cfg)))
		abort();
	return 0;
}
