/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl: the operator's CLI for brmr pools. This file holds the verb
 * table, main() and what the verbs share; the verbs live in brmrctl_*.c.
 *
 *   brmrctl create      format the stores of a new pool
 *   brmrctl status      status of a brmr-server or nbd-brmr
 *   brmrctl metrics     its counters in Prometheus text format
 *   brmrctl events      its stream of state changes, one JSON object a line
 *   brmrctl maintenance take a member out of I/O, or put it back
 *   brmrctl inspect     print and check a store's superblock
 *
 * To add a verb: write cmd_NAME() (answering --help), declare it in
 * brmrctl.h and add a line to verbs[] below.
 *
 * Errors are one line on stderr; exit status 2 for usage errors, 1 for
 * runtime errors.
 */
#include "brmrctl.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static const struct verb {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} verbs[] = {
	{ "create", cmd_create, "format the stores of a new pool" },
	{ "replace-member", cmd_replace_member,
	  "format a blank store for a member of an existing pool" },
	{ "status", cmd_status, "status of a brmr-server or nbd-brmr (control socket)" },
	{ "metrics", cmd_metrics, "its counters in Prometheus text format" },
	{ "events", cmd_events, "its stream of state changes, one JSON object a line" },
	{ "maintenance", cmd_maintenance, "on|off: take a member out of I/O, or put it back" },
	{ "add-member", cmd_add_member, "add a member to the pool, or attach a detached one" },
	{ "remove-member", cmd_remove_member, "delete a member from the pool, or --detach it" },
	{ "resync", cmd_resync, "stop|start|rate: a member's background resync" },
	{ "verify", cmd_verify, "compare a member's chunks with its peers' (--repair)" },
	{ "inspect", cmd_inspect, "print and check a store's superblock" },
};

int die(int status, const char *fmt, ...)
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

int config_die(const char *fmt, ...)
{
	va_list ap;

	fputs("brmrctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_USAGE;
}

int bad_option(int argc, char **argv)
{
	(void)argc;
	if (optopt)
		return die(EXIT_USAGE, "option '%s' needs an argument", argv[optind - 1]);
	return die(EXIT_USAGE, "unknown option '%s'", argv[optind - 1]);
}

bool parse_size(const char *s, uint64_t *out)
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

bool valid_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > RMR_NAME_MAX)
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

unsigned parse_member_id(const char *s)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > RMR_MAX_MEMBER_ID)
		return 0;
	return (unsigned)v;
}

struct brmr_config *load_pool_file(const char *config, const char *pool, int *status)
{
	struct brmr_config *c = calloc(1, sizeof(*c));
	char err[1280];
	int ret;

	if (!c) {
		*status = die(EXIT_RUNTIME, "out of memory");
		return NULL;
	}
	c->size = sizeof(*c);
	ret = config ? brmr_config_load(config, c, err, sizeof(err))
		     : brmr_config_load_pool(pool, c, err, sizeof(err));
	if (ret < 0) {
		free(c);
		/* A pool file is configuration: a bad one is a usage error. */
		*status = config_die("%s", err);
		return NULL;
	}
	return c;
}

/* ---- control sockets ------------------------------------------------------- */

bool ctl_target_opt(struct ctl_target *t, int c, const char *arg)
{
	switch (c) {
	case O_T_SOCKET:
		t->socket = arg;
		return true;
	case O_T_CONFIG:
		t->config = arg;
		return true;
	case O_T_POOL:
		t->pool = arg;
		return true;
	case O_T_MEMBER:
		t->member = arg;
		return true;
	case O_T_CLIENT:
		t->client = true;
		return true;
	default:
		return false;
	}
}

int ctl_target_socket(const struct ctl_target *t, char *path, size_t len)
{
	const struct brmr_config_member *m;
	struct brmr_config *c;
	unsigned id = 0;
	int status = 0;

	if ((t->config != NULL) + (t->pool != NULL) + (t->socket != NULL) > 1)
		return die(EXIT_USAGE, "--socket, --config and --pool exclude each other");
	if (t->member && t->client)
		return die(EXIT_USAGE, "--member and --client exclude each other");
	if (t->member && !(id = parse_member_id(t->member)))
		return die(EXIT_USAGE, "--member: '%s' is not a member id (1..%u)", t->member,
			   RMR_MAX_MEMBER_ID);
	if (t->socket) {
		if (t->member || t->client)
			return die(EXIT_USAGE, "--member and --client pick a socket from a pool "
				   "file; --socket names one");
		snprintf(path, len, "%s", t->socket);
		return 0;
	}
	if (!t->config && !t->pool)
		return die(EXIT_USAGE, "--socket, --config or --pool is required");
	c = load_pool_file(t->config, t->pool, &status);
	if (!c)
		return status;
	if (id) {
		m = brmr_config_member(c, id);
		if (!m) {
			status = config_die("%s:%u: pool %s has no member %u", c->file, c->line,
					    c->name, id);
			free(c);
			return status;
		}
		snprintf(path, len, "%s", m->control);
	} else {
		snprintf(path, len, "%s", c->client_control);
	}
	free(c);
	return 0;
}

int control_connect(const char *path, const char *cmd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -die(EXIT_USAGE, "socket path too long");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return -die(EXIT_RUNTIME, "cannot reach %s: %s", path, strerror(err));
	}
	if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd)) {
		err = errno;
		close(fd);
		return -die(EXIT_RUNTIME, "cannot reach %s: %s", path, strerror(err));
	}
	return fd;
}

/*
 * Send @cmd (one line) to the control socket at @path and copy the answer to
 * stdout. An answer starting "error:" becomes our one-line error.
 */
int control_request(const char *path, const char *cmd)
{
	return control_request_wait(path, cmd, 10);
}

int control_request_wait(const char *path, const char *cmd, unsigned secs)
{
	struct timeval tv = { .tv_sec = secs };
	char buf[8192];
	size_t got = 0;
	int fd = control_connect(path, cmd);

	if (fd < 0)
		return -fd;
	/* A hung daemon must not hang the operator's shell. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

/* ---- main -------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: brmrctl VERB [options]\n\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-15s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "\n'brmrctl VERB --help' describes each verb.\n");
}

int main(int argc, char **argv)
{
	char names[256] = "";
	size_t used = 0;

	/*
	 * libfabric pulls in libinfinipath, whose constructor catches SIGINT
	 * and SIGTERM to clean up adapter state; in a process that never used
	 * an adapter its handler sometimes hangs instead of ending it (one
	 * `timeout 5 brmrctl status --watch` in three outlived its SIGTERM).
	 * A command-line tool should simply end.
	 */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
			  !strcmp(argv[1], "help"))) {
		usage(stdout);
		return 0;
	}
	opterr = 0;
	for (size_t i = 0; argc >= 2 && i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].fn(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]) && used < sizeof(names); i++) {
		int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
				 verbs[i].name);

		if (n > 0)
			used += (size_t)n;
	}
	if (argc < 2)
		return die(EXIT_USAGE, "missing verb (%s)", names);
	return die(EXIT_USAGE, "unknown verb '%s' (%s)", argv[1], names);
}
