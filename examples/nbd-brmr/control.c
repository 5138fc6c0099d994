/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control.c: the control socket (--control PATH), spoken by `brmrctl status`
 * and `brmrctl maintenance`.
 *
 * Protocol: the client connects, writes one line and reads the answer until
 * the server closes:
 *   "status text", "status json" ("status" alone means text): the output of
 *       rmr_pool_status_format(), newline-terminated;
 *   "maintenance on ID", "maintenance off ID": "ok\n".
 * Anything else, or a refused action, is answered "error: REASON\n". Served on the main thread, one client
 * at a time; short socket timeouts keep a silent client from stalling it.
 */
#include "nbdb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CONTROL_LINE_MAX 256
#define CONTROL_TIMEOUT_MS 1000
/* Status output: grows from the first size up to the last on -ENOSPC. */
#define CONTROL_OUT_FIRST (16u * 1024)
#define CONTROL_OUT_MAX (1024u * 1024)

/* Read one line (without its end) or what came before end-of-stream.
 * @return length, or -1 if nothing usable arrived. */
static int read_line(int fd, char *line, size_t size)
{
	size_t n = 0;

	while (n + 1 < size) {
		ssize_t r = recv(fd, line + n, size - 1 - n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (memchr(line, '\n', n))
			break;
	}
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	/* Trailing blanks are forgiven; the command words are not. */
	n = strlen(line);
	while (n > 0 && line[n - 1] == ' ')
		line[--n] = '\0';
	return (int)n;
}

static void send_all(int fd, const char *s, size_t n)
{
	/* Best effort: a client that left early misses its answer. */
	(void)nbdb_write_full(fd, s, n);
}

static void answer_status(int fd, struct brmr_dev *dev, enum rmr_format fmt)
{
	struct rmr_pool_status *st;
	size_t size = CONTROL_OUT_FIRST;
	char *out = NULL;
	int rc;

	st = calloc(1, sizeof(*st));
	if (!st) {
		send_all(fd, "error: out of memory\n", 21);
		return;
	}
	st->size = sizeof(*st);
	rc = rmr_client_status(brmr_client(dev), st);
	if (rc < 0) {
		send_all(fd, "error: status unavailable\n", 26);
		goto out;
	}
	for (;;) {
		char *n = realloc(out, size);

		if (!n) {
			rc = -ENOMEM;
			break;
		}
		out = n;
		rc = rmr_pool_status_format(st, fmt, out, size);
		if (rc != -ENOSPC || size >= CONTROL_OUT_MAX)
			break;
		size *= 2;
	}
	if (rc < 0) {
		send_all(fd, "error: cannot format status\n", 28);
		goto out;
	}
	send_all(fd, out, (size_t)rc);
	if (rc == 0 || out[rc - 1] != '\n')
		send_all(fd, "\n", 1);
out:
	free(out);
	free(st);
}

/* "on ID" or "off ID": take a member out of I/O, or put it back. */
static void answer_maintenance(int fd, struct brmr_dev *dev, const char *args)
{
	char word[8], extra, msg[128];
	unsigned id;
	int ret, n;

	if (sscanf(args, "%7s %u %c", word, &id, &extra) != 2 || id == 0 || id > RMR_MAX_MEMBER_ID ||
	    (strcmp(word, "on") && strcmp(word, "off"))) {
		n = snprintf(msg, sizeof(msg), "error: usage: maintenance on|off MEMBER-ID\n");
	} else {
		ret = rmr_client_set_maintenance(brmr_client(dev), (uint16_t)id, !strcmp(word, "on"));
		if (ret == 0) {
			nbdb_log(NBDB_NOTICE, "member %u: maintenance %s (operator)", id, word);
			n = snprintf(msg, sizeof(msg), "ok\n");
		} else if (ret == -ENOENT) {
			n = snprintf(msg, sizeof(msg), "error: no member %u in this pool\n", id);
		} else if (ret == -EALREADY) {
			n = snprintf(msg, sizeof(msg), "error: member %u is %s in maintenance\n", id,
				     strcmp(word, "on") ? "not" : "already");
		} else if (ret == -EBUSY) {
			n = snprintf(msg, sizeof(msg),
				     "error: member %u is not normal, or the last normal member\n", id);
		} else {
			n = snprintf(msg, sizeof(msg), "error: %s\n", strerror(-ret));
		}
	}
	send_all(fd, msg, (size_t)n);
}

void nbdb_control_serve(int lfd, struct brmr_dev *dev)
{
	struct timeval tv = {
		.tv_sec = CONTROL_TIMEOUT_MS / 1000,
		.tv_usec = (CONTROL_TIMEOUT_MS % 1000) * 1000,
	};
	char line[CONTROL_LINE_MAX];
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	if (read_line(fd, line, sizeof(line)) < 0) {
		close(fd);
		return;
	}
	if (strcmp(line, "status text") == 0 || strcmp(line, "status") == 0)
		answer_status(fd, dev, RMR_FORMAT_TEXT);
	else if (strcmp(line, "status json") == 0)
		answer_status(fd, dev, RMR_FORMAT_JSON);
	else if (strncmp(line, "maintenance ", 12) == 0)
		answer_maintenance(fd, dev, line + 12);
	else
		send_all(fd, "error: unknown command\n", 23);
	close(fd);
}
