/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sockio.c: whole-message reads and writes on stream sockets. Writes use
 * MSG_NOSIGNAL so a client that went away yields -EPIPE, not SIGPIPE (which
 * is ignored anyway, but a library may have reinstalled a handler).
 */
#include "nbdb.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

int nbdb_read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = recv(fd, p, n, MSG_WAITALL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int nbdb_write_full(int fd, const void *buf, size_t n)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };

	return nbdb_writev_full(fd, &iov, 1);
}

int nbdb_writev_full(int fd, struct iovec *iov, unsigned cnt)
{
	while (cnt > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = cnt };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		size_t done;

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Skip what was sent: whole entries, then part of one. */
		done = (size_t)w;
		while (cnt > 0 && done >= iov->iov_len) {
			done -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= done;
		}
	}
	return 0;
}
