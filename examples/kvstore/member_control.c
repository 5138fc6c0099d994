/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The member's control socket (--control PATH, mode 0600): one line in, the
 * answer out, then close. The same protocol as brmr-server's, so
 * `brmrctl status --socket PATH` reads a kvstore member as well.
 */
#include "member.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CONTROL_TIMEOUT_S 2
#define STATUS_FIRST (16u * 1024)
#define STATUS_MAX (16u << 20)

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client went away */
		buf += n;
		len -= (size_t)n;
	}
}

/* librmr's status of the server, rendered; malloc'd, or NULL. */
static char *render_status(struct rmr_server *srv, enum rmr_format fmt)
{
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	size_t cap = STATUS_FIRST;
	char *buf = NULL;
	int n = -ENOSPC;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	if (rmr_server_status(srv, st) < 0)
		goto out;
	while (n == -ENOSPC && cap <= STATUS_MAX) {
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

void member_control_serve(int lfd, struct rmr_server *srv)
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
	if (!strcmp(line, "status") || !strcmp(line, "status text") ||
	    !strcmp(line, "status json")) {
		char *out = render_status(srv, strcmp(line, "status json") ? RMR_FORMAT_TEXT
									   : RMR_FORMAT_JSON);

		if (out) {
			write_all(fd, out, strlen(out));
			if (!*out || out[strlen(out) - 1] != '\n')
				write_all(fd, "\n", 1);
		} else {
			write_all(fd, "error: status unavailable\n", 26);
		}
		free(out);
	} else {
		write_all(fd, "error: unknown command\n", 23);
	}
	close(fd);
}
