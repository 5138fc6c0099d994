/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kvstore-member: a storage member of a kvstore pool. It keeps its buckets
 * in one store file (kv_store.h) and serves them to the front and to its
 * peers through librmr.
 *
 *   kvstore-member create --store PATH --pool NAME --uuid UUID --id N [...]
 *   kvstore-member serve  --store PATH --listen ADDR [--peer ID=ADDR ...] [...]
 *   kvstore-member digest --store PATH
 *   kvstore-member create-key --key-file PATH
 *
 * Exit status: 0 on success (serve: after SIGTERM/SIGINT), 1 on a runtime
 * error, 2 on a usage error; digest exits 3 when the store has damaged
 * buckets (the digest then leaves them out).
 */
#include "kv_log.h"
#include "kv_sha256.h"
#include "kv_store.h"
#include "kv_util.h"
#include "member.h"

#include <rmr/server.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_DAMAGED 3
#define PROG "kvstore-member"
#define DEFAULT_BUCKETS 256u
#define DEFAULT_BUCKET_SIZE (64u * 1024)
#define DEFAULT_MAX_IO (128u * 1024)
#define MAX_IO_LIMIT (4u << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"Usage:\n"
		"  " PROG " create --store PATH --pool NAME --uuid UUID --id N [--buckets N]\n"
		"                 [--bucket-size SIZE] [--force]\n"
		"  " PROG " serve --store PATH --listen ADDR [--peer ID=ADDR ...] [options]\n"
		"  " PROG " digest --store PATH\n"
		"  " PROG " create-key --key-file PATH\n"
		"\n"
		"A storage member of a kvstore pool (examples/kvstore): its buckets live in\n"
		"one store file; the front (kvstore-front) and the other members reach it\n"
		"through librmr.\n"
		"\n"
		"create: make a new store file for member N of pool NAME.\n"
		"  --buckets N          buckets in the pool (default %u); every member must agree.\n"
		"                       Up to about 250, librmr's activity log holds them all;\n"
		"                       beyond, a write to a bucket not written lately costs a\n"
		"                       durable log record first\n"
		"  --bucket-size SIZE   bytes per bucket, a power of two in 4K..4M (default 64K);\n"
		"                       the largest key + value is SIZE - 88 bytes\n"
		"  --force              overwrite an existing file\n"
		"\n"
		"serve: serve the store as its member of the pool.\n"
		"  --listen ADDR        HOST:PORT to listen on (PORT alone: 127.0.0.1:PORT)\n"
		"  --key-file PATH      the pool key (create-key): every session, from the front\n"
		"                       or a peer, must prove it; without it the pool is open to\n"
		"                       anyone who reaches the port (a warning is logged)\n"
		"  --peer ID=ADDR       another member of the pool and where it listens; repeat\n"
		"                       per member (members copy missed buckets from each other)\n"
		"  --provider NAME      fabric provider: tcp (default), shm, verbs\n"
		"  --max-io SIZE        largest librmr request (default: the bucket size, at least\n"
		"                       128K); a bucket must fit in one, so that a peer copies it\n"
		"                       in one piece, as one consistent snapshot\n"
		"  --queue-depth N      requests in flight per session (1..1024, default 128)\n"
		"  --sync-queue-depth N buckets copied from peers at once (1..256, default 32)\n"
		"  --resync-rate RATE   resync bytes per second, K/M/G suffixes (default unlimited)\n"
		"  --sync-writes        make every change durable (fdatasync) before it is\n"
		"                       acknowledged; default: in the page cache, durable on flush\n"
		"  --replace            the store is a blank replacement for member N: every\n"
		"                       bucket is copied in from the peers while it serves\n"
		"  --control PATH       status socket (mode 0600): 'status text' / 'status json'\n"
		"  --ready-file PATH    write \"ready\" to PATH once serving\n"
		"  --pid-file PATH      write the process id to PATH\n"
		"  --verbose            debug logs\n"
		"\n"
		"digest: print the digest of the store's data (the same as the front's\n"
		"KVDIGEST for this member), its key count and geometry, without serving it.\n"
		"\n"
		"create-key: make a new pool key file (random, mode 0600; never overwrites).\n"
		"Give the same file to every member and to the front with --key-file.\n",
		DEFAULT_BUCKETS);
}

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(EXIT_USAGE);
}

static uint64_t opt_u64(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (kv_parse_u64(arg, min, max, &v) < 0)
		usage_error("%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, opt, arg, min, max);
	return v;
}

static uint64_t opt_size(const char *opt, const char *arg)
{
	uint64_t v;

	if (kv_parse_size(arg, &v) < 0)
		usage_error("%s: '%s' is not a size (a number with an optional K, M or G)", opt, arg);
	return v;
}

/* "PORT" or ":PORT" means 127.0.0.1: listen on loopback unless told otherwise. */
static const char *listen_addr(const char *arg, char *buf, size_t len)
{
	uint64_t port;
	const char *p = arg[0] == ':' ? arg + 1 : arg;

	if (kv_parse_u64(p, 1, 65535, &port) == 0) {
		snprintf(buf, len, "127.0.0.1:%" PRIu64, port);
		return buf;
	}
	if (!*arg || strlen(arg) > RMR_ADDR_MAX)
		usage_error("--listen: bad address '%s'", arg);
	return arg;
}

/* --- create ------------------------------------------------------------------ */

static int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "pool", required_argument, NULL, 'p' },
		{ "uuid", required_argument, NULL, 'u' },
		{ "id", required_argument, NULL, 'i' },
		{ "buckets", required_argument, NULL, 'b' },
		{ "bucket-size", required_argument, NULL, 'B' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct kv_store_params p = { .nbuckets = DEFAULT_BUCKETS, .bucket_size = DEFAULT_BUCKET_SIZE };
	const char *store = NULL, *uuid = NULL;
	bool force = false;
	char why[256], text[37];
	uint64_t v;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			store = optarg;
			break;
		case 'p':
			p.pool_name = optarg;
			break;
		case 'u':
			uuid = optarg;
			break;
		case 'i':
			p.member_id = (uint16_t)opt_u64("--id", optarg, 1, RMR_MAX_MEMBER_ID);
			break;
		case 'b':
			p.nbuckets = opt_u64("--buckets", optarg, 1, UINT32_MAX);
			break;
		case 'B':
			v = opt_size("--bucket-size", optarg);
			if (v < KV_STORE_MIN_BUCKET || v > KV_STORE_MAX_BUCKET || (v & (v - 1)))
				usage_error("--bucket-size: %s is not a power of two in 4K..4M", optarg);
			p.bucket_size = (uint32_t)v;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage_error("create: bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("create: unexpected argument '%s'", argv[optind]);
	if (!store || !p.pool_name || !uuid || !p.member_id)
		usage_error("create needs --store, --pool, --uuid and --id");
	if (!kv_store_name_valid(p.pool_name))
		usage_error("--pool: '%s' is not 1..%d characters of [A-Za-z0-9._-]", p.pool_name,
			    RMR_NAME_MAX);
	if (rmr_uuid_parse(uuid, &p.uuid) < 0)
		usage_error("--uuid: '%s' is not a UUID", uuid);
	ret = kv_store_create(store, &p, force, why, sizeof(why));
	if (ret < 0) {
		fprintf(stderr, PROG ": %s\n", why);
		return 1;
	}
	rmr_uuid_format(&p.uuid, text);
	printf("created %s: pool %s (%s), member %u, %" PRIu64 " buckets of %" PRIu32 " bytes\n",
	       store, p.pool_name, text, p.member_id, p.nbuckets, p.bucket_size);
	return 0;
}

/* --- digest ------------------------------------------------------------------ */

static int cmd_digest(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	struct kv_store *s;
	uint8_t d[KV_SHA256_LEN];
	char hex[2 * KV_SHA256_LEN + 1], why[256];
	uint64_t keys, damaged;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's') {
			path = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage_error("digest: bad option '%s'", argv[optind - 1]);
		}
	}
	if (!path || optind < argc)
		usage_error("digest needs --store PATH and nothing else");
	ret = kv_store_open(path, false, &s, why, sizeof(why));
	if (ret < 0) {
		fprintf(stderr, PROG ": %s\n", why);
		return 1;
	}
	kv_log_init(PROG, s->pool_name, s->member_id, false);
	kv_store_report_damaged(s);
	ret = kv_store_digest(s, d, &keys, &damaged);
	if (ret < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(-ret));
		kv_store_close(s);
		return 1;
	}
	kv_sha256_hex(d, hex);
	printf("%s keys=%" PRIu64 " damaged=%" PRIu64 " pool=%s member=%u buckets=%" PRIu64
	       " bucket_size=%" PRIu32 "\n",
	       hex, keys, damaged, s->pool_name, s->member_id, s->nbuckets, s->bucket_size);
	kv_store_close(s);
	if (damaged) {
		fprintf(stderr, PROG ": %s: %" PRIu64 " damaged bucket(s) left out of the digest\n",
			path, damaged);
		return EXIT_DAMAGED;
	}
	return 0;
}

/* --- create-key -------------------------------------------------------------- */

static int cmd_create_key(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "key-file", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	char why[512];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'k') {
			path = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage_error("create-key: bad option '%s'", argv[optind - 1]);
		}
	}
	if (!path || optind < argc)
		usage_error("create-key needs --key-file PATH and nothing else");
	if (rmr_key_create(path, why, sizeof(why)) < 0) {
		fprintf(stderr, PROG ": %s\n", why);
		return 1;
	}
	printf("created %s: a new pool key, mode 0600\n", path);
	return 0;
}

/* --- serve ------------------------------------------------------------------- */

struct serve_cfg {
	const char *store;
	const char *listen;
	char listen_buf[RMR_ADDR_MAX + 1];
	struct rmr_peer peers[RMR_MAX_MEMBERS];
	char peer_addr[RMR_MAX_MEMBERS][RMR_ADDR_MAX + 1];
	unsigned npeers;
	const char *provider;
	const char *transport;
	uint64_t max_io;             /* 0: from the bucket size */
	unsigned queue_depth;
	unsigned sync_queue_depth;
	uint64_t resync_rate;
	bool sync_writes, replace, verbose;
	const char *control, *ready_file, *pid_file;
	const char *key_file;        /* NULL: an open pool */
};

static void parse_peer(struct serve_cfg *cfg, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char idtext[8];
	uint64_t id;

	if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= sizeof(idtext))
		usage_error("--peer: '%s' is not ID=ADDR", arg);
	snprintf(idtext, sizeof(idtext), "%.*s", (int)(eq - arg), arg);
	if (kv_parse_u64(idtext, 1, RMR_MAX_MEMBER_ID, &id) < 0)
		usage_error("--peer: '%s' is not a member id in 1..%d", idtext, RMR_MAX_MEMBER_ID);
	if (strlen(eq + 1) > RMR_ADDR_MAX)
		usage_error("--peer: the address of member %s is too long", idtext);
	for (unsigned i = 0; i < cfg->npeers; i++)
		if (cfg->peers[i].member_id == id)
			usage_error("--peer: member %s given twice", idtext);
	if (cfg->npeers == RMR_MAX_MEMBERS - 1)
		usage_error("--peer: at most %d peers", RMR_MAX_MEMBERS - 1);
	snprintf(cfg->peer_addr[cfg->npeers], sizeof(cfg->peer_addr[0]), "%s", eq + 1);
	cfg->peers[cfg->npeers].member_id = (uint16_t)id;
	cfg->peers[cfg->npeers].addr = cfg->peer_addr[cfg->npeers];
	cfg->npeers++;
}

static void parse_serve(int argc, char **argv, struct serve_cfg *cfg)
{
	enum { O_PROVIDER = 256, O_TRANSPORT, O_MAX_IO, O_QD, O_SQD, O_RATE, O_SYNC, O_REPLACE,
	       O_CONTROL, O_READY, O_PID, O_VERBOSE, O_KEY };
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "peer", required_argument, NULL, 'p' },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "max-io", required_argument, NULL, O_MAX_IO },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "sync-queue-depth", required_argument, NULL, O_SQD },
		{ "resync-rate", required_argument, NULL, O_RATE },
		{ "sync-writes", no_argument, NULL, O_SYNC },
		{ "replace", no_argument, NULL, O_REPLACE },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "ready-file", required_argument, NULL, O_READY },
		{ "pid-file", required_argument, NULL, O_PID },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "key-file", required_argument, NULL, O_KEY },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			cfg->store = optarg;
			break;
		case 'l':
			cfg->listen = listen_addr(optarg, cfg->listen_buf, sizeof(cfg->listen_buf));
			break;
		case 'p':
			parse_peer(cfg, optarg);
			break;
		case O_PROVIDER:
			if (strcmp(optarg, "tcp") && strcmp(optarg, "shm") && strcmp(optarg, "verbs"))
				usage_error("--provider: '%s' is not tcp, shm or verbs", optarg);
			cfg->provider = optarg;
			break;
		case O_TRANSPORT:
			if (strcmp(optarg, "fabric") && strcmp(optarg, "mem"))
				usage_error("--transport: '%s' is not fabric or mem", optarg);
			cfg->transport = optarg;
			break;
		case O_MAX_IO:
			cfg->max_io = opt_size("--max-io", optarg);
			if (cfg->max_io < 4096 || cfg->max_io > MAX_IO_LIMIT)
				usage_error("--max-io: %s is not in 4K..4M", optarg);
			break;
		case O_QD:
			cfg->queue_depth = (unsigned)opt_u64("--queue-depth", optarg, 1, 1024);
			break;
		case O_SQD:
			cfg->sync_queue_depth = (unsigned)opt_u64("--sync-queue-depth", optarg, 1, 256);
			break;
		case O_RATE:
			cfg->resync_rate = opt_size("--resync-rate", optarg);
			break;
		case O_SYNC:
			cfg->sync_writes = true;
			break;
		case O_REPLACE:
			cfg->replace = true;
			break;
		case O_CONTROL:
			cfg->control = optarg;
			break;
		case O_READY:
			cfg->ready_file = optarg;
			break;
		case O_PID:
			cfg->pid_file = optarg;
			break;
		case O_VERBOSE:
			cfg->verbose = true;
			break;
		case O_KEY:
			cfg->key_file = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage_error("serve: bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("serve: unexpected argument '%s'", argv[optind]);
	if (!cfg->store || !cfg->listen)
		usage_error("serve needs --store and --listen");
}

static struct kv_store *g_store;
static atomic_uint g_own_events; /* own dirty-tracking events seen, for the start-up race */

static void ev_dirty(void *priv, const char *pool, uint16_t member_id, bool dirty)
{
	(void)priv;
	(void)pool;
	if (member_id == g_store->member_id) {
		atomic_store(&g_store->own_dirty, dirty);
		atomic_fetch_add(&g_own_events, 1);
		kv_log(KV_LOG_NOTICE, "%s", dirty ? "this member missed writes: it copies those buckets from its peers"
						  : "this member holds every bucket again");
	} else {
		kv_log(KV_LOG_NOTICE, "member %u %s", member_id,
		       dirty ? "missed writes: its buckets are recorded dirty here"
			     : "holds every bucket again");
	}
}

static void ev_resync(void *priv, const char *pool, uint64_t done, uint64_t total, uint64_t bytes)
{
	(void)priv;
	(void)pool;
	kv_log(KV_LOG_NOTICE, "resync: %" PRIu64 "/%" PRIu64 " buckets, %" PRIu64 " bytes copied from peers%s",
	       done, total, bytes, done == total ? ": complete" : "");
}

static void ev_map_update(void *priv, const char *pool, uint16_t source, int status)
{
	(void)priv;
	(void)pool;
	kv_log(status ? KV_LOG_WARN : KV_LOG_NOTICE, "dirty maps from member %u: %s", source,
	       status ? strerror(-status) : "taken");
}

static const struct rmr_server_events server_events = {
	.size = sizeof(server_events),
	.dirty_tracking = ev_dirty,
	.resync_progress = ev_resync,
	.map_update = ev_map_update,
};

/* Whether this member starts with buckets of its own to copy (maps from before a restart). */
static void init_own_dirty(struct rmr_server *srv, uint16_t id)
{
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	unsigned seen = atomic_load(&g_own_events);

	if (!st)
		return;
	st->size = sizeof(*st);
	/* An event after the snapshot is newer than it: then the event stands. */
	if (rmr_server_status(srv, st) == 0 && st->npools == 1) {
		if (atomic_load(&g_own_events) == seen)
			atomic_store(&g_store->own_dirty, st->pools[0].dirty_chunks[id] != 0);
	} else {
		kv_log(KV_LOG_WARN, "no status from librmr: multi-key reads go key by key until this member next resyncs");
	}
	free(st);
}

static int serve_loop(int sfd, int ctl, struct rmr_server *srv)
{
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = ctl, .events = POLLIN },
		};

		if (poll(pfd, ctl >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			kv_log(KV_LOG_ERR, "poll: %s", strerror(errno));
			return 1;
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				kv_log(KV_LOG_NOTICE, "%s: shutting down", strsignal((int)si.ssi_signo));
			return 0;
		}
		if (ctl >= 0 && (pfd[1].revents & POLLIN))
			member_control_serve(ctl, srv);
	}
}

static int cmd_serve(int argc, char **argv)
{
	struct serve_cfg cfg = { 0 };
	struct rmr_server_opts so = { .size = sizeof(so) };
	struct rmr_pool_params pp = { .size = sizeof(pp) };
	struct rmr_server *srv = NULL;
	struct rmr_server_pool *pool = NULL;
	bool pid_written = false, ready_written = false;
	int sfd = -1, ctl = -1, rc = 1, ret;
	char why[512], uuid[37];
	uint8_t key[RMR_KEY_LEN];
	sigset_t mask;

	parse_serve(argc, argv, &cfg);
	kv_log_init(PROG, "?", 0, cfg.verbose);
	/* The key first: a member that cannot prove it must not start at all. */
	if (cfg.key_file && rmr_key_load(cfg.key_file, key, why, sizeof(why)) < 0) {
		kv_log(KV_LOG_ERR, "%s", why);
		return 1;
	}
	ret = kv_store_open(cfg.store, true, &g_store, why, sizeof(why));
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "store %s: %s", cfg.store, why);
		return 1;
	}
	kv_log_init(PROG, g_store->pool_name, g_store->member_id, cfg.verbose);
	kv_store_report_damaged(g_store);
	g_store->sync_writes = cfg.sync_writes;
	if (!cfg.max_io)
		cfg.max_io = g_store->bucket_size > DEFAULT_MAX_IO ? g_store->bucket_size : DEFAULT_MAX_IO;
	if (cfg.max_io < g_store->bucket_size) {
		kv_log(KV_LOG_ERR, "--max-io %" PRIu64 " is below the bucket size %" PRIu32 ": a peer must copy a bucket in one request, as one consistent snapshot",
		       cfg.max_io, g_store->bucket_size);
		goto out;
	}
	for (unsigned i = 0; i < cfg.npeers; i++)
		if (cfg.peers[i].member_id == g_store->member_id) {
			kv_log(KV_LOG_ERR, "--peer %u: that is this member's own id", g_store->member_id);
			goto out;
		}

	/* Stop signals blocked before librmr starts threads (they inherit the mask). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		kv_log(KV_LOG_ERR, "signalfd: %s", strerror(errno));
		goto out;
	}
	if (cfg.control) {
		ctl = kv_listen_unix(cfg.control, why, sizeof(why));
		if (ctl < 0) {
			kv_log(KV_LOG_ERR, "control socket: %s", why);
			goto out;
		}
	}

	rmr_log_set_sink(kv_log_rmr_sink, NULL, cfg.verbose ? RMR_LOG_DEBUG : RMR_LOG_INFO);
	so.listen_addr = cfg.listen;
	so.transport = cfg.transport;
	so.provider = cfg.provider;
	so.queue_depth = cfg.queue_depth;
	so.max_io_size = (unsigned)cfg.max_io;
	so.events = &server_events;
	ret = rmr_server_create(&so, &srv);
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "cannot listen on %s: %s", cfg.listen, strerror(-ret));
		goto out;
	}
	pp.name = g_store->pool_name;
	pp.uuid = g_store->uuid;
	pp.pool_size = g_store->pool_size;
	pp.chunk_size = g_store->bucket_size;
	pp.member_id = g_store->member_id;
	pp.members_mask = 1ull << g_store->member_id;
	for (unsigned i = 0; i < cfg.npeers; i++)
		pp.members_mask |= 1ull << cfg.peers[i].member_id;
	pp.npeers = cfg.npeers;
	pp.peers = cfg.npeers ? cfg.peers : NULL;
	pp.sync_queue_depth = cfg.sync_queue_depth;
	pp.resync_rate = cfg.resync_rate;
	pp.replace = cfg.replace;
	pp.key = cfg.key_file ? key : NULL;
	ret = rmr_server_add_pool(srv, &pp, &kv_store_ops, g_store, &pool);
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "cannot serve the pool: %s",
		       ret == -EEXIST && cfg.replace ? "--replace: the store has served the pool before; a replacement must be a new store"
		       : ret == -EBADMSG ? "librmr's metadata in the store is corrupt"
					 : strerror(-ret));
		goto out;
	}
	init_own_dirty(srv, g_store->member_id);
	rmr_uuid_format(&g_store->uuid, uuid);
	kv_log(KV_LOG_NOTICE, "serving %s on %s: uuid %s, %" PRIu64 " buckets of %" PRIu32 " bytes, %" PRIu64 " keys, %" PRIu64 " damaged, %u peer(s), %s",
	       cfg.store, cfg.listen, uuid, g_store->nbuckets, g_store->bucket_size,
	       g_store->keys, g_store->ndamaged, cfg.npeers,
	       cfg.key_file ? "sessions prove the pool key" : "open pool (no --key-file)");
	if (cfg.pid_file) {
		char pid[32];

		snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		ret = kv_write_file_atomic(cfg.pid_file, pid);
		if (ret < 0) {
			kv_log(KV_LOG_ERR, "pid file %s: %s", cfg.pid_file, strerror(-ret));
			goto out;
		}
		pid_written = true;
	}
	if (cfg.ready_file) {
		ret = kv_write_file_atomic(cfg.ready_file, "ready\n");
		if (ret < 0) {
			kv_log(KV_LOG_ERR, "ready file %s: %s", cfg.ready_file, strerror(-ret));
			goto out;
		}
		ready_written = true;
	}
	rc = serve_loop(sfd, ctl, srv);
out:
	explicit_bzero(key, sizeof(key)); /* librmr keeps its own copy */
	if (pool)
		rmr_server_remove_pool(pool);
	if (srv)
		rmr_server_destroy(srv);
	if (g_store && (ret = kv_store_flush(g_store)) < 0)
		kv_log(KV_LOG_WARN, "flush at exit: %s", strerror(-ret));
	kv_store_close(g_store);
	if (ctl >= 0) {
		close(ctl);
		unlink(cfg.control);
	}
	if (ready_written)
		unlink(cfg.ready_file);
	if (pid_written)
		unlink(cfg.pid_file);
	if (sfd >= 0)
		close(sfd);
	if (rc == 0)
		kv_log(KV_LOG_NOTICE, "stopped");
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	/* getopt sees the subcommand's own arguments. */
	opterr = 0;
	if (!strcmp(argv[1], "create"))
		return cmd_create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "serve"))
		return cmd_serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "digest"))
		return cmd_digest(argc - 1, argv + 1);
	if (!strcmp(argv[1], "create-key"))
		return cmd_create_key(argc - 1, argv + 1);
	usage_error("unknown command '%s' (create, serve, digest or create-key)", argv[1]);
}
