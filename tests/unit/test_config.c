/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pool configuration file: defaults, every key, every refusal with its line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rmr/brmr.h>
#include <rmr/brmr_config.h>

#include "unit.h"

static struct brmr_config cfg;
static char err[512];

static int parse(const char *text)
{
	memset(&cfg, 0xa5, sizeof(cfg));
	cfg.size = sizeof(cfg);
	return brmr_config_parse("t.conf", text, strlen(text), &cfg, err, sizeof(err));
}

/* @p text must be refused with exactly "t.conf:LINE: " + a message containing @p what. */
#define refused(text, line, what)                                                          \
	do {                                                                               \
		char want_[64];                                                            \
		int r_ = parse(text);                                                      \
		snprintf(want_, sizeof(want_), "t.conf:%d: ", (line));                     \
		ck_assert_msg(r_ == -EINVAL, "accepted: %s", (text));                      \
		ck_assert_msg(!strncmp(err, want_, strlen(want_)), "want line %d: %s",     \
			      (line), err);                                                \
		ck_assert_msg(strstr(err, (what)) != NULL, "want '%s' in: %s", (what), err); \
		ck_assert_msg(!strchr(err, '\n'), "not one line: %s", err);                \
	} while (0)

#define POOL                                                                               \
	"[pool]\n"                                                                         \
	"name = vol1\n"                                                                    \
	"uuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca427\n"                                    \
	"size = 10G\n"
#define M1 "[member 1]\naddress = 10.0.0.1:7000\nstore = /dev/nvme0n1\n"
#define M2 "[member 2]\naddress = 10.0.0.2:7000\nstore = /dev/nvme0n1\n"

START_TEST(defaults)
{
	ck_assert_int_eq(parse(POOL M1), 0);
	ck_assert_str_eq(cfg.file, "t.conf");
	ck_assert_uint_eq(cfg.line, 1);
	ck_assert_str_eq(cfg.name, "vol1");
	ck_assert_uint_eq(cfg.pool_size, 10ull << 30);
	ck_assert_uint_eq(cfg.chunk_size, 128 * 1024);
	ck_assert_str_eq(cfg.transport, "fabric");
	ck_assert_str_eq(cfg.provider, "tcp");
	ck_assert_uint_eq(cfg.min_legs, 1);
	ck_assert_uint_eq(cfg.queue_depth, 128);
	ck_assert_uint_eq(cfg.sync_queue_depth, 32);
	ck_assert_uint_eq(cfg.resync_rate, 0);
	ck_assert_uint_eq(cfg.heartbeat_ms, 250);
	ck_assert_uint_eq(cfg.failure_timeout_ms, 2000);
	ck_assert_uint_eq(cfg.request_timeout_ms, 10000);
	ck_assert_uint_eq(cfg.nmembers, 1);
	ck_assert_uint_eq(cfg.members[0].id, 1);
	ck_assert_uint_eq(cfg.members[0].line, 5);
	ck_assert_str_eq(cfg.members[0].address, "10.0.0.1:7000");
	ck_assert_str_eq(cfg.members[0].store, "/dev/nvme0n1");
	ck_assert_str_eq(cfg.members[0].control, "/run/brmr/vol1-m1.ctl");
	ck_assert_str_eq(cfg.client_socket, "/run/brmr/vol1.nbd.sock");
	ck_assert_str_eq(cfg.client_tcp, "");
	ck_assert_str_eq(cfg.client_control, "/run/brmr/vol1-client.ctl");
	ck_assert_uint_eq(cfg.poll_us, 100);
	ck_assert_ptr_eq(brmr_config_member(&cfg, 1), &cfg.members[0]);
	ck_assert_ptr_null(brmr_config_member(&cfg, 2));
}
END_TEST

START_TEST(every_key)
{
	static const char text[] =
		"# the design's example\r\n"
		"[pool]\n"
		"name = vol1\n"
		"uuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca427\n"
		"size = 10G                  ; K/M/G/T suffixes (binary)\n"
		"chunk_size = 1M\n"
		"transport = fabric          ; provider = tcp|shm|verbs\n"
		"provider = verbs\n"
		"min_legs = 2\n"
		"queue_depth = 512\n"
		"sync_queue_depth = 64\n"
		"resync_rate = 100M\n"
		"heartbeat_ms = 100\n"
		"failure_timeout_ms = 200\n"
		"request_timeout_ms = 5000\n"
		"\n"
		"  ; an indented comment\n"
		"[member 7]\n"
		"address = 10.0.0.1:7000     ; where its brmr-server listens\n"
		"store = /srv/brmr/my store#1\n"
		"control = /run/brmr/x.ctl\n"
		"[ member   63 ]\n"
		"address=[fe80::1]:7000\n"
		"store=/dev/sdb\n"
		"[client]\n"
		"tcp = 127.0.0.1:10809\n"
		"control = /run/c.ctl\n"
		"poll_us = 0                 ; never poll\n";

	ck_assert_msg(parse(text) == 0, "%s", err);
	ck_assert_uint_eq(cfg.chunk_size, 1 << 20);
	ck_assert_str_eq(cfg.provider, "verbs");
	ck_assert_uint_eq(cfg.min_legs, 2);
	ck_assert_uint_eq(cfg.queue_depth, 512);
	ck_assert_uint_eq(cfg.sync_queue_depth, 64);
	ck_assert_uint_eq(cfg.resync_rate, 100u << 20);
	ck_assert_uint_eq(cfg.heartbeat_ms, 100);
	ck_assert_uint_eq(cfg.failure_timeout_ms, 200);
	ck_assert_uint_eq(cfg.request_timeout_ms, 5000);
	ck_assert_uint_eq(cfg.poll_us, 0);
	ck_assert_uint_eq(cfg.nmembers, 2);
	ck_assert_uint_eq(cfg.members[0].id, 7);
	ck_assert_uint_eq(cfg.members[0].line, 18);
	/* '#' not after a blank belongs to the value. */
	ck_assert_str_eq(cfg.members[0].store, "/srv/brmr/my store#1");
	ck_assert_str_eq(cfg.members[0].control, "/run/brmr/x.ctl");
	ck_assert_uint_eq(cfg.members[1].id, 63);
	ck_assert_str_eq(cfg.members[1].address, "[fe80::1]:7000");
	ck_assert_str_eq(cfg.members[1].control, "/run/brmr/vol1-m63.ctl");
	ck_assert_str_eq(cfg.client_socket, "");
	ck_assert_str_eq(cfg.client_tcp, "127.0.0.1:10809");
	ck_assert_str_eq(cfg.client_control, "/run/c.ctl");
	ck_assert_ptr_eq(brmr_config_member(&cfg, 63), &cfg.members[1]);
	ck_assert_uint_eq(cfg.uuid.b[0], 0x1b);
	ck_assert_uint_eq(cfg.uuid.b[15], 0x27);
}
END_TEST

START_TEST(sizes)
{
	static const struct {
		const char *v;
		uint64_t bytes;
	} ok[] = {
		{ "4096", 4096 }, { "4K", 4096 }, { "4k", 4096 }, { "3M", 3 << 20 },
		{ "1g", 1ull << 30 }, { "2T", 2ull << 40 }, { "16777215T", 16777215ull << 40 },
	};
	char text[512];

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(text, sizeof(text),
			 "[pool]\nname=a\nuuid=1b4e28ba-2fa1-41d2-883f-0016d3cca427\nsize=%s\n" M1,
			 ok[i].v);
		ck_assert_msg(parse(text) == 0, "%s: %s", ok[i].v, err);
		ck_assert_uint_eq(cfg.pool_size, ok[i].bytes);
	}
}
END_TEST

START_TEST(syntax_errors)
{
	refused("[pool\nname = a\n", 1, "section header without ']'");
	refused("[pool] x\n", 1, "text after the section header");
	refused("[pool] ; a comment may follow\nname\n", 2, "expected 'key = value'");
	refused("\n\n= 3\n", 3, "a value without a key");
	refused("[pool]\nName = a\n", 2, "'Name' is not a key");
	refused("name = a\n", 1, "key 'name' before the first section");
	refused("[pool]\nname = \n", 2, "name: empty value");
	refused("[pool]\nname = ; just a comment\n", 2, "name: empty value");
	refused(POOL "size2 = 3\n", 5, "unknown key 'size2' in [pool]");
	refused(POOL M1 "colour = red\n", 8, "unknown key 'colour' in [member ID]");
	refused(POOL "[client]\nstore = /x\n", 6, "key 'store' belongs in a [member ID] section, not in [client]");
	refused(POOL "address = 1.2.3.4:5\n", 5, "belongs in a [member ID] section, not in [pool]");
	refused(POOL M1 "name = b\n", 8, "key 'name' belongs in a [pool] section, not in [member ID]");
	refused(POOL "[volume]\n", 5, "unknown section [volume]");
	refused(POOL "[pool 2]\n", 5, "[pool] takes no argument");
	refused(POOL "[client x]\n", 5, "[client] takes no argument");
	refused(POOL "[member]\n", 5, "[member] needs a member id");
	refused(POOL "[member 0]\n", 5, "the member id must be 1..63");
	refused(POOL "[member 64]\n", 5, "the member id must be 1..63");
	refused(POOL "[member -1]\n", 5, "the member id must be 1..63");
	refused(POOL "[member 1x]\n", 5, "the member id must be 1..63");
	refused(POOL "[member 1 2]\n", 5, "the member id must be 1..63");

	static const char nul[] = "[pool]\nna\0me = a\n";

	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_parse("t.conf", nul, sizeof(nul) - 1, &cfg, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "t.conf:2: NUL byte in the line");
	refused("[pool]\nname = a\x01\n", 2, "control character 0x01");
}
END_TEST

START_TEST(duplicates)
{
	refused(POOL "name = b\n", 5, "'name' is set twice in this section (first on line 2)");
	refused(POOL M1 "store = /y\n", 8, "'store' is set twice in this section (first on line 7)");
	refused(POOL M1 "[pool]\n", 8, "a second [pool] section (the first is on line 1)");
	refused(POOL "[client]\n[client]\n", 6, "a second [client] section (the first is on line 5)");
	refused(POOL M1 M2 "[member 1]\n", 11, "a second [member 1] section (the first is on line 5)");
	/* One key in two member sections is no duplicate. */
	ck_assert_msg(parse(POOL M1 M2) == 0, "%s", err);
}
END_TEST

START_TEST(bad_values)
{
	refused("[pool]\nname = a/b\n", 2, "name: 'a/b' is not 1..63 characters");
	refused("[pool]\nname = "
		"a234567890123456789012345678901234567890123456789012345678901234\n", 2,
		"is not 1..63 characters");
	refused("[pool]\nuuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca42\n", 2, "is not a UUID");
	refused("[pool]\nuuid = 1b4e28ba2fa141d2883f0016d3cca427\n", 2, "is not a UUID");
	refused("[pool]\nuuid = 00000000-0000-0000-0000-000000000000\n", 2, "the nil UUID");
	refused("[pool]\nsize = 10X\n", 2, "size: '10X' is not a size");
	refused("[pool]\nsize = -1G\n", 2, "is not a size");
	refused("[pool]\nsize = 1.5G\n", 2, "is not a size");
	refused("[pool]\nsize = 0\n", 2, "is not a size");
	refused("[pool]\nsize = 10GB\n", 2, "is not a size");
	refused("[pool]\nsize = 99999999999999999999\n", 2, "is not a size");
	refused("[pool]\nsize = 16777216T\n", 2, "is not a size");
	refused("[pool]\nsize = 4097\n", 2, "size: 4097 is not a multiple of 4096 bytes");
	refused("[pool]\nchunk_size = 64K\n", 2, "chunk_size: '64K' is not a power of two in 128K..1M");
	refused("[pool]\nchunk_size = 2M\n", 2, "is not a power of two in 128K..1M");
	refused("[pool]\nchunk_size = 393216\n", 2, "is not a power of two in 128K..1M");
	refused("[pool]\ntransport = rdma\n", 2, "transport: 'rdma' is not fabric or mem");
	refused("[pool]\nprovider = udp\n", 2, "provider: 'udp' is not tcp, shm or verbs");
	refused("[pool]\nmin_legs = 0\n", 2, "min_legs: '0' is not a whole number in 1..16");
	refused("[pool]\nmin_legs = 17\n", 2, "in 1..16");
	refused("[pool]\nqueue_depth = 1025\n", 2, "queue_depth: '1025' is not a whole number in 2..1024");
	refused("[pool]\nqueue_depth = 1\n", 2, "queue_depth: '1' is not a whole number in 2..1024");
	refused("[pool]\nqueue_depth = 0x10\n", 2, "is not a whole number");
	refused("[pool]\nsync_queue_depth = 257\n", 2, "sync_queue_depth: '257' is not a whole number in 1..256");
	refused("[pool]\nresync_rate = fast\n", 2, "resync_rate: 'fast' is not a rate");
	refused("[pool]\nheartbeat_ms = 5\n", 2, "heartbeat_ms: '5' is not a whole number in 10..60000");
	refused("[pool]\nfailure_timeout_ms = 10\n", 2, "in 20..600000");
	refused("[pool]\nrequest_timeout_ms = 99\n", 2, "in 100..3600000");
	refused("[pool]\nrequest_timeout_ms = + 1\n", 2, "is not a whole number");
	refused("[client]\npoll_us = 1001\n", 2, "poll_us: '1001' is not a whole number in 0..1000");
	refused("[client]\npoll_us = -1\n", 2, "is not a whole number");
	refused("[pool]\npoll_us = 10\n", 2, "key 'poll_us' belongs in a [client] section");
	refused(POOL "[member 1]\naddress = 10.0.0.1 :7000\n", 6, "has a blank");
	refused(POOL "[member 1]\naddress = "
		"a23456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678\n",
		6, "address: value longer than 107 bytes");
	refused(POOL "[member 1]\nstore = dev/sda\n", 6, "store: 'dev/sda' is not an absolute path");
	refused(POOL "[member 1]\ncontrol = x.ctl\n", 6, "control: 'x.ctl' is not an absolute path");
	refused(POOL "[member 1]\ncontrol = /"
		"a23456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678\n",
		6, "control: value longer than 107 bytes");
	refused(POOL "[client]\nsocket = nbd.sock\n", 6, "socket: 'nbd.sock' is not an absolute path");
	refused(POOL "[client]\ntcp = localhost\n", 6, "tcp: 'localhost' is not HOST:PORT");
	refused(POOL "[client]\ntcp = localhost:99999\n", 6, "is not HOST:PORT");
	refused(POOL "[client]\ncontrol = ./c.ctl\n", 6, "is not an absolute path");
}
END_TEST

START_TEST(missing)
{
	refused("", 1, "no [pool] section");
	refused("# nothing\n\n\n", 3, "no [pool] section");
	refused(M1, 3, "no [pool] section");
	refused("[pool]\nuuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca427\nsize = 1G\n" M1, 1,
		"[pool] has no 'name'");
	refused("[pool]\nname = a\nsize = 1G\n" M1, 1, "[pool] has no 'uuid'");
	refused("\n[pool]\nname = a\nuuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca427\n" M1, 2,
		"[pool] has no 'size'");
	refused(POOL, 1, "the pool has no members");
	refused(POOL "[client]\n", 1, "the pool has no members");
	refused(POOL "[member 4]\nstore = /x\n", 5, "[member 4] has no 'address'");
	refused(POOL "[member 4]\naddress = a:1\n", 5, "[member 4] has no 'store'");
}
END_TEST

START_TEST(contradictions)
{
	refused(POOL M1 "[member 2]\nstore = /s\naddress = 10.0.0.1:7000\n", 10,
		"members 1 and 2 have the same address 10.0.0.1:7000");
	refused(POOL M1 "control = /c\n" M2 "control = /c\n", 12,
		"members 1 and 2 have the same control socket /c");
	refused(POOL "min_legs = 2\n" M1, 5, "min_legs 2 is more than the 1 member of the pool");
	refused(POOL "min_legs = 3\n" M1 M2, 5, "min_legs 3 is more than the 2 members");
	refused(POOL "heartbeat_ms = 500\nfailure_timeout_ms = 999\n" M1, 6,
		"failure_timeout_ms 999 is shorter than two heartbeats (heartbeat_ms 500)");
	/* With the default failure timeout, the heartbeat line is the culprit. */
	refused(POOL "heartbeat_ms = 1500\n" M1, 5, "failure_timeout_ms 2000 is shorter");
	refused(POOL M1 "[client]\nsocket = /a.sock\ntcp = :1\n", 10,
		"[client] has both 'socket' and 'tcp' (line 9)");
	refused(POOL M1 "[client]\ntcp = :1\nsocket = /a.sock\n", 10,
		"[client] has both 'socket' and 'tcp' (line 9)");
	refused(POOL M1 "control = /c\n[client]\ncontrol = /c\n", 10,
		"the client and member 1 have the same control socket /c");
	refused(POOL M1 "[client]\nsocket = /c\ncontrol = /c\n", 9,
		"the NBD socket and the control socket are both /c");
	/* Exactly RMR_MAX_MEMBERS members are fine, one more is not. */
	{
		char text[8192];
		size_t n = (size_t)snprintf(text, sizeof(text), "%s", POOL);

		for (unsigned id = 1; id <= RMR_MAX_MEMBERS; id++)
			n += (size_t)snprintf(text + n, sizeof(text) - n,
					      "[member %u]\naddress = h%u:1\nstore = /s\n", id, id);
		ck_assert_msg(parse(text) == 0, "%s", err);
		ck_assert_uint_eq(cfg.nmembers, RMR_MAX_MEMBERS);
		snprintf(text + n, sizeof(text) - n, "[member 40]\n");
		refused(text, 5 + 3 * RMR_MAX_MEMBERS, "more than 16 members");
	}
}
END_TEST

START_TEST(api_edges)
{
	char path[64];

	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg) - 1;
	ck_assert_int_eq(brmr_config_parse("t", POOL M1, strlen(POOL M1), &cfg, err, sizeof(err)),
			 -EINVAL);
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_parse(NULL, "x", 1, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "-:1: expected 'key = value' or a [section]: 'x'");
	/* A short error buffer is cut, never overrun; a NULL one is fine. */
	ck_assert_int_eq(brmr_config_parse("t.conf", "x", 1, &cfg, err, 8), -EINVAL);
	ck_assert_str_eq(err, "t.conf:");
	ck_assert_int_eq(brmr_config_parse("t.conf", "x", 1, &cfg, NULL, 0), -EINVAL);
	/* No trailing newline; the text need not be NUL-terminated. */
	{
		const char *t = POOL M1 "control = /c";
		char *copy = malloc(strlen(t));

		memcpy(copy, t, strlen(t));
		ck_assert_int_eq(brmr_config_parse("t", copy, strlen(t), &cfg, err, sizeof(err)), 0);
		ck_assert_str_eq(cfg.members[0].control, "/c");
		free(copy);
	}

	setenv(BRMR_CONFIG_DIR_ENV, "/tmp/cfgdir", 1);
	ck_assert_int_eq(brmr_config_pool_path("vol1", path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/tmp/cfgdir/vol1.conf");
	ck_assert_int_eq(brmr_config_pool_path("../etc/x", path, sizeof(path)), -EINVAL);
	ck_assert_int_eq(brmr_config_pool_path("", path, sizeof(path)), -EINVAL);
	ck_assert_int_eq(brmr_config_pool_path("vol1", path, 8), -ENAMETOOLONG);
	setenv(BRMR_CONFIG_DIR_ENV, "", 1);
	ck_assert_int_eq(brmr_config_pool_path("vol1", path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/etc/brmr/pools.d/vol1.conf");
	unsetenv(BRMR_CONFIG_DIR_ENV);
	ck_assert_int_eq(brmr_config_pool_path("vol1", path, sizeof(path)), 0);
	ck_assert_str_eq(path, BRMR_CONFIG_DIR "/vol1.conf");
	ck_assert_ptr_null(brmr_config_member(NULL, 1));
}
END_TEST

/* key_file: relative to the pool file's directory; default NAME.key there. */
START_TEST(key_file_paths)
{
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_parse("/etc/brmr/pools.d/vol1.conf", POOL M1,
					   strlen(POOL M1), &cfg, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg.key_file, "/etc/brmr/pools.d/vol1.key");
	ck_assert(!cfg.key_file_set);
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_parse("/etc/p.conf", POOL "key_file = k/x.key\n" M1,
					   strlen(POOL "key_file = k/x.key\n" M1), &cfg, err,
					   sizeof(err)), 0);
	ck_assert_str_eq(cfg.key_file, "/etc/k/x.key");
	ck_assert(cfg.key_file_set);
	ck_assert_int_eq(parse(POOL "key_file = /srv/vol1.key\n" M1), 0);
	ck_assert_str_eq(cfg.key_file, "/srv/vol1.key");
	ck_assert_int_eq(parse(POOL M1), 0);
	ck_assert_str_eq(cfg.key_file, "vol1.key");
	refused(POOL "key_file =\n" M1, 5, "empty value");
	refused(POOL M1 "key_file = a\n", 8, "belongs in a [pool] section");
}
END_TEST

static void write_key(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* Key files: made 0600 and never overwritten; read back; every bad one refused. */
START_TEST(key_files)
{
	char dir[] = "/tmp/brmr-key-test.XXXXXX", path[256], other[256], text[80];
	uint8_t key[RMR_KEY_LEN], again[RMR_KEY_LEN];
	struct stat st;
	bool have;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vol1.key", dir);
	snprintf(other, sizeof(other), "%s/other.key", dir);

	/* Made with mode 0600 whatever the umask, 64 hex digits and a newline. */
	umask(0);
	ck_assert_int_eq(rmr_key_create(path, err, sizeof(err)), 0);
	umask(022);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_uint_eq(st.st_size, RMR_KEY_FILE_LEN);
	ck_assert_int_eq(rmr_key_load(path, key, err, sizeof(err)), 0);
	/* Never overwritten. */
	ck_assert_int_eq(rmr_key_create(path, err, sizeof(err)), -EEXIST);
	ck_assert_int_eq(rmr_key_load(path, again, err, sizeof(err)), 0);
	ck_assert_mem_eq(key, again, RMR_KEY_LEN);
	/* Two keys differ. */
	ck_assert_int_eq(rmr_key_create(other, err, sizeof(err)), 0);
	ck_assert_int_eq(rmr_key_load(other, again, err, sizeof(err)), 0);
	ck_assert(memcmp(key, again, RMR_KEY_LEN) != 0);

	/* Readable by group or others: refused, naming the file and the mode. */
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(rmr_key_load(path, key, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "mode 0644"));
	ck_assert_ptr_null(strchr(err, '\n'));
	ck_assert_int_eq(chmod(path, 0640), 0);
	ck_assert_int_eq(rmr_key_load(path, key, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(chmod(path, 0400), 0);
	ck_assert_int_eq(rmr_key_load(path, key, err, sizeof(err)), 0);

	/* Contents: length, characters, trailing bytes. */
	memset(text, 'a', 64);
	text[64] = '\0';
	write_key(other, text, 0600); /* no newline: accepted */
	ck_assert_int_eq(rmr_key_load(other, key, err, sizeof(err)), 0);
	ck_assert_uint_eq(key[0], 0xaa);
	text[63] = '\0';
	write_key(other, text, 0600);
	ck_assert_int_eq(rmr_key_load(other, key, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a pool key"));
	memset(text, 'a', 64);
	text[10] = 'g';
	strcpy(text + 64, "\n");
	write_key(other, text, 0600);
	ck_assert_int_eq(rmr_key_load(other, key, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "character 11"));
	text[10] = 'a';
	strcpy(text + 64, "\n\n");
	write_key(other, text, 0600);
	ck_assert_int_eq(rmr_key_load(other, key, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(rmr_key_load(dir, key, err, sizeof(err)), -EINVAL); /* a directory */
	unlink(other);
	ck_assert_int_eq(rmr_key_load(other, key, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, other));

	/* brmr_config_key: the default file absent is an open pool; named absent is an error. */
	snprintf(text, sizeof(text), "%s/p.conf", dir);
	f = fopen(text, "w");
	ck_assert_ptr_nonnull(f);
	fputs(POOL M1, f);
	fclose(f);
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_load(text, &cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(brmr_config_key(&cfg, key, &have, err, sizeof(err)), 0);
	ck_assert(have); /* vol1.key, mode 0400 */
	unlink(path);
	ck_assert_int_eq(brmr_config_key(&cfg, key, &have, err, sizeof(err)), 0);
	ck_assert(!have);
	cfg.key_file_set = true;
	ck_assert_int_eq(brmr_config_key(&cfg, key, &have, err, sizeof(err)), -ENOENT);
	unlink(text);
	rmdir(dir);
}
END_TEST

START_TEST(load_files)
{
	char dir[] = "/tmp/brmr-config-test.XXXXXX", path[256];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	setenv(BRMR_CONFIG_DIR_ENV, dir, 1);

	/* Missing file, and a directory. */
	cfg.size = sizeof(cfg);
	ck_assert_int_eq(brmr_config_load_pool("vol1", &cfg, err, sizeof(err)), -ENOENT);
	snprintf(path, sizeof(path), "cannot read %s/vol1.conf: ", dir);
	ck_assert_msg(!strncmp(err, path, strlen(path)), "%s", err);
	ck_assert_int_eq(brmr_config_load(dir, &cfg, err, sizeof(err)), -EISDIR);
	ck_assert_int_eq(brmr_config_load_pool("a/b", &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "'a/b' is not a pool name") != NULL, "%s", err);

	/* A good file, found by pool name. */
	snprintf(path, sizeof(path), "%s/vol1.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(POOL M1, f);
	fclose(f);
	ck_assert_msg(brmr_config_load_pool("vol1", &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(cfg.file, path);
	ck_assert_str_eq(cfg.name, "vol1");

	/* A file whose name key names another pool. */
	snprintf(path, sizeof(path), "%s/vol2.conf", dir);
	f = fopen(path, "w");
	fputs("\n" POOL M1, f);
	fclose(f);
	ck_assert_int_eq(brmr_config_load_pool("vol2", &cfg, err, sizeof(err)), -EINVAL);
	snprintf(path, sizeof(path), "%s/vol2.conf:2: the file is for pool 'vol2' but names pool 'vol1'", dir);
	ck_assert_str_eq(err, path);

	/* Errors of a loaded file carry its path. */
	snprintf(path, sizeof(path), "%s/bad.conf", dir);
	f = fopen(path, "w");
	fputs(POOL "size = 1G\n", f);
	fclose(f);
	ck_assert_int_eq(brmr_config_load(path, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "/bad.conf:5: 'size' is set twice") != NULL, "%s", err);

	/* Above the size limit. */
	f = fopen(path, "w");
	for (long n = 0; n <= BRMR_CONFIG_FILE_MAX; n = ftell(f))
		fputs("# padding padding padding padding padding padding padding pad\n", f);
	fclose(f);
	ck_assert_int_eq(brmr_config_load(path, &cfg, err, sizeof(err)), -EFBIG);
	ck_assert_msg(strstr(err, "larger than") != NULL, "%s", err);

	unlink(path);
	snprintf(path, sizeof(path), "%s/vol1.conf", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/vol2.conf", dir);
	unlink(path);
	rmdir(dir);
	unsetenv(BRMR_CONFIG_DIR_ENV);
}
END_TEST

/* Random bytes and random edits of a good file never crash, and an error
 * always names the file and a line inside it. */
START_TEST(random_input)
{
	static const char good[] = POOL M1 M2 "[client]\nsocket = /s\n";
	char buf[sizeof(good) + 16];
	unsigned seed = 12345;

	for (unsigned round = 0; round < 20000; round++) {
		size_t len = sizeof(good) - 1;
		int r;

		memcpy(buf, good, len);
		for (unsigned k = 0; k < 1 + round % 4; k++) {
			seed = seed * 1103515245u + 12345u;
			buf[(seed >> 8) % len] = (char)(seed >> 20);
		}
		if (round % 7 == 0)
			len = (seed >> 4) % len;
		memset(&cfg, 0, sizeof(cfg));
		cfg.size = sizeof(cfg);
		r = brmr_config_parse("r.conf", buf, len, &cfg, err, sizeof(err));
		if (r == 0)
			continue;
		expect(r == -EINVAL);
		expect(!strncmp(err, "r.conf:", 7));
		expect(atoi(err + 7) >= 1 && atoi(err + 7) <= 20);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, defaults);
	tcase_add_test(tc, every_key);
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, syntax_errors);
	tcase_add_test(tc, duplicates);
	tcase_add_test(tc, bad_values);
	tcase_add_test(tc, missing);
	tcase_add_test(tc, contradictions);
	tcase_add_test(tc, api_edges);
	tcase_add_test(tc, load_files);
	tcase_add_test(tc, key_file_paths);
	tcase_add_test(tc, key_files);
	tcase_add_test(tc, random_input);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
