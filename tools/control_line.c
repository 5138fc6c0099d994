/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One command line from a control-socket client; see control_line.h. */
#include "control_line.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Read up to the first line end (or end-of-stream), within @p timeout_ms
 * for the whole line: a client that sends a byte now and then must not hold
 * the caller (the daemon's main thread) for longer than one command may
 * take. @return 0, or -1 on an error or when the time is up.
 */
static int read_line(int fd, char *line, size_t size, unsigned timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	size_t n = 0;

	while (n + 1 < size) {
		ssize_t r;
		uint64_t now = now_ms();
		struct timeval left;

		if (now >= deadline)
			return -1;
		left.tv_sec = (time_t)((deadline - now) / 1000);
		left.tv_usec = (suseconds_t)((deadline - now) % 1000 * 1000);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &left, sizeof(left));
		r = recv(fd, line + n, size - 1 - n, 0);
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
	return 0;
}

int control_accept_line(int lfd, unsigned timeout_ms, char *line, size_t size)
{
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (size == 0 || read_line(fd, line, size, timeout_ms) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}
