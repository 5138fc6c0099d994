/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* brmrctl inspect: read and check a store's superblock (read-only). */
#include "brmrctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void inspect_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl inspect --store PATH [--json]\n"
		"\n"
		"Read and check a store's superblock (read-only) and print its fields.\n"
		"\n"
		"  --store PATH  the store (file or block device)\n"
		"  --json        one JSON object instead of 'key value' lines\n");
}

/*
 * The superblock decoder admits only printable ASCII in addresses and
 * [A-Za-z0-9._-] in names, so quotes and backslashes are all there is to
 * escape; paths come from the command line and may hold anything.
 */
static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

int cmd_inspect(int argc, char **argv)
{
	enum { O_STORE = 256, O_JSON, O_HELP };
	static const struct option opts[] = {
		{ "store", required_argument, NULL, O_STORE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_member members[RMR_MAX_MEMBERS];
	struct brmr_store *s;
	const char *path = NULL;
	bool json = false;
	char why[512] = "", uuid[37];
	int c, ret, n;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_STORE:
			path = optarg;
			break;
		case O_JSON:
			json = true;
			break;
		case O_HELP:
			inspect_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!path)
		return die(EXIT_USAGE, "--store is required");
	ret = brmr_store_open(path, &s, why, sizeof(why));
	if (ret < 0)
		return die(EXIT_RUNTIME, "store %s: %s", path, why[0] ? why : strerror(-ret));
	brmr_store_info(s, &info);
	n = brmr_store_members(s, members, RMR_MAX_MEMBERS);
	brmr_store_close(s);
	if (n > RMR_MAX_MEMBERS)
		n = RMR_MAX_MEMBERS;
	rmr_uuid_format(&info.pool_uuid, uuid);

	if (json) {
		printf("{\"store\":");
		json_string(path);
		printf(",\"format_version\":%" PRIu32 ",\"pool_name\":\"%s\",\"pool_uuid\":\"%s\""
		       ",\"pool_size\":%" PRIu64 ",\"chunk_size\":%" PRIu32 ",\"member_id\":%u"
		       ",\"data_offset\":%" PRIu64 ",\"meta_offset\":%" PRIu64
		       ",\"meta_size\":%" PRIu64 ",\"map_offset\":%" PRIu64
		       ",\"map_size\":%" PRIu64 ",\"sequence\":%" PRIu64
		       ",\"data_lost\":%s,\"members\":[",
		       info.format_version, info.pool_name, uuid, info.pool_size, info.chunk_size,
		       info.member_id, info.data_offset, info.meta_offset, info.meta_size,
		       info.map_offset, info.map_size, info.sequence,
		       info.data_lost ? "true" : "false");
		for (int i = 0; i < n; i++) {
			printf("%s{\"id\":%u,\"addr\":", i ? "," : "", members[i].id);
			json_string(members[i].addr);
			putchar('}');
		}
		printf("]}\n");
	} else {
		printf("store %s\n", path);
		printf("format_version %" PRIu32 "\n", info.format_version);
		printf("pool_name %s\n", info.pool_name);
		printf("pool_uuid %s\n", uuid);
		printf("pool_size %" PRIu64 "\n", info.pool_size);
		printf("chunk_size %" PRIu32 "\n", info.chunk_size);
		printf("member_id %u\n", info.member_id);
		printf("data_offset %" PRIu64 "\n", info.data_offset);
		printf("meta_offset %" PRIu64 "\n", info.meta_offset);
		printf("meta_size %" PRIu64 "\n", info.meta_size);
		printf("map_offset %" PRIu64 "\n", info.map_offset);
		printf("map_size %" PRIu64 "\n", info.map_size);
		printf("sequence %" PRIu64 "\n", info.sequence);
		printf("data_lost %s\n", info.data_lost ?
		       "yes (a write-back failed: not served again; replace the store)" : "no");
		printf("members %d\n", n);
		for (int i = 0; i < n; i++)
			printf("member %u %s\n", members[i].id, members[i].addr);
	}
	return fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
}

