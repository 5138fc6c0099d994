/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl: the operator's CLI for brmr pools.
 *
 *   brmrctl create  --name NAME --size SIZE [--chunk SIZE] [--uuid UUID]
 *                   --member ID,ADDR,PATH [--member ...] [--force]
 *   brmrctl status  --socket PATH [--json]
 *   brmrctl inspect --store PATH [--json]
 *
 * Errors are one line on stderr; exit status 2 for usage errors, 1 for
 * runtime errors.
 */
#include <rmr/brmr.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_RUNTIME 1

static int __attribute__((format(printf, 2, 3))) die(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("brmrctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (status == EXIT_USAGE)
		fputs(" (see --help)", stderr);
	fputc('\n', stderr);
	return status;
}

static int bad_option(int argc, char **argv)
{
	(void)argc;
	if (optopt)
		return die(EXIT_USAGE, "option '%s' needs an argument", argv[optind - 1]);
	return die(EXIT_USAGE, "unknown option '%s'", argv[optind - 1]);
}

/* "SIZE": bytes with an optional binary suffix K, M, G or T. */
static bool parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	char *end;
	uint64_t v;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = v << shift;
	return true;
}

static bool valid_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > RMR_NAME_MAX)
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* --- create ------------------------------------------------------------------ */

struct member_arg {
	struct brmr_member m;
	const char *path;
};

static void create_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl create --name NAME --size SIZE [--chunk SIZE] [--uuid UUID]\n"
		"                      --member ID,ADDR,PATH [--member ...] [--force]\n"
		"\n"
		"Format the store of every member of a new pool with the same UUID and the\n"
		"full member list. Everything is checked before any store is written.\n"
		"\n"
		"  --name NAME            pool name: 1..%u characters of [A-Za-z0-9._-]\n"
		"  --size SIZE            pool size; suffixes K, M, G, T (binary); 4K multiple\n"
		"  --chunk SIZE           chunk size, a power of two in 128K..1M (default 128K)\n"
		"  --uuid UUID            pool UUID (default: a new random one)\n"
		"  --member ID,ADDR,PATH  member id (1..%u), the address its brmr-server\n"
		"                         listens on, and its store (file or block device);\n"
		"                         ADDR is everything between the first and last comma\n"
		"  --force                overwrite stores that already hold data\n",
		RMR_NAME_MAX, RMR_MAX_MEMBER_ID);
}

/* "ID,ADDR,PATH": id up to the first comma, path after the last. */
static int parse_member(const char *arg, struct member_arg *out)
{
	const char *c1 = strchr(arg, ','), *c2 = strrchr(arg, ',');
	char *end;
	unsigned long id;
	size_t alen;

	if (!c1 || c1 == c2)
		return die(EXIT_USAGE, "--member '%s': expected ID,ADDR,PATH", arg);
	errno = 0;
	id = strtoul(arg, &end, 10);
	if (errno || end != c1 || end == arg || id < 1 || id > RMR_MAX_MEMBER_ID)
		return die(EXIT_USAGE, "--member '%s': id must be 1..%u", arg, RMR_MAX_MEMBER_ID);
	alen = (size_t)(c2 - c1 - 1);
	if (alen == 0 || alen > RMR_ADDR_MAX)
		return die(EXIT_USAGE, "--member '%s': address must be 1..%u bytes", arg,
			   RMR_ADDR_MAX);
	for (const char *p = c1 + 1; p < c2; p++)
		if (*p <= ' ' || *p > '~')
			return die(EXIT_USAGE, "--member '%s': address has a space or control character",
				   arg);
	if (!c2[1])
		return die(EXIT_USAGE, "--member '%s': empty store path", arg);
	memset(out, 0, sizeof(*out));
	out->m.id = (uint16_t)id;
	memcpy(out->m.addr, c1 + 1, alen);
	out->path = c2 + 1;
	return 0;
}

/*
 * Canonical form of a store path that may not exist yet: the real path of
 * its directory plus its last component. Empty on failure.
 */
static void canonical_path(const char *path, char *out, size_t len)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;

	out[0] = '\0';
	if (realpath(path, real)) {
		snprintf(out, len, "%s", real);
		return;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (realpath(dir, real) &&
	    snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", base) >= (int)len)
		out[0] = '\0';
}

/* Two arguments naming the same file or device (existing or not) are one store. */
static bool same_store(const char *a, const char *b)
{
	char ca[PATH_MAX], cb[PATH_MAX];
	struct stat sa, sb;

	if (!strcmp(a, b))
		return true;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0) {
		if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode))
			return sa.st_rdev == sb.st_rdev;
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	}
	canonical_path(a, ca, sizeof(ca));
	canonical_path(b, cb, sizeof(cb));
	return ca[0] && !strcmp(ca, cb);
}

static int cmd_create(int argc, char **argv)
{
	enum { O_NAME = 256, O_SIZE, O_CHUNK, O_UUID, O_MEMBER, O_FORCE, O_HELP };
	static const struct option opts[] = {
		{ "name", required_argument, NULL, O_NAME },
		{ "size", required_argument, NULL, O_SIZE },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "uuid", required_argument, NULL, O_UUID },
		{ "member", required_argument, NULL, O_MEMBER },
		{ "force", no_argument, NULL, O_FORCE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct member_arg members[RMR_MAX_MEMBERS];
	struct brmr_member list[RMR_MAX_MEMBERS];
	struct brmr_format_params fp = { .size = sizeof(fp) };
	const char *name = NULL, *uuid_arg = NULL;
	uint64_t size = 0, chunk = 128 * 1024;
	bool have_size = false, force = false;
	unsigned n = 0;
	char uuid_text[37], why[512];
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_NAME:
			name = optarg;
			break;
		case O_SIZE:
			if (!parse_size(optarg, &size))
				return die(EXIT_USAGE, "bad --size '%s' (bytes, or with K, M, G, T)",
					   optarg);
			have_size = true;
			break;
		case O_CHUNK:
			if (!parse_size(optarg, &chunk))
				return die(EXIT_USAGE, "bad --chunk '%s'", optarg);
			break;
		case O_UUID:
			uuid_arg = optarg;
			break;
		case O_MEMBER:
			if (n == RMR_MAX_MEMBERS)
				return die(EXIT_USAGE, "at most %u members", RMR_MAX_MEMBERS);
			if (parse_member(optarg, &members[n]))
				return EXIT_USAGE;
			n++;
			break;
		case O_FORCE:
			force = true;
			break;
		case O_HELP:
			create_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!name)
		return die(EXIT_USAGE, "--name is required");
	if (!valid_name(name))
		return die(EXIT_USAGE, "bad pool name '%s' (1..%u characters of [A-Za-z0-9._-])",
			   name, RMR_NAME_MAX);
	if (!have_size)
		return die(EXIT_USAGE, "--size is required");
	if (size == 0 || size % 4096)
		return die(EXIT_USAGE, "--size must be a positive multiple of 4K");
	if (chunk < BRMR_CHUNK_MIN || chunk > BRMR_CHUNK_MAX || (chunk & (chunk - 1)))
		return die(EXIT_USAGE, "--chunk must be a power of two in 128K..1M");
	if (!n)
		return die(EXIT_USAGE, "at least one --member is required");
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < i; j++) {
			if (members[i].m.id == members[j].m.id)
				return die(EXIT_USAGE, "member id %u is given twice", members[i].m.id);
			if (same_store(members[i].path, members[j].path))
				return die(EXIT_USAGE, "members %u and %u use the same store %s",
					   members[j].m.id, members[i].m.id, members[i].path);
		}
	if (uuid_arg) {
		static const rmr_uuid zero;

		if (rmr_uuid_parse(uuid_arg, &fp.pool_uuid) < 0 ||
		    !memcmp(&fp.pool_uuid, &zero, sizeof(zero)))
			return die(EXIT_USAGE, "bad --uuid '%s'", uuid_arg);
	} else {
		ret = rmr_uuid_generate(&fp.pool_uuid);
		if (ret < 0)
			return die(EXIT_RUNTIME, "cannot generate a UUID: %s", strerror(-ret));
	}
	fp.pool_name = name;
	fp.pool_size = size;
	fp.chunk_size = (uint32_t)chunk;
	fp.force = force;
	for (unsigned i = 0; i < n; i++)
		list[i] = members[i].m;

	/* Dry run over every store first: format all or none. */
	for (unsigned pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < n; i++) {
			fp.member_id = members[i].m.id;
			ret = brmr_store_format_pool(members[i].path, &fp, list, n,
						     pass ? 0 : BRMR_FORMAT_CHECK_ONLY, why,
						     sizeof(why));
			if (ret < 0)
				return die(EXIT_RUNTIME, "member %u: %s%s", members[i].m.id, why,
					   pass ? " (earlier members were formatted)" : "");
		}
	}
	rmr_uuid_format(&fp.pool_uuid, uuid_text);
	printf("pool %s uuid %s: %u members formatted\n", name, uuid_text, n);
	return 0;
}

/* --- status ------------------------------------------------------------------ */

static void status_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl status --socket PATH [--json] [--watch [SECONDS]]\n"
		"\n"
		"Print the status of a brmr-server or nbd-brmr through its control socket.\n"
		"\n"
		"  --socket PATH      the --control socket of the daemon\n"
		"  --json             one JSON object instead of a table\n"
		"  --watch [SECONDS]  print it again every SECONDS (default 1, 0.1..3600)\n"
		"                     until interrupted, the screen cleared in between\n"
		"                     when stdout is a terminal\n");
}

/*
 * Send @cmd (one line) to the control socket at @path and copy the answer to
 * stdout. An answer starting "error:" becomes our one-line error.
 */
static int control_request(const char *path, const char *cmd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	char buf[8192];
	size_t got = 0;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return die(EXIT_USAGE, "socket path too long");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return die(EXIT_RUNTIME, "cannot reach %s: %s", path, strerror(errno));
	/* A hung daemon must not hang the operator's shell. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd)) {
		int err = errno;

		close(fd);
		return die(EXIT_RUNTIME, "cannot reach %s: %s", path, strerror(err));
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			close(fd);
			return die(EXIT_RUNTIME, "reading from %s: %s", path,
				   err == EAGAIN ? "timed out" : strerror(err));
		}
		if (n == 0)
			break;
		if (got == 0 && n >= 6 && !memcmp(buf, "error:", 6)) {
			/* The daemon refused: pass its one line on as our error. */
			buf[n < (ssize_t)sizeof(buf) ? n : n - 1] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			close(fd);
			return die(EXIT_RUNTIME, "%s: %s", path, buf);
		}
		fwrite(buf, 1, (size_t)n, stdout);
		got += (size_t)n;
	}
	close(fd);
	if (!got)
		return die(EXIT_RUNTIME, "%s: empty answer", path);
	return fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
}

static int cmd_status(int argc, char **argv)
{
	enum { O_SOCKET = 256, O_JSON, O_WATCH, O_HELP };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "json", no_argument, NULL, O_JSON },
		{ "watch", optional_argument, NULL, O_WATCH },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	bool json = false;
	double watch = 0;
	char *end;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_SOCKET:
			path = optarg;
			break;
		case O_JSON:
			json = true;
			break;
		case O_WATCH:
			watch = 1;
			/* "--watch 2" as well as "--watch=2": an optional argument may follow. */
			if (!optarg && optind < argc && (isdigit((unsigned char)argv[optind][0]) ||
							 argv[optind][0] == '.'))
				optarg = argv[optind++];
			if (optarg) {
				errno = 0;
				watch = strtod(optarg, &end);
				if (errno || *end || end == optarg || !(watch >= 0.1 && watch <= 3600))
					return die(EXIT_USAGE, "--watch: '%s' is not 0.1..3600 seconds",
						   optarg);
			}
			break;
		case O_HELP:
			status_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!path)
		return die(EXIT_USAGE, "--socket is required");
	if (!watch)
		return control_request(path, json ? "status json\n" : "status text\n");
	for (;;) {
		struct timespec ts = { .tv_sec = (time_t)watch,
				       .tv_nsec = (long)((watch - (double)(time_t)watch) * 1e9) };

		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout); /* home, clear */
		ret = control_request(path, json ? "status json\n" : "status text\n");
		if (ret)
			return ret;
		fflush(stdout);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

/* --- maintenance --------------------------------------------------------------- */

static void maintenance_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl maintenance on|off --socket PATH --member ID\n"
		"\n"
		"Take a member out of I/O (on), or put it back (off), through the control\n"
		"socket of the client (nbd-brmr --control). While it is out, every write is\n"
		"recorded as missed by it; when it comes back it takes the dirty maps and\n"
		"copies what it missed from its peers by itself.\n"
		"\n"
		"  --socket PATH  the client's --control socket\n"
		"  --member ID    the member id (1..%u)\n",
		RMR_MAX_MEMBER_ID);
}

static int cmd_maintenance(int argc, char **argv)
{
	enum { O_SOCKET = 256, O_MEMBER, O_HELP };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "member", required_argument, NULL, O_MEMBER },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *onoff;
	unsigned long id = 0;
	char cmd[64], *end;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_SOCKET:
			path = optarg;
			break;
		case O_MEMBER:
			errno = 0;
			id = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || id == 0 || id > RMR_MAX_MEMBER_ID)
				return die(EXIT_USAGE, "--member: '%s' is not a member id (1..%u)",
					   optarg, RMR_MAX_MEMBER_ID);
			break;
		case O_HELP:
			maintenance_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind >= argc)
		return die(EXIT_USAGE, "maintenance: say 'on' or 'off'");
	onoff = argv[optind++];
	if (strcmp(onoff, "on") && strcmp(onoff, "off"))
		return die(EXIT_USAGE, "maintenance: '%s' is neither 'on' nor 'off'", onoff);
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!path)
		return die(EXIT_USAGE, "--socket is required");
	if (!id)
		return die(EXIT_USAGE, "--member is required");
	snprintf(cmd, sizeof(cmd), "maintenance %s %lu\n", onoff, id);
	return control_request(path, cmd);
}

/* --- inspect ------------------------------------------------------------------- */

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

static int cmd_inspect(int argc, char **argv)
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
		       ",\"map_size\":%" PRIu64 ",\"sequence\":%" PRIu64 ",\"members\":[",
		       info.format_version, info.pool_name, uuid, info.pool_size, info.chunk_size,
		       info.member_id, info.data_offset, info.meta_offset, info.meta_size,
		       info.map_offset, info.map_size, info.sequence);
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
		printf("members %d\n", n);
		for (int i = 0; i < n; i++)
			printf("member %u %s\n", members[i].id, members[i].addr);
	}
	return fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
}

/* --- main ----------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl VERB [options]\n"
		"\n"
		"  create   format the stores of a new pool\n"
		"  status   status of a brmr-server or nbd-brmr (control socket)\n"
		"  maintenance on|off  take a member out of I/O, or put it back\n"
		"  inspect  print and check a store's superblock\n"
		"\n"
		"'brmrctl VERB --help' describes each verb.\n");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} verbs[] = {
		{ "create", cmd_create },
		{ "status", cmd_status },
		{ "maintenance", cmd_maintenance },
		{ "inspect", cmd_inspect },
	};

	if (argc < 2)
		return die(EXIT_USAGE, "missing verb (create, status, maintenance, inspect)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	opterr = 0;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].fn(argc - 1, argv + 1);
	return die(EXIT_USAGE, "unknown verb '%s'", argv[1]);
}
