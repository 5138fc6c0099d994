/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd-brmr: serve a libbrmr block device (a replicated rmr pool) over NBD.
 *
 * main.c: command line, the pool, listeners, the main loop (accept, control
 * socket, signals) and the orderly shutdown:
 *   SIGTERM/SIGINT -> stop accepting, answer new requests ESHUTDOWN, wait
 *   for requests in flight, close every connection, brmr_close(), remove
 *   socket/ready/pid files, exit 0. A second signal skips the wait.
 *
 * The pool may come from a pool file (--config FILE, or --pool NAME alone:
 * DIR/NAME.conf, see brmr-pool.conf(5)); explicit flags override it.
 *
 * Exit codes: 0 after a clean shutdown, 1 on a runtime failure, 2 on a
 * usage error or a bad pool file.
 */
#include "nbdb.h"
#include "nbd_proto.h"

#include <rmr/brmr_config.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

/* How long shutdown waits for replies in flight before cutting every
 * connection. Cutting loses no data: connections still wait for every
 * request inside librmr to complete before closing. It bounds a client that
 * stopped reading its replies, and keeps a normal stop under the 10 s that
 * supervisors (and scripts/local-pool) give before SIGKILL. */
#define DRAIN_TIMEOUT_MS 5000

/*
 * Transmission flags: no READ_ONLY, no ROTATIONAL. CAN_MULTI_CONN: every
 * connection submits to the one pool, a write is replied to only once
 * every member that got it has applied it, and a FLUSH on any connection
 * makes each NORMAL member sync its whole store: it covers every write
 * completed before it on any connection, as the flag promises.
 */
#define EXPORT_TFLAGS                                                                \
	(NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |              \
	 NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN)

struct config {
	const char *pool;
	const char *members[RMR_MAX_MEMBERS];
	unsigned nmembers;
	const char *provider;
	const char *transport;
	char *socket_path;      /* absolute; NULL when --tcp */
	const char *tcp;
	const char *export_name;
	char *control_path;     /* absolute or NULL */
	char *record_path;      /* the record of the last clean close, or NULL */
	const char *ready_file;
	const char *pid_file;
	unsigned queue_depth;
	unsigned min_legs;
	uint64_t open_without;  /* --open-without: member ids (bit n = id n) */
	bool takeover;
	bool verbose;
	bool syslog;
	struct brmr_config *file; /* the pool file, or NULL */
	const char *key_file;   /* --key-file */
	bool keyed;             /* @key holds the pool key */
	uint8_t key[RMR_KEY_LEN];
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: nbd-brmr --pool NAME --member ADDR [--member ADDR ...] [OPTIONS]\n"
		"       nbd-brmr --config FILE [OPTIONS]\n"
		"       nbd-brmr --pool NAME [OPTIONS]      (the pool file DIR/NAME.conf)\n"
		"\n"
		"Serve the block device of an rmr pool (libbrmr) over NBD.\n"
		"\n"
		"Pool:\n"
		"      --config FILE        a pool file (brmr-pool.conf(5)): pool, members,\n"
		"                           provider, min_legs, timeouts, NBD socket, control\n"
		"  -p, --pool NAME          pool name; without --member and --config, the pool\n"
		"                           file DIR/NAME.conf is read (DIR: $BRMR_CONFIG_DIR or\n"
		"                           " BRMR_CONFIG_DIR ")\n"
		"  -m, --member ADDR        member address, repeat per member (1..%d):\n"
		"                           HOST:PORT of its brmr-server --listen for tcp,\n"
		"                           a name for shm; replaces the file's members\n"
		"      --provider P         fabric provider: tcp (default), shm, verbs\n"
		"      --transport T        fabric (default) or mem\n"
		"      --min-legs N         members that must apply a write (default 1)\n"
		"      --takeover           take the pool over from the writer that holds it\n"
		"                           (failover): the members fence the old writer; without\n"
		"                           it, a pool another live writer holds is refused\n"
		"      --open-without ID[,ID...]\n"
		"                           open even though these members do not answer:\n"
		"                           gives up the writes only they may hold (a member\n"
		"                           gone for good; see nbd-brmr(8))\n"
		"      --close-record FILE  where a clean shutdown records which members were\n"
		"                           current, so that the next start may go on without\n"
		"                           the others (default: the control socket's path with\n"
		"                           .closed for .ctl; \"\" for none)\n"
		"      --key-file PATH      the pool key (mode 0600, made by brmrctl create);\n"
		"                           default the pool file's key_file (NAME.key next to\n"
		"                           it); without one the members must be an open pool\n"
		"\n"
		"NBD:\n"
		"  -s, --socket PATH        listen on a unix socket, mode 0600\n"
		"                           (default /tmp/nbd-brmr-POOL.sock)\n"
		"  -t, --tcp HOST:PORT      listen on TCP instead (HOST defaults to 127.0.0.1)\n"
		"  -e, --export-name NAME   export name (default: the pool name; \"\" is\n"
		"                           always accepted too)\n"
		"  -q, --queue-depth N      requests in flight per connection (default %u,\n"
		"                           max %u)\n"
		"\n"
		"Operation:\n"
		"  -c, --control PATH       control socket (mode 0600): \"status text|json|prometheus\",\n"
		"                           \"events\", \"events now\", \"maintenance on|off ID\";\n"
		"                           brmrctl status|metrics|events|maintenance speak it\n"
		"  -r, --ready-file PATH    once serving, write the NBD URI to PATH (atomically)\n"
		"  -P, --pid-file PATH      write the process id to PATH\n"
		"      --syslog             log to syslog (facility daemon) instead of stderr\n"
		"  -v, --verbose            debug logs (connections, options, refused requests)\n"
		"  -h, --help               this help\n"
		"\n"
		"Flags override the pool file. SIGTERM or SIGINT: stop accepting, finish\n"
		"requests in flight, exit 0. Exit status 1 on a runtime failure, 2 for a bad\n"
		"command line or pool file.\n",
		RMR_MAX_MEMBERS, NBDB_QUEUE_DEPTH_DEFAULT, NBDB_QUEUE_DEPTH_MAX);
}

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "nbd-brmr: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see --help)\n");
	exit(EXIT_USAGE);
}

static unsigned parse_uint(const char *opt, const char *arg, unsigned min, unsigned max)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!*arg || *end || errno || arg[0] == '-' || v < min || v > max)
		usage_error("%s: '%s' is not a number in %u..%u", opt, arg, min, max);
	return (unsigned)v;
}

/* Member ids "1,3" as a mask (bit n = id n); every id 1..RMR_MAX_MEMBER_ID. */
static uint64_t parse_ids(const char *opt, const char *arg)
{
	uint64_t ids = 0;
	char buf[256], *save = NULL;

	if (strlen(arg) >= sizeof(buf) || !*arg)
		usage_error("%s: '%s' is not a list of member ids", opt, arg);
	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		ids |= 1ull << parse_uint(opt, t, 1, RMR_MAX_MEMBER_ID);
	if (!ids)
		usage_error("%s: '%s' is not a list of member ids", opt, arg);
	return ids;
}

/* Absolute form of @p path, so the URI and the cleanup at exit still work
 * whatever the clients' working directory. */
static char *absolute_path(const char *path)
{
	char cwd[PATH_MAX];
	char *out;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s/%s", cwd, path) < 0)
		return NULL;
	return out;
}

static bool valid_pool_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > RMR_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

/*
 * Fill in from the pool file (--config FILE, or --pool NAME alone) what the
 * flags did not say. A bad file is a one-line "FILE:LINE: reason", exit 2.
 */
static void apply_pool_file(struct config *cfg, const char *path, const char **socket_arg,
			    const char **control_arg)
{
	struct brmr_config *f = calloc(1, sizeof(*f));
	char err[1280], host[256], port[16];

	if (!f)
		exit(1);
	f->size = sizeof(*f);
	if ((path ? brmr_config_load(path, f, err, sizeof(err))
		  : brmr_config_load_pool(cfg->pool, f, err, sizeof(err))) < 0) {
		fprintf(stderr, "nbd-brmr: %s\n", err);
		free(f);
		exit(EXIT_USAGE);
	}
	cfg->file = f;
	if (cfg->pool && strcmp(cfg->pool, f->name))
		usage_error("--pool %s contradicts %s:%u, which is pool '%s'", cfg->pool, f->file,
			    f->line, f->name);
	cfg->pool = f->name;
	if (!cfg->nmembers)
		for (unsigned i = 0; i < f->nmembers; i++)
			cfg->members[cfg->nmembers++] = f->members[i].address;
	if (!cfg->provider)
		cfg->provider = f->provider;
	if (!cfg->transport)
		cfg->transport = f->transport;
	if (!cfg->min_legs)
		cfg->min_legs = f->min_legs;
	if (!*socket_arg && !cfg->tcp) {
		if (f->client_tcp[0]) {
			if (nbdb_parse_hostport(f->client_tcp, host, sizeof(host), port,
						sizeof(port)) < 0) {
				fprintf(stderr, "nbd-brmr: %s: [client] tcp '%s' is not HOST:PORT\n",
					f->file, f->client_tcp);
				exit(EXIT_USAGE);
			}
			cfg->tcp = f->client_tcp;
		} else {
			*socket_arg = f->client_socket;
		}
	}
	if (!*control_arg)
		*control_arg = f->client_control;
}

static void parse_args(int argc, char **argv, struct config *cfg)
{
	static const struct option longopts[] = {
		{ "pool", required_argument, NULL, 'p' },
		{ "member", required_argument, NULL, 'm' },
		{ "provider", required_argument, NULL, 'R' },
		{ "transport", required_argument, NULL, 'T' },
		{ "socket", required_argument, NULL, 's' },
		{ "tcp", required_argument, NULL, 't' },
		{ "export-name", required_argument, NULL, 'e' },
		{ "control", required_argument, NULL, 'c' },
		{ "ready-file", required_argument, NULL, 'r' },
		{ "pid-file", required_argument, NULL, 'P' },
		{ "queue-depth", required_argument, NULL, 'q' },
		{ "min-legs", required_argument, NULL, 'L' },
		{ "takeover", no_argument, NULL, 'K' },
		{ "open-without", required_argument, NULL, 'W' },
		{ "close-record", required_argument, NULL, 'D' },
		{ "key-file", required_argument, NULL, 'k' },
		{ "config", required_argument, NULL, 'C' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *socket_arg = NULL, *control_arg = NULL, *config_arg = NULL;
	const char *record_arg = NULL;
	char host[256], port[16];
	int c;

	memset(cfg, 0, sizeof(*cfg));
	cfg->queue_depth = NBDB_QUEUE_DEPTH_DEFAULT;
	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, ":p:m:s:t:e:c:r:P:q:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			cfg->pool = optarg;
			break;
		case 'm':
			if (cfg->nmembers == RMR_MAX_MEMBERS)
				usage_error("too many --member (max %d)", RMR_MAX_MEMBERS);
			if (!*optarg || strlen(optarg) > RMR_ADDR_MAX)
				usage_error("--member: bad address '%s'", optarg);
			cfg->members[cfg->nmembers++] = optarg;
			break;
		case 'R':
			if (strcmp(optarg, "tcp") && strcmp(optarg, "shm") && strcmp(optarg, "verbs"))
				usage_error("--provider: '%s' is not tcp, shm or verbs", optarg);
			cfg->provider = optarg;
			break;
		case 'T':
			if (strcmp(optarg, "fabric") && strcmp(optarg, "mem"))
				usage_error("--transport: '%s' is not fabric or mem", optarg);
			cfg->transport = optarg;
			break;
		case 's':
			socket_arg = optarg;
			break;
		case 't':
			if (nbdb_parse_hostport(optarg, host, sizeof(host), port, sizeof(port)) < 0)
				usage_error("--tcp: '%s' is not HOST:PORT", optarg);
			cfg->tcp = optarg;
			break;
		case 'e':
			if (strlen(optarg) > NBD_MAX_STRING)
				usage_error("--export-name: longer than %d bytes", NBD_MAX_STRING);
			cfg->export_name = optarg;
			break;
		case 'c':
			control_arg = optarg;
			break;
		case 'r':
			cfg->ready_file = optarg;
			break;
		case 'P':
			cfg->pid_file = optarg;
			break;
		case 'q':
			cfg->queue_depth = parse_uint("--queue-depth", optarg, 1, NBDB_QUEUE_DEPTH_MAX);
			break;
		case 'L':
			cfg->min_legs = parse_uint("--min-legs", optarg, 1, RMR_MAX_MEMBERS);
			break;
		case 'K':
			cfg->takeover = true;
			break;
		case 'W':
			cfg->open_without |= parse_ids("--open-without", optarg);
			break;
		case 'D':
			record_arg = optarg;
			break;
		case 'k':
			cfg->key_file = optarg;
			break;
		case 'C':
			config_arg = optarg;
			break;
		case 'S':
			cfg->syslog = true;
			break;
		case 'v':
			cfg->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			if (strncmp(argv[optind - 1], "--", 2) == 0)
				usage_error("option '%s' needs an argument", argv[optind - 1]);
			usage_error("option '-%c' needs an argument", optopt);
		default:
			/* optopt names a bad short option ("-vx" -> x); for a
			 * long one it is 0 and argv[optind - 1] holds it. */
			if (optopt)
				usage_error("unknown option '-%c'", optopt);
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (config_arg || (cfg->pool && !cfg->nmembers))
		apply_pool_file(cfg, config_arg, &socket_arg, &control_arg);
	if (!cfg->pool)
		usage_error("--pool or --config is required");
	if (!valid_pool_name(cfg->pool))
		usage_error("--pool: '%s' is not 1..%d characters of [A-Za-z0-9._-]", cfg->pool,
			    RMR_NAME_MAX);
	if (cfg->nmembers == 0)
		usage_error("at least one --member is required");
	if (cfg->min_legs > cfg->nmembers)
		usage_error("--min-legs %u is more than the %u members", cfg->min_legs,
			    cfg->nmembers);
	if (socket_arg && cfg->tcp)
		usage_error("--socket and --tcp exclude each other");
	if (!cfg->export_name)
		cfg->export_name = cfg->pool;
	/* A key file open to others, malformed or named and missing: no start. */
	if (cfg->key_file || cfg->file) {
		char err[1280];
		int ret;

		if (cfg->key_file)
			ret = rmr_key_load(cfg->key_file, cfg->key, err, sizeof(err));
		else
			ret = brmr_config_key(cfg->file, cfg->key, &cfg->keyed, err, sizeof(err));
		if (ret < 0) {
			fprintf(stderr, "nbd-brmr: %s\n", err);
			exit(EXIT_USAGE);
		}
		if (cfg->key_file)
			cfg->keyed = true;
	}

	if (!cfg->tcp) {
		char *def = NULL;

		if (!socket_arg) {
			if (asprintf(&def, "/tmp/nbd-brmr-%s.sock", cfg->pool) < 0)
				exit(1);
			socket_arg = def;
		}
		cfg->socket_path = absolute_path(socket_arg);
		free(def);
		if (!cfg->socket_path) {
			fprintf(stderr, "nbd-brmr: cannot resolve the socket path\n");
			exit(1);
		}
	}
	if (control_arg) {
		cfg->control_path = absolute_path(control_arg);
		if (!cfg->control_path) {
			fprintf(stderr, "nbd-brmr: cannot resolve the control path\n");
			exit(1);
		}
	}
	if (record_arg ? *record_arg : cfg->control_path != NULL) {
		size_t n;

		if (record_arg) {
			cfg->record_path = absolute_path(record_arg);
		} else if ((n = strlen(cfg->control_path)) > 4 &&
			   !strcmp(cfg->control_path + n - 4, ".ctl")) {
			if (asprintf(&cfg->record_path, "%.*s.closed", (int)(n - 4), cfg->control_path) < 0)
				cfg->record_path = NULL;
		} else if (asprintf(&cfg->record_path, "%s.closed", cfg->control_path) < 0) {
			cfg->record_path = NULL;
		}
		if (!cfg->record_path) {
			fprintf(stderr, "nbd-brmr: cannot resolve the close record path\n");
			exit(1);
		}
	}
}

/* Write @p line and a newline to @p path, all or nothing (pid and ready files). */
static int write_file_atomic(const char *path, const char *line)
{
	char *text;
	int rc;

	if (asprintf(&text, "%s\n", line) < 0)
		return -ENOMEM;
	rc = nbdb_write_file_atomic(path, text, 0666, false);
	free(text);
	return rc;
}

struct runtime {
	struct config cfg;
	struct brmr_dev *dev;
	struct nbdb_export ex;
	struct nbdb_server srv;
	char description[RMR_NAME_MAX + 64];
	char uri[PATH_MAX + 64];
	int listen_fd;
	int control_fd;
	struct nbdb_control ctl;
	int sig_fd;
	bool pid_written, ready_written;
};

static void remove_files(struct runtime *rt)
{
	if (rt->listen_fd >= 0) {
		close(rt->listen_fd);
		rt->listen_fd = -1;
		if (rt->cfg.socket_path)
			unlink(rt->cfg.socket_path);
	}
	if (rt->control_fd >= 0) {
		close(rt->control_fd);
		rt->control_fd = -1;
		rt->ctl.lfd = -1;
		unlink(rt->cfg.control_path);
	}
	if (rt->ready_written)
		unlink(rt->cfg.ready_file);
	if (rt->pid_written)
		unlink(rt->cfg.pid_file);
	rt->ready_written = rt->pid_written = false;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* A signal is pending on the signalfd: consume it, return its number. */
static int read_signal(int sig_fd)
{
	struct signalfd_siginfo si;

	if (read(sig_fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

static void shutdown_server(struct runtime *rt)
{
	struct timespec t0;
	bool force = false;
	unsigned left;

	/* 1. No new connections; the socket file goes right away so that
	 *    scripts waiting for it to vanish are not misled. */
	close(rt->listen_fd);
	rt->listen_fd = -1;
	if (rt->cfg.socket_path)
		unlink(rt->cfg.socket_path);

	/* 2. New requests are answered ESHUTDOWN from now on. */
	atomic_store(&rt->srv.stopping, true);

	/* 3. Wait for requests in flight; the control socket still answers. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (nbdb_server_busy(&rt->srv) > 0) {
		struct pollfd pfd[1 + NBDB_CONTROL_POLLFDS] = {
			{ .fd = rt->sig_fd, .events = POLLIN },
		};
		unsigned n = 1 + nbdb_control_pollfds(&rt->ctl, pfd + 1);

		if (elapsed_ms(&t0) > DRAIN_TIMEOUT_MS) {
			nbdb_log(NBDB_WARN, "requests still in flight after %d ms, closing anyway",
				 DRAIN_TIMEOUT_MS);
			force = true;
			break;
		}
		if (poll(pfd, n, 10) > 0) {
			if ((pfd[0].revents & POLLIN) && read_signal(rt->sig_fd)) {
				nbdb_log(NBDB_NOTICE, "second signal: closing connections now");
				force = true;
				break;
			}
			nbdb_control_handle(&rt->ctl, pfd + 1, n - 1);
		}
	}

	/* 4. Close every connection. After the drain, end-of-stream on the
	 *    read side is enough: each reader stops, answers what remains and
	 *    closes. Forced, writers stuck on a client that does not read are
	 *    cut off as well. Requests still inside librmr complete anyway
	 *    (it guarantees every callback); connections wait for them. */
	nbdb_server_shutdown_conns(&rt->srv, force ? SHUT_RDWR : SHUT_RD);
	while ((left = nbdb_server_wait_idle(&rt->srv, 5000)) > 0) {
		nbdb_log(NBDB_NOTICE, "waiting for %u connection(s) to finish", left);
		nbdb_server_shutdown_conns(&rt->srv, SHUT_RDWR);
	}
}

static int run(struct runtime *rt)
{
	struct config *cfg = &rt->cfg;
	bool tcp = cfg->tcp != NULL;
	int sig;

	for (;;) {
		struct pollfd pfd[2 + NBDB_CONTROL_POLLFDS] = {
			{ .fd = rt->sig_fd, .events = POLLIN },
			{ .fd = rt->listen_fd, .events = POLLIN },
		};
		unsigned n = 2 + nbdb_control_pollfds(&rt->ctl, pfd + 2);

		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			nbdb_log(NBDB_ERR, "poll: %s", strerror(errno));
			return 1;
		}
		if ((pfd[0].revents & POLLIN) && (sig = read_signal(rt->sig_fd)) != 0) {
			nbdb_log(NBDB_NOTICE, "%s: shutting down", strsignal(sig));
			return 0;
		}
		if (pfd[1].revents & POLLIN) {
			char peer[96];
			int fd = nbdb_accept(rt->listen_fd, tcp, peer, sizeof(peer));

			if (fd >= 0) {
				nbdb_conn_start(&rt->srv, fd, peer);
			} else if (fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM ||
				   fd == -ENOBUFS) {
				/* Out of descriptors: back off rather than spin on a
				 * listener that stays readable. */
				nbdb_log(NBDB_WARN, "accept: %s", strerror(-fd));
				poll(NULL, 0, 100);
			}
		}
		nbdb_control_handle(&rt->ctl, pfd + 2, n - 2);
	}
}

/* Member ids as "1, 3". */
static void ids_text(uint64_t ids, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && n < len; id++)
		if (ids & (1ull << id))
			n += (size_t)snprintf(buf + n, len - n, "%s%u", n ? ", " : "", id);
}

/*
 * The record of the last clean close, for the open (@p rec, @return
 * whether there is one). Used once: a stale one opens nothing anyway
 * (librmr checks the epoch), and no file stays to puzzle an operator.
 */
static bool close_record_take(const struct config *cfg, struct rmr_close_record *rec)
{
	char ids[192];
	int rc;

	if (!cfg->record_path)
		return false;
	rc = nbdb_close_record_load(cfg->record_path, rec);
	if (rc == -ENOENT)
		return false;
	if (rc < 0) {
		nbdb_log(NBDB_WARN, "ignoring %s: %s", cfg->record_path,
			 rc == -EINVAL ? "not a close record" : strerror(-rc));
		return false;
	}
	ids_text(rec->current_ids, ids, sizeof(ids));
	nbdb_log(NBDB_NOTICE, "last clean close (%s): writer epoch %llu, members %s current",
		 cfg->record_path, (unsigned long long)rec->writer_epoch, ids);
	return true;
}

/* Close the pool; keep what a clean close proves for the next start. */
static void close_pool(struct runtime *rt)
{
	const struct config *cfg = &rt->cfg;
	struct rmr_close_record rec;
	char ids[192];
	int rc;

	brmr_close_and_record(rt->dev, &rec);
	if (!cfg->record_path || !rec.writer_epoch)
		return;
	rc = nbdb_close_record_save(cfg->record_path, cfg->pool, &rec);
	ids_text(rec.current_ids, ids, sizeof(ids));
	if (rc < 0)
		nbdb_log(NBDB_WARN, "cannot write %s: %s (the next start waits for every member)",
			 cfg->record_path, strerror(-rc));
	else
		nbdb_log(NBDB_NOTICE, "recorded the clean close in %s: members %s current",
			 cfg->record_path, ids);
}

int main(int argc, char **argv)
{
	static struct runtime rtv = { .listen_fd = -1, .control_fd = -1, .sig_fd = -1 };
	struct runtime *rt = &rtv;
	struct config *cfg = &rt->cfg;
	struct rmr_client_opts o;
	struct rmr_close_record last_close;
	bool had_record;
	char why[512], pid[32];
	sigset_t sigs;
	int rc, status = 1;

	parse_args(argc, argv, cfg);
	nbdb_log_init(cfg->pool, cfg->verbose, cfg->syslog);

	/* Signals: SIGPIPE ignored (sends use MSG_NOSIGNAL as well);
	 * SIGTERM/SIGINT blocked in every thread, librmr's included (they
	 * inherit this mask), and read from a signalfd by the main loop. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	rt->sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (rt->sig_fd < 0) {
		nbdb_log(NBDB_ERR, "signalfd: %s", strerror(errno));
		return 1;
	}

	if (cfg->pid_file) {
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		rc = write_file_atomic(cfg->pid_file, pid);
		if (rc < 0) {
			nbdb_log(NBDB_ERR, "cannot write pid file %s: %s", cfg->pid_file,
				 strerror(-rc));
			goto out;
		}
		rt->pid_written = true;
	}

	rc = nbdb_control_init(&rt->ctl, cfg->pool);
	if (rc < 0) {
		nbdb_log(NBDB_ERR, "event stream: %s", strerror(-rc));
		goto out;
	}
	rmr_log_set_sink(nbdb_log_rmr_sink, NULL, cfg->verbose ? RMR_LOG_DEBUG : RMR_LOG_INFO);
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.pool_name = cfg->pool;
	o.transport = cfg->transport;
	o.provider = cfg->provider;
	o.nmembers = cfg->nmembers;
	o.members = cfg->members;
	o.min_legs = cfg->min_legs;
	o.takeover = cfg->takeover;
	o.open_without = cfg->open_without;
	o.key = cfg->keyed ? cfg->key : NULL;
	if (cfg->file) {
		/* The members must be of this pool, not just of this name. */
		o.pool_uuid = &cfg->file->uuid;
		o.queue_depth = cfg->file->queue_depth;
		o.heartbeat_ms = cfg->file->heartbeat_ms;
		o.failure_timeout_ms = cfg->file->failure_timeout_ms;
		o.request_timeout_ms = cfg->file->request_timeout_ms;
		o.poll_us = cfg->file->poll_us ? cfg->file->poll_us : RMR_POLL_OFF;
	}
	o.ops = &nbdb_client_ops;
	o.priv = &rt->ctl;
	had_record = close_record_take(cfg, &last_close);
	if (had_record)
		o.last_close = &last_close;
	rc = brmr_open(&o, &rt->dev);
	if (rc == 0 && had_record && unlink(cfg->record_path) < 0 && errno != ENOENT)
		nbdb_log(NBDB_WARN, "cannot remove %s: %s", cfg->record_path, strerror(errno));
	if (rc < 0) {
		nbdb_log(NBDB_ERR, "cannot open the pool: %s", rc == -EBUSY ?
			 "another writer holds it (stop it, or take over with --takeover)" :
			 rc == -ESTALE ? "a newer writer fenced this one" :
			 rc == -EHOSTUNREACH ?
			 "members that did not answer may hold writes the others lack (the log names them): start them, or give them up with --open-without" :
			 strerror(-rc));
		goto out;
	}

	snprintf(rt->description, sizeof(rt->description), "brmr pool %s", cfg->pool);
	rt->ex = (struct nbdb_export){
		.dev = rt->dev,
		.size = brmr_size(rt->dev),
		.name = cfg->export_name,
		.description = rt->description,
		.tflags = EXPORT_TFLAGS,
		.queue_depth = cfg->queue_depth,
	};
	if (nbdb_server_init(&rt->srv, &rt->ex) < 0) {
		close_pool(rt);
		goto out;
	}

	if (cfg->tcp) {
		rt->listen_fd = nbdb_listen_tcp(cfg->tcp, rt->uri, sizeof(rt->uri), why,
						sizeof(why));
	} else {
		rt->listen_fd = nbdb_listen_unix(cfg->socket_path, why, sizeof(why));
		nbdb_unix_uri(cfg->socket_path, rt->uri, sizeof(rt->uri));
	}
	if (rt->listen_fd < 0) {
		nbdb_log(NBDB_ERR, "%s", why);
		goto out_close;
	}
	if (cfg->control_path) {
		rt->control_fd = nbdb_listen_unix(cfg->control_path, why, sizeof(why));
		if (rt->control_fd < 0) {
			nbdb_log(NBDB_ERR, "control socket: %s", why);
			goto out_close;
		}
		nbdb_control_start(&rt->ctl, rt->control_fd, rt->dev, cfg->control_path);
	}
	if (cfg->ready_file) {
		rc = write_file_atomic(cfg->ready_file, rt->uri);
		if (rc < 0) {
			nbdb_log(NBDB_ERR, "cannot write ready file %s: %s", cfg->ready_file,
				 strerror(-rc));
			goto out_close;
		}
		rt->ready_written = true;
	}
	nbdb_log(NBDB_NOTICE, "serving export '%s' (%llu bytes, %u members) on %s",
		 cfg->export_name, (unsigned long long)rt->ex.size, cfg->nmembers, rt->uri);

	status = run(rt);
	shutdown_server(rt);

out_close:
	/* On the failure paths above no connection was accepted yet. */
	remove_files(rt);
	nbdb_server_destroy(&rt->srv);
	close_pool(rt);
	if (status == 0)
		nbdb_log(NBDB_NOTICE, "stopped");
out:
	remove_files(rt);
	/* After brmr_close(): no event callback runs any more. */
	nbdb_control_destroy(&rt->ctl);
	close(rt->sig_fd);
	free(cfg->socket_path);
	free(cfg->control_path);
	free(cfg->record_path);
	free(cfg->file);
	return status;
}
