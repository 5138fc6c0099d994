/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * listen.c: the listening sockets of nbd-brmr (unix by default, TCP by
 * option) and the NBD URIs that describe them.
 */
#include "nbdb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_BACKLOG 64

/* Is something accepting on @p path? Decides whether a socket file left
 * there is stale (safe to remove) or belongs to a running server. */
static bool unix_socket_alive(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return true; /* cannot tell: be safe, do not remove */
	alive = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
		(errno != ECONNREFUSED && errno != ENOENT);
	close(fd);
	return alive;
}

int nbdb_listen_unix(const char *path, char *why, size_t whylen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "socket path too long (max %zu bytes): %s",
			 sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(why, whylen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		if (unix_socket_alive(&sa)) {
			snprintf(why, whylen, "%s: another server is listening there", path);
			return -EADDRINUSE;
		}
		unlink(path);
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "socket for %s: %s", path, strerror(-rc));
		return rc;
	}
	/* Created 0600 from the start: no window in which others may connect. */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		rc = -errno;
		snprintf(why, whylen, "listen on %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	return fd;
}

int nbdb_parse_hostport(const char *arg, char *host, size_t hostlen, char *port,
			size_t portlen)
{
	const char *p;
	size_t hl;
	char *end;
	unsigned long n;

	if (arg[0] == '[') {
		/* [v6]:port */
		const char *rb = strchr(arg, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		hl = (size_t)(rb - arg - 1);
		if (hl == 0 || hl >= hostlen)
			return -EINVAL;
		memcpy(host, arg + 1, hl);
		host[hl] = '\0';
		p = rb + 2;
	} else if ((p = strrchr(arg, ':'))) {
		hl = (size_t)(p - arg);
		if (memchr(arg, ':', hl))
			return -EINVAL; /* bare v6 address: needs brackets */
		if (hl == 0)
			snprintf(host, hostlen, "127.0.0.1");
		else if (hl >= hostlen)
			return -EINVAL;
		else {
			memcpy(host, arg, hl);
			host[hl] = '\0';
		}
		p++;
	} else {
		snprintf(host, hostlen, "127.0.0.1");
		p = arg;
	}
	errno = 0;
	n = strtoul(p, &end, 10);
	if (!*p || *end || errno || n > 65535 || p[0] == '-' || p[0] == '+')
		return -EINVAL;
	snprintf(port, portlen, "%lu", n);
	return 0;
}

int nbdb_listen_tcp(const char *hostport, char *uri, size_t urilen, char *why,
		    size_t whylen)
{
	char host[256], port[16], hbuf[NI_MAXHOST], sbuf[NI_MAXSERV];
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = -1, rc, one = 1, err = 0;

	if (nbdb_parse_hostport(hostport, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(why, whylen, "bad --tcp address '%s' (want HOST:PORT)", hostport);
		return -EINVAL;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(why, whylen, "cannot resolve %s: %s", host, gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, LISTEN_BACKLOG) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(why, whylen, "listen on %s: %s", hostport,
			 strerror(err ? err : EADDRNOTAVAIL));
		return -(err ? err : EADDRNOTAVAIL);
	}

	/* Report the port actually bound (port 0 picks a free one). */
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof(hbuf), sbuf, sizeof(sbuf),
			NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
		if (ss.ss_family == AF_INET6)
			snprintf(uri, urilen, "nbd://[%s]:%s/", hbuf, sbuf);
		else
			snprintf(uri, urilen, "nbd://%s:%s/", hbuf, sbuf);
	} else {
		snprintf(uri, urilen, "nbd://%s:%s/", host, port);
	}
	return fd;
}

void nbdb_unix_uri(const char *path, char *uri, size_t urilen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(uri, urilen, "nbd+unix:///?socket=");

	/* Percent-encode all but unreserved characters and '/'. */
	for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < urilen; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
			uri[o++] = (char)*p;
		} else {
			uri[o++] = '%';
			uri[o++] = hex[*p >> 4];
			uri[o++] = hex[*p & 15];
		}
	}
	uri[o < urilen ? o : urilen - 1] = '\0';
}

int nbdb_accept(int lfd, bool tcp, char *peer, size_t peerlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char hbuf[NI_MAXHOST], sbuf[NI_MAXSERV];
	int fd, one = 1;

	fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!tcp) {
		snprintf(peer, peerlen, "unix socket");
		return fd;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof(hbuf), sbuf, sizeof(sbuf),
			NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(peer, peerlen, "%s:%s", hbuf, sbuf);
	else
		snprintf(peer, peerlen, "tcp");
	return fd;
}
