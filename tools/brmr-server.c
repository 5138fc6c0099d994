/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmr-server: the storage-node daemon. Serves one or more formatted stores
 * (files or block devices), each as a member of its pool, on one address.
 *
 *   brmr-server --listen ADDR --store PATH [--store PATH ...] [options]
 *
 * Control socket protocol (--control PATH, mode 0600): the client writes
 * one line and the server answers and closes:
 *   "status text", "status json"  the rendered status
 *   "fault on", "fault off"       switch fault injection (every data request
 *                                 and resync copy fails with -EIO) on every
 *                                 served store; answers "ok"
 * Anything else gets "error: unknown command".
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on runtime errors, 2 on usage errors.
 */
#include <rmr/brmr.h>
#include <rmr/server.h>

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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_STORES RMR_MAX_MEMBERS
/* A control client gets this long to send its line and take the answer. */
#define CONTROL_TIMEOUT_S 2
/* Resync pieces in flight per pool. */
#define SYNC_QD_DEFAULT 32
#define SYNC_QD_MAX 256

struct server_cfg {
	const char *listen;
	const char *stores[MAX_STORES];
	unsigned nstores;
	const char *provider;
	const char *transport;
	const char *control;
	const char *ready_file;
	const char *pid_file;
	unsigned queue_depth;
	unsigned sync_queue_depth;
	uint64_t resync_rate;  /* bytes per second, 0 = unlimited */
	bool verbose;
};

static const char *g_addr = "?";

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per line: stdio locks the stream, lines never interleave. */
	fprintf(stderr, "brmr-server %s: %s\n", g_addr, line);
}

static void log_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	say("%s", msg);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: brmr-server --listen ADDR --store PATH [--store PATH ...] [options]\n"
		"\n"
		"Serve formatted brmr stores (see brmrctl create) as members of their pools.\n"
		"\n"
		"  --listen ADDR        address to listen on (e.g. 127.0.0.1:7000)\n"
		"  --store PATH         a store to serve; repeat for more (at most %u)\n"
		"  --provider NAME      fabric provider: tcp (default), shm, verbs\n"
		"  --transport NAME     fabric (default) or mem (in-process, for tests)\n"
		"  --control PATH       unix control socket (mode 0600): 'status text|json',\n"
		"                       'fault on|off' (fail every store's data I/O with EIO)\n"
		"  --ready-file PATH    write \"ready\" to PATH once serving\n"
		"  --pid-file PATH      write the process id to PATH\n"
		"  --queue-depth N      most requests per session (1..1024, default 128)\n"
		"  --sync-queue-depth N resync pieces in flight per pool (1..%u, default %u)\n"
		"  --resync-rate RATE   resync bytes per second per pool; suffix K, M or G\n"
		"                       for KiB, MiB, GiB (default 0: unlimited)\n"
		"  --verbose            log debug messages\n"
		"  --help               show this help\n",
		MAX_STORES, SYNC_QD_MAX, SYNC_QD_DEFAULT);
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

/* @return -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct server_cfg *cfg)
{
	enum { O_LISTEN = 256, O_STORE, O_PROVIDER, O_TRANSPORT, O_CONTROL, O_READY,
	       O_PID, O_QD, O_SYNC_QD, O_RESYNC_RATE, O_VERBOSE, O_HELP };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "store", required_argument, NULL, O_STORE },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "ready-file", required_argument, NULL, O_READY },
		{ "pid-file", required_argument, NULL, O_PID },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "sync-queue-depth", required_argument, NULL, O_SYNC_QD },
		{ "resync-rate", required_argument, NULL, O_RESYNC_RATE },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		unsigned long v;

		switch (c) {
		case O_LISTEN:
			cfg->listen = optarg;
			break;
		case O_STORE:
			if (cfg->nstores == MAX_STORES)
				return usage_error("at most %u --store", MAX_STORES);
			cfg->stores[cfg->nstores++] = optarg;
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
	if (!cfg->listen || !*cfg->listen)
		return usage_error("--listen is required");
	if (strlen(cfg->listen) > RMR_ADDR_MAX)
		return usage_error("--listen address longer than %u bytes", RMR_ADDR_MAX);
	if (!cfg->nstores)
		return usage_error("at least one --store is required");
	if (cfg->control && strlen(cfg->control) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return usage_error("--control path too long");
	return -1;
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

/* Bind the control socket, replacing a stale one but never a live one. */
static int control_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, ret;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			say("control socket %s: exists and is not a socket", path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (ret == 0) {
			say("control socket %s: in use by another process", path);
			return -EADDRINUSE;
		}
		unlink(path); /* stale: its server died */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Created 0600 from the start: status is for the operator only. */
	old = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret == 0)
		ret = listen(fd, 16);
	if (ret < 0) {
		ret = -errno;
		say("control socket %s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client went away: nothing to do */
		buf += n;
		len -= (size_t)n;
	}
}

/* Render the status; returns a malloc'd string or NULL. */
static char *render_status(struct rmr_server *srv, enum rmr_format fmt)
{
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	size_t cap = 16384;
	char *buf = NULL;
	int n = -ENOSPC;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	if (rmr_server_status(srv, st) < 0)
		goto out;
	while (n == -ENOSPC && cap <= (16u << 20)) {
		char *nb = realloc(buf, cap);

		if (!nb)
			break;
		buf = nb;
		n = rmr_server_status_format(st, fmt, buf, cap);
		cap *= 2;
	}
out:
	free(st);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void control_serve_one(int lfd, struct rmr_server *srv, struct brmr_store **stores,
			      unsigned nstores)
{
	struct timeval tv = { .tv_sec = CONTROL_TIMEOUT_S };
	char line[128];
	size_t len = 0;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (len < sizeof(line) - 1) {
		ssize_t n = read(fd, line + len, sizeof(line) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(line, '\n', len))
			break;
	}
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';

	if (!strcmp(line, "status text") || !strcmp(line, "status") ||
	    !strcmp(line, "status json")) {
		enum rmr_format fmt = strcmp(line, "status json") ? RMR_FORMAT_TEXT : RMR_FORMAT_JSON;
		char *out = render_status(srv, fmt);

		if (out) {
			write_all(fd, out, strlen(out));
			if (!*out || out[strlen(out) - 1] != '\n')
				write_all(fd, "\n", 1);
		} else {
			static const char err[] = "error: status unavailable\n";

			write_all(fd, err, sizeof(err) - 1);
		}
		free(out);
	} else if (!strcmp(line, "fault on") || !strcmp(line, "fault off")) {
		bool on = !strcmp(line, "fault on");

		for (unsigned i = 0; i < nstores; i++)
			brmr_store_inject_fault(stores[i], on);
		say("fault injection switched %s for %u store(s) (control socket)",
		    on ? "on" : "off", nstores);
		write_all(fd, "ok\n", 3);
	} else {
		static const char err[] = "error: unknown command\n";

		write_all(fd, err, sizeof(err) - 1);
	}
	close(fd);
}

/* --- recovery events (librmr's event loop): one log line each ---------------- */

static void ev_dirty(void *priv, const char *pool, uint16_t member_id, bool dirty)
{
	(void)priv;
	say("event pool=%s: member %u %s", pool, member_id,
	    dirty ? "missed writes: its chunks are tracked dirty" : "holds every chunk again");
}

static void ev_resync(void *priv, const char *pool, uint64_t done, uint64_t total, uint64_t bytes)
{
	(void)priv;
	say("event pool=%s: resync %llu/%llu chunks, %llu MiB copied from peers%s", pool,
	    (unsigned long long)done, (unsigned long long)total,
	    (unsigned long long)(bytes >> 20), done == total ? ": complete" : "");
}

static void ev_map_update(void *priv, const char *pool, uint16_t source, int status)
{
	(void)priv;
	say("event pool=%s: dirty maps from member %u: %s", pool, source,
	    status ? strerror(-status) : "taken");
}

static const struct rmr_server_events server_events = {
	.size = sizeof(server_events),
	.dirty_tracking = ev_dirty,
	.resync_progress = ev_resync,
	.map_update = ev_map_update,
};

int main(int argc, char **argv)
{
	struct server_cfg cfg = { .sync_queue_depth = SYNC_QD_DEFAULT };
	struct brmr_store *stores[MAX_STORES] = { 0 };
	struct rmr_server_pool *pools[MAX_STORES] = { 0 };
	struct rmr_server *srv = NULL;
	struct rmr_server_opts opts = { .size = sizeof(opts) };
	bool pid_written = false, ready_written = false;
	int ctl = -1, sfd = -1, rc = 1, ret;
	sigset_t mask;

	ret = parse_args(argc, argv, &cfg);
	if (ret >= 0)
		return ret;
	g_addr = cfg.listen;
	rmr_log_set_sink(log_sink, NULL, cfg.verbose ? RMR_LOG_DEBUG : RMR_LOG_INFO);

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
		say("signalfd: %s", strerror(errno));
		return 1;
	}

	/* Every store must be good before anything is served. */
	for (unsigned i = 0; i < cfg.nstores; i++) {
		char why[256] = "";

		ret = brmr_store_open(cfg.stores[i], &stores[i], why, sizeof(why));
		if (ret < 0) {
			say("store %s: %s", cfg.stores[i], why[0] ? why : strerror(-ret));
			goto out;
		}
	}

	/* Before serving: a live daemon on this socket means a second start. */
	if (cfg.control) {
		ctl = control_listen(cfg.control);
		if (ctl < 0)
			goto out;
	}

	opts.listen_addr = cfg.listen;
	opts.transport = cfg.transport;
	opts.provider = cfg.provider;
	opts.queue_depth = cfg.queue_depth;
	opts.events = &server_events;
	ret = rmr_server_create(&opts, &srv);
	if (ret < 0) {
		say("cannot listen: %s", strerror(-ret));
		goto out;
	}
	for (unsigned i = 0; i < cfg.nstores; i++) {
		struct brmr_store_info info = { .size = sizeof(info) };
		struct brmr_serve_opts serve = {
			.size = sizeof(serve),
			.sync_queue_depth = cfg.sync_queue_depth,
			.resync_rate = cfg.resync_rate,
		};
		char uuid[37];

		brmr_store_info(stores[i], &info);
		rmr_uuid_format(&info.pool_uuid, uuid);
		ret = brmr_store_serve(stores[i], srv, &serve, &pools[i]);
		if (ret < 0) {
			say("store %s: cannot serve pool %s: %s", cfg.stores[i], info.pool_name,
			    ret == -EBUSY ? "store is in use by another server (or listed twice)"
					  : strerror(-ret));
			goto out;
		}
		say("serving pool=%s uuid=%s member=%u size=%llu chunk=%u from %s",
		    info.pool_name, uuid, info.member_id, (unsigned long long)info.pool_size,
		    info.chunk_size, cfg.stores[i]);
	}
	if (cfg.pid_file) {
		char pid[32];

		snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		ret = write_file_atomic(cfg.pid_file, pid);
		if (ret < 0) {
			say("pid file %s: %s", cfg.pid_file, strerror(-ret));
			goto out;
		}
		pid_written = true;
	}
	if (cfg.ready_file) {
		ret = write_file_atomic(cfg.ready_file, "ready\n");
		if (ret < 0) {
			say("ready file %s: %s", cfg.ready_file, strerror(-ret));
			goto out;
		}
		ready_written = true;
	}
	say("ready: %u pool(s)", cfg.nstores);

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = ctl, .events = POLLIN },
		};

		if (poll(pfd, ctl >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			goto out;
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				say("signal %u: shutting down", si.ssi_signo);
			rc = 0;
			break;
		}
		if (ctl >= 0 && (pfd[1].revents & POLLIN))
			control_serve_one(ctl, srv, stores, cfg.nstores);
	}

out:
	for (unsigned i = 0; i < cfg.nstores; i++)
		if (pools[i])
			rmr_server_remove_pool(pools[i]);
	if (srv)
		rmr_server_destroy(srv);
	for (unsigned i = 0; i < cfg.nstores; i++)
		brmr_store_close(stores[i]);
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
	return rc;
}
