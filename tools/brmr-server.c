/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmr-server: the storage-node daemon. Serves one or more formatted stores
 * (files or block devices), each as a member of its pool, on one address.
 *
 *   brmr-server --listen ADDR --store PATH [--store PATH ...] [options]
 *   brmr-server --config FILE --member ID|auto [--config FILE --member ...] [options]
 *   brmr-server --pool NAME --member ID|auto [options]
 *
 * With a pool file (brmr-pool.conf(5)) the member's store, listen address,
 * control socket, provider and tunables come from the file; explicit flags
 * override it. The control socket is served by server_control.c.
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on runtime errors, 2 on usage
 * errors and bad pool files.
 */
#include <rmr/brmr.h>
#include <rmr/brmr_config.h>
#include <rmr/server.h>

#include "daemon_log.h"
#include "server_control.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_STORES RMR_SERVER_MAX_POOLS
/* Resync pieces in flight per pool. */
#define SYNC_QD_DEFAULT 32
#define SYNC_QD_MAX 256

/* One store to serve: from --store, or a member of a pool file. */
struct served {
	const char *path;
	struct brmr_config *conf;               /* NULL for --store */
	const char *member_arg;                 /* --member: "ID" or "auto" */
	const struct brmr_config_member *m;     /* the member, once resolved */
	bool keyed;                             /* @key holds the pool key */
	uint8_t key[RMR_KEY_LEN];
};

struct server_cfg {
	const char *listen;
	struct served served[MAX_STORES];
	unsigned nserved;
	const char *provider;
	const char *transport;
	const char *control;
	const char *ready_file;
	const char *pid_file;
	const char *key_file;       /* --key-file: the key of every pool served */
	unsigned queue_depth;
	unsigned sync_queue_depth;  /* 0: the pool file's, else the default */
	uint64_t resync_rate;       /* bytes per second, 0 = unlimited */
	bool have_resync_rate;
	bool replace;               /* the stores are blank replacements of their members */
	bool no_activity_log;       /* measurement only (bench/al) */
	bool no_mmap;               /* measurement only: a store on tmpfs unmapped */
	bool verbose;
	bool syslog;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: brmr-server --listen ADDR --store PATH [--store PATH ...] [options]\n"
		"       brmr-server --config FILE --member ID|auto [--config FILE --member ...] [options]\n"
		"       brmr-server --pool NAME --member ID|auto [options]\n"
		"\n"
		"Serve formatted brmr stores (see brmrctl create) as members of their pools.\n"
		"\n"
		"  --config FILE        a pool file (brmr-pool.conf(5)); the next --member says\n"
		"                       which of its members this server is\n"
		"  --pool NAME          the pool file DIR/NAME.conf, DIR being $BRMR_CONFIG_DIR\n"
		"                       or %s\n"
		"  --member ID|auto     the member of the last --config/--pool to serve: its store,\n"
		"                       address and control socket come from the file; 'auto'\n"
		"                       picks the one member whose store is on this host\n"
		"  --listen ADDR        address to listen on (e.g. 127.0.0.1:7000); with pool\n"
		"                       files, default the served members' one address\n"
		"  --store PATH         a store to serve; repeat for more (at most %u in all)\n"
		"  --provider NAME      fabric provider: tcp (default), shm, verbs\n"
		"  --transport NAME     fabric (default) or mem (in-process, for tests)\n"
		"  --control PATH       unix control socket (mode 0600): 'status text|json|prometheus',\n"
		"                       'events', 'events now', 'fault on|off' (fail every store's\n"
		"                       data I/O with EIO); default each served member's from its\n"
		"                       pool file (one socket per pool; a command there that names\n"
		"                       no pool acts on that one)\n"
		"  --key-file PATH      the pool key (mode 0600, made by brmrctl create) of every\n"
		"                       pool served; default each pool file's key_file (NAME.key\n"
		"                       next to it); none: an open pool, with a warning\n"
		"  --ready-file PATH    write \"ready\" to PATH once serving\n"
		"  --pid-file PATH      write the process id to PATH\n"
		"  --queue-depth N      most requests per session (1..1024, default 128)\n"
		"  --sync-queue-depth N resync pieces in flight per pool (1..%u, default %u)\n"
		"  --resync-rate RATE   resync bytes per second per pool; suffix K, M or G\n"
		"                       for KiB, MiB, GiB (default 0: unlimited)\n"
		"  --replace            the stores are blank replacements for their member ids\n"
		"                       (brmrctl create on a new disk): every chunk is copied\n"
		"                       in from the peers while the member serves; refused for\n"
		"                       a store that has served its pool before\n"
		"  --no-activity-log    for measurement only (bench/al): keep no activity log, so\n"
		"                       that a writer crash can leave members silently different\n"
		"  --no-mmap            for measurement only: serve a store on tmpfs with pread\n"
		"                       and pwrite instead of through a mapping of its data\n"
		"  --syslog             log to syslog (facility daemon) instead of stderr\n"
		"  --verbose            log debug messages\n"
		"  --help               show this help\n"
		"\n"
		"Flags override the pool file. Exit status: 0 after SIGTERM or SIGINT, 1 on a\n"
		"runtime error, 2 for a bad command line or pool file.\n",
		BRMR_CONFIG_DIR, MAX_STORES, SYNC_QD_MAX, SYNC_QD_DEFAULT);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("brmr-server: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	return 2;
}

/* A bad pool file: its one-line "FILE:LINE: reason", exit status 2. */
static int __attribute__((format(printf, 1, 2))) config_error(const char *fmt, ...)
{
	va_list ap;

	fputs("brmr-server: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/*
 * A byte rate: decimal digits with an optional K, M or G (KiB, MiB, GiB).
 * @return 0, or -1 for anything else (a sign, spaces, overflow).
 */
static int parse_rate(const char *arg, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -1;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		return -1;
	}
	if (*end && end[1])
		return -1;
	if (v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* --- pool files ------------------------------------------------------------------ */

static void member_list(const struct brmr_config *c, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < c->nmembers && used < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%u", i ? ", " : "", c->members[i].id);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/*
 * --member auto: the one member whose store is on this host, which is a
 * store formatted for that member of this pool (a path that merely exists,
 * such as /dev/sdb on every host, is not enough).
 */
static int pick_auto_member(struct served *sv)
{
	const struct brmr_config *c = sv->conf;
	const struct brmr_config_member *found = NULL;

	for (unsigned i = 0; i < c->nmembers; i++) {
		struct brmr_store_info info = { .size = sizeof(info) };
		struct brmr_store *s;

		if (access(c->members[i].store, F_OK) < 0 ||
		    brmr_store_open(c->members[i].store, &s, NULL, 0) < 0)
			continue;
		brmr_store_info(s, &info);
		brmr_store_close(s);
		if (info.member_id != c->members[i].id || strcmp(info.pool_name, c->name) ||
		    memcmp(&info.pool_uuid, &c->uuid, sizeof(c->uuid)))
			continue;
		if (found)
			return config_error("%s:%u: --member auto: the stores of members %u (%s) and "
					    "%u (%s) are both on this host; say --member ID",
					    c->file, c->line, found->id, found->store,
					    c->members[i].id, c->members[i].store);
		found = &c->members[i];
	}
	if (!found)
		return config_error("%s:%u: --member auto: no member's store of pool %s is on this "
				    "host (formatted for it: see brmrctl create --config)",
				    c->file, c->line, c->name);
	sv->m = found;
	return -1;
}

/* @return -1 to go on, or the exit status. */
static int resolve_member(struct served *sv)
{
	const struct brmr_config *c = sv->conf;
	char *end, list[128];
	unsigned long id;

	if (!sv->member_arg)
		return usage_error("%s: --config/--pool needs a --member ID|auto after it", c->file);
	if (!strcmp(sv->member_arg, "auto"))
		return pick_auto_member(sv);
	errno = 0;
	id = strtoul(sv->member_arg, &end, 10);
	if (errno || *end || end == sv->member_arg || sv->member_arg[0] < '0' ||
	    sv->member_arg[0] > '9' || id < 1 || id > RMR_MAX_MEMBER_ID)
		return usage_error("bad --member '%s' (1..%u or auto)", sv->member_arg,
				   RMR_MAX_MEMBER_ID);
	sv->m = brmr_config_member(c, (unsigned)id);
	if (!sv->m) {
		member_list(c, list, sizeof(list));
		return config_error("%s:%u: pool %s has no member %lu (members: %s)", c->file,
				    c->line, c->name, id, list);
	}
	sv->path = sv->m->store;
	return -1;
}

/*
 * Settings that the pool files give and the flags did not. One server has
 * one address and one transport: every pool file must agree on what the
 * server as a whole uses. Control sockets are per pool (main).
 */
static int apply_pool_files(struct server_cfg *cfg)
{
	const struct served *first = NULL;
	bool listen_flag = cfg->listen != NULL;
	int ret;

	for (unsigned i = 0; i < cfg->nserved; i++) {
		struct served *sv = &cfg->served[i];

		if (!sv->conf)
			continue;
		ret = resolve_member(sv);
		if (ret >= 0)
			return ret;
		sv->path = sv->m->store;
		if (!first) {
			first = sv;
			if (!cfg->listen)
				cfg->listen = sv->m->address;
			if (!cfg->provider)
				cfg->provider = sv->conf->provider;
			if (!cfg->transport)
				cfg->transport = sv->conf->transport;
			if (!cfg->queue_depth)
				cfg->queue_depth = sv->conf->queue_depth;
			continue;
		}
		if (!listen_flag && strcmp(sv->m->address, first->m->address))
			return config_error("%s:%u: member %u of pool %s listens on %s, but member %u "
					    "of pool %s (%s:%u) on %s: one brmr-server listens on one "
					    "address", sv->conf->file, sv->m->line, sv->m->id,
					    sv->conf->name, sv->m->address, first->m->id,
					    first->conf->name, first->conf->file, first->m->line,
					    first->m->address);
		if (strcmp(sv->conf->provider, first->conf->provider) ||
		    strcmp(sv->conf->transport, first->conf->transport))
			return config_error("%s:%u: pool %s uses %s/%s, but pool %s (%s:%u) %s/%s: one "
					    "brmr-server uses one transport", sv->conf->file,
					    sv->conf->line, sv->conf->name, sv->conf->transport,
					    sv->conf->provider, first->conf->name, first->conf->file,
					    first->conf->line, first->conf->transport,
					    first->conf->provider);
	}
	return -1;
}

static int add_pool_file(struct server_cfg *cfg, const char *file, const char *pool)
{
	struct served *sv;
	char err[1280];
	int ret;

	if (cfg->nserved == MAX_STORES)
		return usage_error("at most %u stores and members in all", MAX_STORES);
	if (cfg->nserved && cfg->served[cfg->nserved - 1].conf &&
	    !cfg->served[cfg->nserved - 1].member_arg)
		return usage_error("%s: --config/--pool needs a --member ID|auto after it",
				   cfg->served[cfg->nserved - 1].conf->file);
	sv = &cfg->served[cfg->nserved];
	sv->conf = calloc(1, sizeof(*sv->conf));
	if (!sv->conf)
		return config_error("out of memory");
	sv->conf->size = sizeof(*sv->conf);
	ret = file ? brmr_config_load(file, sv->conf, err, sizeof(err))
		   : brmr_config_load_pool(pool, sv->conf, err, sizeof(err));
	if (ret < 0) {
		free(sv->conf);
		sv->conf = NULL;
		return config_error("%s", err);
	}
	cfg->nserved++;
	return -1;
}

/*
 * The pool keys: --key-file for every pool, else each pool file's. A key
 * file that is open to others, malformed or (named and) missing stops the
 * start: serving such a pool open would let anyone in.
 * @return -1 to go on, or the exit status.
 */
static int load_keys(struct server_cfg *cfg)
{
	char err[1280];

	for (unsigned i = 0; i < cfg->nserved; i++) {
		struct served *sv = &cfg->served[i];
		int ret;

		if (cfg->key_file)
			ret = rmr_key_load(cfg->key_file, sv->key, err, sizeof(err));
		else if (sv->conf)
			ret = brmr_config_key(sv->conf, sv->key, &sv->keyed, err, sizeof(err));
		else
			continue;
		if (ret < 0)
			return config_error("%s", err);
		if (cfg->key_file)
			sv->keyed = true;
	}
	return -1;
}

/* @return -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct server_cfg *cfg)
{
	enum { O_LISTEN = 256, O_STORE, O_PROVIDER, O_TRANSPORT, O_CONTROL, O_READY,
	       O_PID, O_QD, O_SYNC_QD, O_RESYNC_RATE, O_REPLACE, O_NO_AL, O_NO_MMAP, O_VERBOSE, O_HELP,
	       O_CONFIG, O_POOL, O_MEMBER, O_SYSLOG, O_KEY_FILE };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "store", required_argument, NULL, O_STORE },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "pool", required_argument, NULL, O_POOL },
		{ "member", required_argument, NULL, O_MEMBER },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "ready-file", required_argument, NULL, O_READY },
		{ "key-file", required_argument, NULL, O_KEY_FILE },
		{ "pid-file", required_argument, NULL, O_PID },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "sync-queue-depth", required_argument, NULL, O_SYNC_QD },
		{ "resync-rate", required_argument, NULL, O_RESYNC_RATE },
		{ "replace", no_argument, NULL, O_REPLACE },
		{ "no-activity-log", no_argument, NULL, O_NO_AL },
		{ "no-mmap", no_argument, NULL, O_NO_MMAP },
		{ "syslog", no_argument, NULL, O_SYSLOG },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		unsigned long v;

		switch (c) {
		case O_LISTEN:
			cfg->listen = optarg;
			break;
		case O_STORE:
			if (cfg->nserved == MAX_STORES)
				return usage_error("at most %u stores and members in all", MAX_STORES);
			cfg->served[cfg->nserved++].path = optarg;
			break;
		case O_CONFIG:
		case O_POOL:
			ret = add_pool_file(cfg, c == O_CONFIG ? optarg : NULL,
					    c == O_POOL ? optarg : NULL);
			if (ret >= 0)
				return ret;
			break;
		case O_MEMBER:
			if (!cfg->nserved || !cfg->served[cfg->nserved - 1].conf)
				return usage_error("--member '%s' follows no --config or --pool", optarg);
			if (cfg->served[cfg->nserved - 1].member_arg)
				return usage_error("a second --member for %s: give the pool file again "
						   "for another member",
						   cfg->served[cfg->nserved - 1].conf->file);
			cfg->served[cfg->nserved - 1].member_arg = optarg;
			break;
		case O_PROVIDER:
			if (strcmp(optarg, "tcp") && strcmp(optarg, "shm") && strcmp(optarg, "verbs"))
				return usage_error("unknown provider '%s' (tcp, shm, verbs)", optarg);
			cfg->provider = optarg;
			break;
		case O_TRANSPORT:
			if (strcmp(optarg, "fabric") && strcmp(optarg, "mem"))
				return usage_error("unknown transport '%s' (fabric, mem)", optarg);
			cfg->transport = optarg;
			break;
		case O_CONTROL:
			cfg->control = optarg;
			break;
		case O_READY:
			cfg->ready_file = optarg;
			break;
		case O_KEY_FILE:
			cfg->key_file = optarg;
			break;
		case O_PID:
			cfg->pid_file = optarg;
			break;
		case O_QD:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 || v > 1024)
				return usage_error("bad --queue-depth '%s' (1..1024)", optarg);
			cfg->queue_depth = (unsigned)v;
			break;
		case O_SYNC_QD:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] < '0' || optarg[0] > '9' ||
			    v < 1 || v > SYNC_QD_MAX)
				return usage_error("bad --sync-queue-depth '%s' (1..%u)", optarg,
						   SYNC_QD_MAX);
			cfg->sync_queue_depth = (unsigned)v;
			break;
		case O_RESYNC_RATE:
			if (parse_rate(optarg, &cfg->resync_rate) < 0)
				return usage_error("bad --resync-rate '%s' (bytes per second, "
						   "optional suffix K, M or G; 0 = unlimited)",
						   optarg);
			cfg->have_resync_rate = true;
			break;
		case O_REPLACE:
			cfg->replace = true;
			break;
		case O_NO_AL:
			cfg->no_activity_log = true;
			break;
		case O_NO_MMAP:
			cfg->no_mmap = true;
			break;
		case O_SYSLOG:
			cfg->syslog = true;
			break;
		case O_VERBOSE:
			cfg->verbose = true;
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		case '?':
		default:
			if (optopt)
				return usage_error("option '%s' needs an argument", argv[optind - 1]);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!cfg->nserved)
		return usage_error("at least one --store, or --config/--pool with --member, is required");
	ret = apply_pool_files(cfg);
	if (ret >= 0)
		return ret;
	if (!cfg->listen || !*cfg->listen)
		return usage_error("--listen is required");
	if (strlen(cfg->listen) > RMR_ADDR_MAX)
		return usage_error("--listen address longer than %u bytes", RMR_ADDR_MAX);
	if (cfg->control && strlen(cfg->control) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return usage_error("--control path too long");
	for (unsigned i = 0; i < cfg->nserved; i++)
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(cfg->served[i].path, cfg->served[j].path))
				return usage_error("store %s is named twice", cfg->served[i].path);
	return load_keys(cfg);
}

/* Write @p text to @p path atomically: PATH.tmp, then rename. */
static int write_file_atomic(const char *path, const char *text)
{
	char tmp[PATH_MAX];
	size_t len = strlen(text);
	int fd, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		ret = errno ? -errno : -EIO;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* The log identity: the pools and members served ("vol1,vol2", "1,3"). */
static void set_identity(const struct server_ctl *ctl, const struct server_cfg *cfg)
{
	char pools[256] = "", members[128] = "";
	size_t pu = 0, mu = 0;

	for (unsigned i = 0; i < cfg->nserved; i++) {
		const char *name = i < ctl->npools ? ctl->pools[i].name
				   : cfg->served[i].conf ? cfg->served[i].conf->name : NULL;
		unsigned id = i < ctl->npools ? ctl->pools[i].member_id
			      : cfg->served[i].m ? cfg->served[i].m->id : 0;
		int n;

		if (!name || !id)
			continue;
		n = snprintf(pools + pu, sizeof(pools) - pu, "%s%s", pu ? "," : "", name);
		if (n > 0 && (size_t)n < sizeof(pools) - pu)
			pu += (size_t)n;
		n = snprintf(members + mu, sizeof(members) - mu, "%s%u", mu ? "," : "", id);
		if (n > 0 && (size_t)n < sizeof(members) - mu)
			mu += (size_t)n;
	}
	dlog_identity(pools, members);
}

/* A store opened for a member of a pool file must be that member's. */
static int check_store(const struct served *sv, const struct brmr_store_info *info)
{
	char want[37], have[37];

	if (!sv->conf)
		return 0;
	if (info->member_id == sv->m->id && !strcmp(info->pool_name, sv->conf->name) &&
	    !memcmp(&info->pool_uuid, &sv->conf->uuid, sizeof(info->pool_uuid)))
		return 0;
	rmr_uuid_format(&sv->conf->uuid, want);
	rmr_uuid_format(&info->pool_uuid, have);
	dlog(RMR_LOG_ERR, "store %s holds member %u of pool %s (uuid %s), but %s:%u names it the "
	     "store of member %u of pool %s (uuid %s)", sv->path, info->member_id, info->pool_name,
	     have, sv->conf->file, sv->m->line, sv->m->id, sv->conf->name, want);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct server_cfg cfg = { 0 };
	static struct server_ctl ctl;
	struct rmr_server_pool *pools[MAX_STORES] = { 0 };
	struct rmr_server *srv = NULL;
	struct rmr_server_opts opts = { .size = sizeof(opts) };
	bool pid_written = false, ready_written = false;
	int sfd = -1, rc = 1, ret;
	sigset_t mask;

	ret = parse_args(argc, argv, &cfg);
	if (ret >= 0) {
		for (unsigned i = 0; i < cfg.nserved; i++)
			free(cfg.served[i].conf);
		return ret;
	}
	dlog_open("brmr-server", cfg.syslog, cfg.verbose);
	set_identity(&ctl, &cfg);
	rmr_log_set_sink(dlog_rmr_sink, NULL, cfg.verbose ? RMR_LOG_DEBUG : RMR_LOG_INFO);

	/*
	 * Block the stop signals before librmr starts threads (they inherit the
	 * mask), and take them through a signalfd in the main loop: shutdown
	 * then runs in plain code, not in a signal handler.
	 */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		dlog(RMR_LOG_ERR, "signalfd: %s", strerror(errno));
		return 1;
	}
	ret = server_ctl_init(&ctl);
	if (ret < 0) {
		dlog(RMR_LOG_ERR, "event stream: %s", strerror(-ret));
		goto out;
	}

	/* Every store must be good before anything is served. */
	for (unsigned i = 0; i < cfg.nserved; i++) {
		struct brmr_store_info info = { .size = sizeof(info) };
		struct served_pool *sp = &ctl.pools[i];
		char why[256] = "";

		ret = brmr_store_open(cfg.served[i].path, &sp->store, why, sizeof(why));
		if (ret < 0) {
			dlog(RMR_LOG_ERR, "store %s: %s", cfg.served[i].path,
			     why[0] ? why : strerror(-ret));
			goto out;
		}
		ctl.npools++;
		brmr_store_info(sp->store, &info);
		if (check_store(&cfg.served[i], &info) < 0)
			goto out;
		snprintf(sp->name, sizeof(sp->name), "%s", info.pool_name);
		sp->member_id = info.member_id;
	}
	set_identity(&ctl, &cfg);

	/*
	 * Before serving: a live daemon on a socket means a second start. The
	 * flag's socket serves every pool; else each pool file's member has its
	 * own, where `brmrctl --pool NAME --member ID` finds it.
	 */
	if (cfg.control && server_ctl_listen(&ctl, cfg.control, NULL) < 0)
		goto out;
	for (unsigned i = 0; !cfg.control && i < cfg.nserved; i++)
		if (cfg.served[i].conf &&
		    server_ctl_listen(&ctl, cfg.served[i].m->control, cfg.served[i].conf->name) < 0)
			goto out;

	opts.listen_addr = cfg.listen;
	opts.transport = cfg.transport;
	opts.provider = cfg.provider;
	opts.queue_depth = cfg.queue_depth;
	opts.events = &server_ctl_events;
	opts.priv = &ctl;
	for (unsigned i = 0; i < cfg.nserved; i++)
		if (cfg.served[i].conf) {
			opts.heartbeat_ms = cfg.served[i].conf->heartbeat_ms;
			opts.failure_timeout_ms = cfg.served[i].conf->failure_timeout_ms;
			break;
		}
	ret = rmr_server_create(&opts, &srv);
	if (ret < 0) {
		dlog(RMR_LOG_ERR, "cannot listen on %s: %s", cfg.listen, strerror(-ret));
		goto out;
	}
	ctl.srv = srv;
	for (unsigned i = 0; i < cfg.nserved; i++) {
		const struct served *sv = &cfg.served[i];
		struct brmr_store_info info = { .size = sizeof(info) };
		struct brmr_serve_opts serve = {
			.size = sizeof(serve),
			.sync_queue_depth = cfg.sync_queue_depth ? cfg.sync_queue_depth
					    : sv->conf ? sv->conf->sync_queue_depth : SYNC_QD_DEFAULT,
			.resync_rate = cfg.have_resync_rate || !sv->conf ? cfg.resync_rate
				       : sv->conf->resync_rate,
			.replace = cfg.replace,
			.no_activity_log = cfg.no_activity_log,
			.no_mmap = cfg.no_mmap,
			.key = sv->keyed ? sv->key : NULL,
		};
		char uuid[37];

		brmr_store_info(ctl.pools[i].store, &info);
		rmr_uuid_format(&info.pool_uuid, uuid);
		ret = brmr_store_serve(ctl.pools[i].store, srv, &serve, &pools[i]);
		ctl.pools[i].handle = ret < 0 ? NULL : pools[i];
		if (ret < 0) {
			dlog_pm(RMR_LOG_ERR, info.pool_name, info.member_id, "store %s: cannot serve: %s",
				sv->path,
				ret == -EBUSY ? "store is in use by another server (or listed twice)"
				: info.data_lost
					? "a write-back to it failed before: data it acknowledged may be lost; replace it (brmrctl replace-member, then brmr-server --replace)"
				: ret == -EEXIST && cfg.replace
					? "--replace: the store has served the pool before; a replacement must be a new store"
					: strerror(-ret));
			goto out;
		}
		brmr_store_info(ctl.pools[i].store, &info);
		dlog_pm(RMR_LOG_INFO, info.pool_name, info.member_id,
			"serving pool=%s uuid=%s member=%u size=%llu chunk=%u from %s%s%s%s",
			info.pool_name, uuid, info.member_id, (unsigned long long)info.pool_size,
			info.chunk_size, sv->path,
			info.mapped ? " (on tmpfs: data mapped)" : "",
			sv->conf ? " as configured in " : "", sv->conf ? sv->conf->file : "");
	}
	if (cfg.pid_file) {
		char pid[32];

		snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		ret = write_file_atomic(cfg.pid_file, pid);
		if (ret < 0) {
			dlog(RMR_LOG_ERR, "pid file %s: %s", cfg.pid_file, strerror(-ret));
			goto out;
		}
		pid_written = true;
	}
	if (cfg.ready_file) {
		ret = write_file_atomic(cfg.ready_file, "ready\n");
		if (ret < 0) {
			dlog(RMR_LOG_ERR, "ready file %s: %s", cfg.ready_file, strerror(-ret));
			goto out;
		}
		ready_written = true;
	}
	dlog(RMR_LOG_INFO, "ready: %u pool(s) on %s", cfg.nserved, cfg.listen);

	for (;;) {
		struct pollfd pfd[1 + RMR_SERVER_MAX_POOLS + EVSTREAM_MAX_LISTENERS + 1];
		unsigned n;

		pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		n = 1 + server_ctl_pollfds(&ctl, pfd + 1);
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			dlog(RMR_LOG_ERR, "poll: %s", strerror(errno));
			goto out;
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				dlog(RMR_LOG_NOTICE, "signal %u: shutting down", si.ssi_signo);
			rc = 0;
			break;
		}
		server_ctl_handle(&ctl, pfd + 1, n - 1);
	}

out:
	for (unsigned i = 0; i < cfg.nserved; i++)
		if (pools[i])
			rmr_server_remove_pool(pools[i]);
	if (srv)
		rmr_server_destroy(srv);
	for (unsigned i = 0; i < ctl.npools; i++)
		brmr_store_close(ctl.pools[i].store);
	server_ctl_close(&ctl);
	if (ready_written)
		unlink(cfg.ready_file);
	if (pid_written)
		unlink(cfg.pid_file);
	if (sfd >= 0)
		close(sfd);
	for (unsigned i = 0; i < cfg.nserved; i++) {
		free(cfg.served[i].conf);
		explicit_bzero(cfg.served[i].key, sizeof(cfg.served[i].key));
	}
	return rc;
}
