/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl create and replace-member: format the stores of a pool, described
 * by flags or by a pool file.
 */
#include "brmrctl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct member_arg {
	struct brmr_member m;
	const char *path;
};

static void create_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl create --config FILE|--pool NAME [--member ID] [--force]\n"
		"       brmrctl create --name NAME --size SIZE [--chunk SIZE] [--uuid UUID]\n"
		"                      --member ID,ADDR,PATH [--member ...] [--force]\n"
		"\n"
		"Format the store of every member of a new pool with the same UUID and the\n"
		"full member list. Everything is checked before any store is written.\n"
		"\n"
		"  --config FILE          the pool file (brmr-pool.conf(5)) says it all: name,\n"
		"                         uuid, size, chunk size, members and their stores\n"
		"  --pool NAME            the pool file DIR/NAME.conf (DIR: $BRMR_CONFIG_DIR or\n"
		"                         " BRMR_CONFIG_DIR ")\n"
		"  --member ID            with a pool file: format only member ID's store (the\n"
		"                         one on this host, when every member has its own host)\n"
		"  --name NAME            pool name: 1..%u characters of [A-Za-z0-9._-]\n"
		"  --size SIZE            pool size; suffixes K, M, G, T (binary); 4K multiple\n"
		"  --chunk SIZE           chunk size, a power of two in 128K..1M (default 128K)\n"
		"  --uuid UUID            pool UUID (default: a new random one)\n"
		"  --member ID,ADDR,PATH  without a pool file: member id (1..%u), the address\n"
		"                         its brmr-server listens on, and its store (file or\n"
		"                         block device); ADDR is everything between the first\n"
		"                         and last comma\n"
		"  --force                overwrite stores that already hold data\n"
		"  --key-file PATH        the pool key to create (mode 0600; an existing key\n"
		"                         file is checked and kept); default with a pool file\n"
		"                         its key_file (NAME.key next to it), without one none\n"
		"\n"
		"With a pool file, --name, --size, --chunk and --uuid are refused: a store\n"
		"formatted unlike the file would not serve the pool the file describes. The\n"
		"key file proves membership of the pool: copy it to every host of the pool\n"
		"with the pool file, readable by the daemons' user alone.\n",
		RMR_NAME_MAX, RMR_MAX_MEMBER_ID);
}

static void replace_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl replace-member --member-id ID --name NAME --size SIZE [--chunk SIZE]\n"
		"                      --uuid UUID --member ID,ADDR,PATH [--member ...] [--force]\n"
		"\n"
		"Format a blank store for member ID of an existing pool, to replace a lost\n"
		"disk: the options are those the pool was created with (brmrctl create), the\n"
		"UUID included; only member ID's store is written (the other paths are not\n"
		"touched). Then start its brmr-server with --replace: it serves at once and\n"
		"copies every chunk in from its peers.\n"
		"\n"
		"  --member-id ID         the member whose store is replaced\n"
		"  (other options as for brmrctl create)\n");
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

/* What to format: a pool and its members (from flags or a pool file). */
struct pool_spec {
	const char *name;
	rmr_uuid uuid;
	bool have_uuid;
	uint64_t size;
	uint32_t chunk;
	struct member_arg members[RMR_MAX_MEMBERS];
	unsigned n;
	const char *file;   /* the pool file, for messages; NULL */
};

/* The pool file's pool: everything is checked by the parser already. */
static void spec_from_file(struct pool_spec *sp, const struct brmr_config *c)
{
	sp->name = c->name;
	sp->uuid = c->uuid;
	sp->have_uuid = true;
	sp->size = c->pool_size;
	sp->chunk = c->chunk_size;
	sp->file = c->file;
	sp->n = c->nmembers;
	for (unsigned i = 0; i < c->nmembers; i++) {
		memset(&sp->members[i], 0, sizeof(sp->members[i]));
		sp->members[i].m.id = c->members[i].id;
		snprintf(sp->members[i].m.addr, sizeof(sp->members[i].m.addr), "%s",
			 c->members[i].address);
		sp->members[i].path = c->members[i].store;
	}
}

/*
 * Format the stores of @p sp (only member @p only's if not 0): a dry run
 * over every store first, so that all or none are written.
 */
static int format_stores(struct pool_spec *sp, unsigned only, bool force, bool replace_mode)
{
	struct brmr_member list[RMR_MAX_MEMBERS];
	struct brmr_format_params fp = { .size = sizeof(fp) };
	unsigned formatted = 0;
	char uuid_text[37], why[512];
	int ret;

	/* One host's stores: two members on one file would be one store. */
	for (unsigned i = 0; i < sp->n && !only; i++)
		for (unsigned j = 0; j < i; j++)
			if (same_store(sp->members[i].path, sp->members[j].path))
				return die(EXIT_USAGE, "members %u and %u use the same store %s",
					   sp->members[j].m.id, sp->members[i].m.id,
					   sp->members[i].path);
	if (!sp->have_uuid) {
		ret = rmr_uuid_generate(&sp->uuid);
		if (ret < 0)
			return die(EXIT_RUNTIME, "cannot generate a UUID: %s", strerror(-ret));
	}
	fp.pool_uuid = sp->uuid;
	fp.pool_name = sp->name;
	fp.pool_size = sp->size;
	fp.chunk_size = sp->chunk;
	fp.force = force;
	for (unsigned i = 0; i < sp->n; i++)
		list[i] = sp->members[i].m;

	for (unsigned pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < sp->n; i++) {
			if (only && sp->members[i].m.id != only)
				continue;
			fp.member_id = sp->members[i].m.id;
			formatted += pass;
			ret = brmr_store_format_pool(sp->members[i].path, &fp, list, sp->n,
						     pass ? 0 : BRMR_FORMAT_CHECK_ONLY, why,
						     sizeof(why));
			if (ret < 0)
				return die(EXIT_RUNTIME, "member %u: %s%s", sp->members[i].m.id, why,
					   pass ? " (earlier members were formatted)" : "");
		}
	}
	rmr_uuid_format(&sp->uuid, uuid_text);
	if (replace_mode)
		printf("pool %s uuid %s: member %u formatted blank; start its brmr-server with --replace\n",
		       sp->name, uuid_text, only);
	else if (only)
		printf("pool %s uuid %s: member %u formatted\n", sp->name, uuid_text, only);
	else
		printf("pool %s uuid %s: %u members formatted\n", sp->name, uuid_text, formatted);
	return 0;
}

/*
 * The pool key at @path: created if there is none, else checked and kept
 * (a second host's create must not replace the key the others hold).
 */
static int ensure_key(const char *path)
{
	uint8_t key[RMR_KEY_LEN];
	char err[1280];
	int ret;

	ret = rmr_key_create(path, err, sizeof(err));
	if (ret == 0) {
		printf("key file %s: created (mode 0600); copy it to every host of the pool\n",
		       path);
		return 0;
	}
	if (ret != -EEXIST)
		return die(1, "%s", err);
	ret = rmr_key_load(path, key, err, sizeof(err));
	explicit_bzero(key, sizeof(key));
	if (ret < 0)
		return die(1, "%s", err);
	printf("key file %s: exists, kept\n", path);
	return 0;
}

/* create, or (@replace_mode) format one member's store of an existing pool. */
static int create_or_replace(int argc, char **argv, bool replace_mode)
{
	enum { O_NAME = 256, O_SIZE, O_CHUNK, O_UUID, O_MEMBER, O_FORCE, O_ONLY, O_HELP,
	       O_CONFIG, O_POOL, O_KEY_FILE };
	static const struct option opts[] = {
		{ "key-file", required_argument, NULL, O_KEY_FILE },
		{ "member-id", required_argument, NULL, O_ONLY },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "pool", required_argument, NULL, O_POOL },
		{ "name", required_argument, NULL, O_NAME },
		{ "size", required_argument, NULL, O_SIZE },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "uuid", required_argument, NULL, O_UUID },
		{ "member", required_argument, NULL, O_MEMBER },
		{ "force", no_argument, NULL, O_FORCE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct pool_spec sp = { .chunk = 128 * 1024 };
	const char *uuid_arg = NULL, *config = NULL, *pool = NULL, *key_file = NULL;
	const char *member_args[RMR_MAX_MEMBERS];
	struct brmr_config *file = NULL;
	uint64_t size = 0, chunk = 128 * 1024;
	bool have_size = false, have_chunk = false, force = false;
	unsigned nargs = 0, only = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_CONFIG:
			if (replace_mode)
				return bad_option(argc, argv);
			config = optarg;
			break;
		case O_POOL:
			if (replace_mode)
				return bad_option(argc, argv);
			pool = optarg;
			break;
		case O_KEY_FILE:
			if (replace_mode)
				return bad_option(argc, argv);
			key_file = optarg;
			break;
		case O_NAME:
			sp.name = optarg;
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
			have_chunk = true;
			break;
		case O_UUID:
			uuid_arg = optarg;
			break;
		case O_MEMBER:
			if (nargs == RMR_MAX_MEMBERS)
				return die(EXIT_USAGE, "at most %u members", RMR_MAX_MEMBERS);
			member_args[nargs++] = optarg;
			break;
		case O_FORCE:
			force = true;
			break;
		case O_ONLY: {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (!replace_mode || errno || *end || end == optarg || v < 1 ||
			    v > RMR_MAX_MEMBER_ID)
				return replace_mode ? die(EXIT_USAGE, "bad --member-id '%s' (1..%u)",
							  optarg, RMR_MAX_MEMBER_ID)
						    : bad_option(argc, argv);
			only = (unsigned)v;
			break;
		}
		case O_HELP:
			if (replace_mode)
				replace_usage(stdout);
			else
				create_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);

	if (config || pool) {
		if (config && pool)
			return die(EXIT_USAGE, "--config and --pool exclude each other");
		if (sp.name || have_size || have_chunk || uuid_arg)
			return die(EXIT_USAGE, "--name, --size, --chunk and --uuid contradict the "
				   "pool file: it describes the pool");
		if (nargs > 1)
			return die(EXIT_USAGE, "with a pool file, one --member ID at most");
		if (nargs && !(only = parse_member_id(member_args[0])))
			return die(EXIT_USAGE, "--member: '%s' is not a member id (1..%u); with a "
				   "pool file the file gives address and store", member_args[0],
				   RMR_MAX_MEMBER_ID);
		file = load_pool_file(config, pool, &ret);
		if (!file)
			return ret;
		if (only && !brmr_config_member(file, only)) {
			ret = config_die("%s:%u: pool %s has no member %u", file->file,
					 file->line, file->name, only);
			free(file);
			return ret;
		}
		spec_from_file(&sp, file);
		ret = format_stores(&sp, only, force, false);
		if (ret == 0)
			ret = ensure_key(key_file ? key_file : file->key_file);
		free(file);
		return ret;
	}

	for (unsigned i = 0; i < nargs; i++)
		if (parse_member(member_args[i], &sp.members[sp.n++]))
			return EXIT_USAGE;
	if (!sp.name)
		return die(EXIT_USAGE, "--name (or --config FILE) is required");
	if (!valid_name(sp.name))
		return die(EXIT_USAGE, "bad pool name '%s' (1..%u characters of [A-Za-z0-9._-])",
			   sp.name, RMR_NAME_MAX);
	if (!have_size)
		return die(EXIT_USAGE, "--size is required");
	if (size == 0 || size % 4096)
		return die(EXIT_USAGE, "--size must be a positive multiple of 4K");
	if (chunk < BRMR_CHUNK_MIN || chunk > BRMR_CHUNK_MAX || (chunk & (chunk - 1)))
		return die(EXIT_USAGE, "--chunk must be a power of two in 128K..1M");
	sp.size = size;
	sp.chunk = (uint32_t)chunk;
	if (!sp.n)
		return die(EXIT_USAGE, "at least one --member is required");
	if (replace_mode && !only)
		return die(EXIT_USAGE, "--member-id is required");
	if (replace_mode && !uuid_arg)
		return die(EXIT_USAGE, "--uuid is required: the replacement joins an existing pool");
	if (replace_mode) {
		bool listed = false;

		for (unsigned i = 0; i < sp.n; i++)
			listed |= sp.members[i].m.id == only;
		if (!listed)
			return die(EXIT_USAGE, "--member-id %u is not among the --member entries", only);
	}
	for (unsigned i = 0; i < sp.n; i++)
		for (unsigned j = 0; j < i; j++)
			if (sp.members[i].m.id == sp.members[j].m.id)
				return die(EXIT_USAGE, "member id %u is given twice", sp.members[i].m.id);
	if (uuid_arg) {
		static const rmr_uuid zero;

		if (rmr_uuid_parse(uuid_arg, &sp.uuid) < 0 || !memcmp(&sp.uuid, &zero, sizeof(zero)))
			return die(EXIT_USAGE, "bad --uuid '%s'", uuid_arg);
		sp.have_uuid = true;
	}
	ret = format_stores(&sp, only, force, replace_mode);
	if (ret == 0 && key_file)
		ret = ensure_key(key_file);
	return ret;
}

int cmd_create(int argc, char **argv)
{
	return create_or_replace(argc, argv, false);
}

int cmd_replace_member(int argc, char **argv)
{
	return create_or_replace(argc, argv, true);
}
