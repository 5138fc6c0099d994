/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kvstore-front: the RESP server of a kvstore pool. Clients (redis-cli,
 * redis-benchmark, any Redis client) connect to it; it is the pool's one
 * rmr client and its only writer.
 *
 * main.c: command line, the pool, the listener, the epoll loop and the
 * orderly stop: SIGTERM/SIGINT -> stop accepting, close the connections,
 * let the requests in flight finish, close the pool, exit 0.
 *
 * The front's epoll descriptor is served on librmr's event-loop thread
 * (rmr_client_watch_fd): a request read there goes out to the members in
 * the same loop turn and its completion comes back on that thread, with no
 * thread wake-up either way. The main thread only waits for a stop signal.
 *
 * Exit status: 0 after a clean stop, 1 on a runtime failure, 2 on a usage
 * error.
 */
#include "front.h"
#include "kv_log.h"
#include "kv_util.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define PROG "kvstore-front"
/* How long a stop waits for requests in flight. */
#define DRAIN_TIMEOUT_MS 10000

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --pool NAME --member ADDR [--member ADDR ...] [options]\n"
		"\n"
		"Serve a kvstore pool (examples/kvstore) to Redis clients over RESP2.\n"
		"\n"
		"  --pool NAME          pool name (required; the members' stores name it)\n"
		"  --member ADDR        where a member listens (HOST:PORT); repeat per member\n"
		"  --key-file PATH      the pool key (kvstore-member create-key), proven to every\n"
		"                       member; without it only members without a key answer\n"
		"  --listen HOST:PORT   where clients connect (default " FRONT_DEFAULT_LISTEN ");\n"
		"                       PORT alone means 127.0.0.1:PORT\n"
		"  --max-frame SIZE     largest command frame; a larger one closes its connection\n"
		"                       (default 1M; K, M suffixes)\n"
		"  --max-clients N      connections at once (default %u)\n"
		"  --queue-depth N      pool requests in flight (1..1024, default 128)\n"
		"  --max-io SIZE        largest pool request (default 128K; at least the bucket size)\n"
		"  --min-legs N         members that must apply a write (default 1)\n"
		"  --takeover           take the pool over from the front that holds it (failover)\n"
		"  --provider NAME      fabric provider: tcp (default), shm, verbs\n"
		"  --transport NAME     fabric (default) or mem\n"
		"  --ready-file PATH    once serving, write HOST:PORT to PATH\n"
		"  --pid-file PATH      write the process id to PATH\n"
		"  --verbose            debug logs\n"
		"\n"
		"Commands: PING ECHO GET SET (NX XX EX PX EXAT PXAT KEEPTTL) DEL EXISTS INCR\n"
		"INCRBY DECR DECRBY MGET MSET DBSIZE FLUSHALL INFO COMMAND QUIT SELECT 0, and\n"
		"KVDIGEST <member-id>: the digest of that member's data (docs/kvstore.md).\n",
		FRONT_DEFAULT_MAX_CLIENTS);
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

static uint64_t opt_size(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (kv_parse_size(arg, &v) < 0 || v < min || v > max)
		usage_error("%s: '%s' is not a size in %" PRIu64 "..%" PRIu64 " (K, M suffixes)", opt,
			    arg, min, max);
	return v;
}

static void parse_args(int argc, char **argv, struct front_cfg *cfg)
{
	enum { O_POOL = 256, O_MEMBER, O_LISTEN, O_MAX_FRAME, O_MAX_CLIENTS, O_QD, O_MAX_IO,
	       O_MIN_LEGS, O_TAKEOVER, O_PROVIDER, O_TRANSPORT, O_READY, O_PID, O_VERBOSE, O_KEY };
	static const struct option opts[] = {
		{ "pool", required_argument, NULL, O_POOL },
		{ "member", required_argument, NULL, O_MEMBER },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "max-frame", required_argument, NULL, O_MAX_FRAME },
		{ "max-clients", required_argument, NULL, O_MAX_CLIENTS },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "max-io", required_argument, NULL, O_MAX_IO },
		{ "min-legs", required_argument, NULL, O_MIN_LEGS },
		{ "takeover", no_argument, NULL, O_TAKEOVER },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "ready-file", required_argument, NULL, O_READY },
		{ "pid-file", required_argument, NULL, O_PID },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "key-file", required_argument, NULL, O_KEY },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*cfg = (struct front_cfg){
		.listen = FRONT_DEFAULT_LISTEN,
		.max_frame = FRONT_DEFAULT_MAX_FRAME,
		.max_clients = FRONT_DEFAULT_MAX_CLIENTS,
		.max_io = 128u * 1024,
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_POOL:
			cfg->pool = optarg;
			break;
		case O_MEMBER:
			if (cfg->nmembers == RMR_MAX_MEMBERS)
				usage_error("too many --member (at most %d)", RMR_MAX_MEMBERS);
			if (!*optarg || strlen(optarg) > RMR_ADDR_MAX)
				usage_error("--member: bad address '%s'", optarg);
			cfg->members[cfg->nmembers++] = optarg;
			break;
		case O_LISTEN:
			cfg->listen = optarg;
			break;
		case O_MAX_FRAME:
			cfg->max_frame = opt_size("--max-frame", optarg, 1024, 512u << 20);
			break;
		case O_MAX_CLIENTS:
			cfg->max_clients = (unsigned)opt_u64("--max-clients", optarg, 1, 100000);
			break;
		case O_QD:
			cfg->queue_depth = (unsigned)opt_u64("--queue-depth", optarg, 1, 1024);
			break;
		case O_MAX_IO:
			cfg->max_io = (unsigned)opt_size("--max-io", optarg, 4096, 4u << 20);
			break;
		case O_MIN_LEGS:
			cfg->min_legs = (unsigned)opt_u64("--min-legs", optarg, 1, RMR_MAX_MEMBERS);
			break;
		case O_TAKEOVER:
			cfg->takeover = true;
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
			usage_error("bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!cfg->pool)
		usage_error("--pool is required");
	if (!cfg->nmembers)
		usage_error("at least one --member is required");
	if (cfg->min_legs > cfg->nmembers)
		usage_error("--min-legs %u is more than the %u members", cfg->min_legs, cfg->nmembers);
}

/* Listen on "HOST:PORT", ":PORT" or "PORT" (host 127.0.0.1). @return fd or -errno. */
static int listen_tcp(const char *arg, char *bound, size_t boundlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256] = "127.0.0.1", port[16];
	const char *colon = strrchr(arg, ':');
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	int fd = -1, one = 1, ret;

	if (colon) {
		size_t hl = (size_t)(colon - arg);

		if (hl >= sizeof(host) || strlen(colon + 1) >= sizeof(port))
			return -EINVAL;
		if (hl) {
			/* [v6]:port */
			if (arg[0] == '[' && hl >= 2 && arg[hl - 1] == ']')
				snprintf(host, sizeof(host), "%.*s", (int)hl - 2, arg + 1);
			else
				snprintf(host, sizeof(host), "%.*s", (int)hl, arg);
		}
		snprintf(port, sizeof(port), "%s", colon + 1);
	} else if (strlen(arg) < sizeof(port)) {
		snprintf(port, sizeof(port), "%s", arg);
	} else {
		return -EINVAL;
	}
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		kv_log(KV_LOG_ERR, "--listen %s: %s", arg, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 511) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) < 0) {
		ret = -errno;
		kv_log(KV_LOG_ERR, "--listen %s: %s", arg, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return ret;
	}
	{
		char h[INET6_ADDRSTRLEN], p[8];

		getnameinfo((struct sockaddr *)&sa, salen, h, sizeof(h), p, sizeof(p),
			    NI_NUMERICHOST | NI_NUMERICSERV);
		snprintf(bound, boundlen, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, p);
	}
	freeaddrinfo(res);
	return fd;
}

static int epoll_add(struct front *f, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void front_clock(struct front *f)
{
	f->now_ms = kv_now_ms();
}

/*
 * Requests librmr finished: a kick of the eventfd from the completion (no
 * system call, no epoll), or the eventfd itself when one finished off the
 * loop thread. On librmr's event-loop thread.
 */
static void front_done_turn(void *arg)
{
	struct front *f = arg;

	front_pool_completions(f);
	front_batch_flush(f);
	conn_flush_all(f);
}

/* The sockets that are ready, on librmr's event-loop thread; never blocks. */
static void front_turn(void *arg)
{
	struct front *f = arg;
	struct epoll_event evs[128];
	int n;

	front_pool_completions(f); /* reads the clock */
	n = epoll_wait(f->epfd, evs, 128, 0);
	if (n < 0 && errno != EINTR)
		kv_log(KV_LOG_ERR, "epoll_wait: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		void *tag = evs[i].data.ptr;

		if (tag == &f->lfd) {
			for (int k = 0; k < 16; k++)
				conn_accept(f);
		} else if (tag == &f->evfd) {
			front_pool_completions(f);
		} else {
			conn_event(tag, evs[i].events);
		}
	}
	front_batch_flush(f);
	conn_flush_all(f);
}

/* Serve on the pool's event loop until a stop signal. */
static int run(struct front *f)
{
	struct pollfd pfd = { .fd = f->sigfd, .events = POLLIN };
	struct signalfd_siginfo si;
	int ret = rmr_client_watch_fd(f->client, f->epfd, front_turn, f);

	if (ret == 0) {
		ret = rmr_client_watch_fd(f->client, f->evfd, front_done_turn, f);
		if (ret < 0)
			rmr_client_unwatch_fd(f->client, f->epfd);
	}
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "cannot serve on the pool's event loop: %s", strerror(-ret));
		return 1;
	}
	for (;;) {
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
			kv_log(KV_LOG_ERR, "poll: %s", strerror(errno));
			ret = 1;
			break;
		}
		if (read(f->sigfd, &si, sizeof(si)) == sizeof(si)) {
			kv_log(KV_LOG_NOTICE, "%s: stopping", strsignal((int)si.ssi_signo));
			break;
		}
	}
	/* From here on the front is this thread's alone. */
	rmr_client_unwatch_fd(f->client, f->evfd);
	rmr_client_unwatch_fd(f->client, f->epfd);
	return ret;
}

/* Every connection gone: let what the pool still does for them finish. */
static void drain(struct front *f)
{
	uint64_t t0 = kv_mono_ms();
	struct epoll_event ev;

	while (f->ops_alive) {
		if (kv_mono_ms() - t0 > DRAIN_TIMEOUT_MS) {
			kv_log(KV_LOG_WARN, "%" PRIu64 " requests still unfinished after %d ms",
			       f->ops_alive, DRAIN_TIMEOUT_MS);
			return;
		}
		if (epoll_wait(f->epfd, &ev, 1, 100) > 0 && ev.data.ptr == &f->evfd)
			front_pool_completions(f);
		front_batch_flush(f);
	}
}

int main(int argc, char **argv)
{
	static struct front front = { .epfd = -1, .lfd = -1, .sigfd = -1, .evfd = -1 };
	struct front *f = &front;
	bool pid_written = false, ready_written = false;
	sigset_t sigs;
	int rc = 1, ret;

	parse_args(argc, argv, &f->cfg);
	kv_log_init(PROG, f->cfg.pool, 0, f->cfg.verbose);
	f->start_ms = kv_mono_ms();
	front_clock(f);
	if (f->cfg.key_file) {
		char why[512];

		if (rmr_key_load(f->cfg.key_file, f->cfg.key, why, sizeof(why)) < 0) {
			kv_log(KV_LOG_ERR, "%s", why);
			return 1;
		}
		f->cfg.keyed = true;
	}

	/* SIGPIPE ignored (sends use MSG_NOSIGNAL too); stop signals through a signalfd,
	 * blocked before librmr starts its thread (it inherits the mask). */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	f->sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (f->sigfd < 0 || f->epfd < 0) {
		kv_log(KV_LOG_ERR, "signalfd/epoll: %s", strerror(errno));
		return 1;
	}
	if (f->cfg.pid_file) {
		char pid[32];

		snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		ret = kv_write_file_atomic(f->cfg.pid_file, pid);
		if (ret < 0) {
			kv_log(KV_LOG_ERR, "pid file %s: %s", f->cfg.pid_file, strerror(-ret));
			return 1;
		}
		pid_written = true;
	}
	rmr_log_set_sink(kv_log_rmr_sink, NULL, f->cfg.verbose ? RMR_LOG_DEBUG : RMR_LOG_INFO);
	if (front_pool_open(f) < 0)
		goto out;
	f->lfd = listen_tcp(f->cfg.listen, f->listen_addr, sizeof(f->listen_addr));
	if (f->lfd < 0)
		goto out_pool;
	if (epoll_add(f, f->lfd, &f->lfd) < 0 || epoll_add(f, f->evfd, &f->evfd) < 0) {
		kv_log(KV_LOG_ERR, "epoll: %s", strerror(errno));
		goto out_pool;
	}
	if (f->cfg.ready_file) {
		char text[512];

		snprintf(text, sizeof(text), "%s\n", f->listen_addr);
		ret = kv_write_file_atomic(f->cfg.ready_file, text);
		if (ret < 0) {
			kv_log(KV_LOG_ERR, "ready file %s: %s", f->cfg.ready_file, strerror(-ret));
			goto out_pool;
		}
		ready_written = true;
	}
	kv_log(KV_LOG_NOTICE, "serving on %s: %u member(s), %" PRIu64 " buckets of %" PRIu32 " bytes, queue depth %" PRIu32,
	       f->listen_addr, f->cfg.nmembers, f->nbuckets, f->bucket_size, f->qd);
	rc = run(f);

	close(f->lfd);
	f->lfd = -1;
	conn_close_all(f);
	drain(f);
out_pool:
	if (f->lfd >= 0)
		close(f->lfd);
	front_pool_close(f);
out:
	cmd_cache_drain(f);
	if (ready_written)
		unlink(f->cfg.ready_file);
	if (pid_written)
		unlink(f->cfg.pid_file);
	close(f->epfd);
	close(f->sigfd);
	if (rc == 0)
		kv_log(KV_LOG_NOTICE, "stopped");
	return rc;
}
