/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Client connections: non-blocking sockets on the front's epoll loop.
 * Frames are parsed as they arrive (pipelining: many per read), each
 * command takes its place in the connection's order, and replies go out in
 * that order, gathered into one send per connection per loop turn.
 *
 * Limits: a frame above --max-frame closes that connection (after a
 * best-effort error line), a malformed frame gets its error and closes it;
 * a client with CONN_MAX_PENDING commands unanswered, or CONN_MAX_OUT reply
 * bytes unsent, is not read until it drains.
 */
#include "front.h"
#include "kv_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Read at most this much from one connection per loop turn: fairness. */
#define READ_BUDGET (256u * 1024)
#define READ_CHUNK (64u * 1024)
/* An idle connection gives a grown input buffer back above this. */
#define IN_KEEP (256u * 1024)

/* Tell epoll what the connection waits for now, if that changed. */
static void conn_set_events(struct conn *c, bool want_write)
{
	struct epoll_event ev = {
		.events = (c->reading ? EPOLLIN : 0) | (want_write ? EPOLLOUT : 0),
		.data.ptr = c,
	};

	if (ev.events == c->registered)
		return;
	if (epoll_ctl(c->f->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		kv_log(KV_LOG_ERR, "client %s: epoll: %s", c->peer, strerror(errno));
	c->registered = ev.events;
}

static void conn_close(struct conn *c, const char *why)
{
	struct front *f = c->f;
	struct cmd *cmd, *next;

	if (c->dead)
		return;
	kv_log(KV_LOG_DEBUG, "client %s (id %llu): closed: %s", c->peer, (unsigned long long)c->id,
	       why);
	epoll_ctl(f->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->dead = true;
	/* Commands in flight finish without their client. */
	for (cmd = c->head; cmd; cmd = next) {
		next = cmd->next;
		if (cmd->done)
			cmd_free(cmd);
		else
			cmd->conn = NULL;
	}
	c->head = c->tail = NULL;
	c->ncmds = 0;
	if (c->prev)
		c->prev->next = c->next;
	else
		f->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	f->nconns--;
	/* Freed at the end of the loop turn: a caller up the stack may still hold it. */
	c->next = f->dead_head;
	f->dead_head = c;
}

void conn_accept(struct front *f)
{
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	struct epoll_event ev = { .events = EPOLLIN };
	struct conn *c;
	int one = 1, fd;

	fd = accept4(f->lfd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
			kv_log(KV_LOG_WARN, "accept: %s", strerror(errno));
		return;
	}
	f->total_connections++;
	if (f->nconns >= f->cfg.max_clients) {
		static const char full[] = "-ERR max number of clients reached\r\n";

		f->rejected_connections++;
		(void)!send(fd, full, sizeof(full) - 1, MSG_NOSIGNAL);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->f = f;
	c->fd = fd;
	c->id = ++f->next_conn_id;
	c->reading = true;
	c->registered = EPOLLIN;
	if (sa.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&sa;
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, ntohs(in->sin_port));
	} else {
		snprintf(c->peer, sizeof(c->peer), "#%llu", (unsigned long long)c->id);
	}
	/* Replies are small and latency-bound. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = c;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		kv_log(KV_LOG_ERR, "epoll: %s", strerror(errno));
		close(fd);
		free(c);
		return;
	}
	c->next = f->conns;
	if (f->conns)
		f->conns->prev = c;
	f->conns = c;
	f->nconns++;
	kv_log(KV_LOG_DEBUG, "client %s (id %llu): connected", c->peer, (unsigned long long)c->id);
}

static bool conn_over_limits(const struct conn *c)
{
	return c->ncmds >= CONN_MAX_PENDING || c->out.len - c->out_sent >= CONN_MAX_OUT;
}

/* A frame that cannot be served: answer why (best effort) and close once answered. */
static void conn_protocol_error(struct conn *c, const char *error, bool oversized)
{
	struct kv_buf *b = conn_reply_buf(c);

	if (oversized)
		c->f->oversized_frames++;
	else
		c->f->protocol_errors++;
	kv_log(KV_LOG_INFO, "client %s: %s; closing the connection", c->peer, error);
	resp_error(b, "ERR %s", error);
	conn_reply_done(c, b);
	c->closing = true;
	c->stop_parsing = true;
	c->close_reason = oversized ? "frame above the limit" : "protocol error";
	c->reading = false;
	/* An oversized frame is not read to its end: the rest of the stream goes with the connection. */
	if (oversized)
		c->in.len = 0;
}

/* Parse and dispatch the whole frames in the input buffer, within the limits. */
static void conn_parse(struct conn *c)
{
	static struct resp_arg argv[FRONT_MAX_ARGS];
	struct resp_limits lim = { .max_frame = c->f->cfg.max_frame, .max_args = FRONT_MAX_ARGS };
	size_t off = 0;

	/* After end of stream (closing) the frames received before it still run. */
	while (!c->dead && !c->stop_parsing && off < c->in.len && !conn_over_limits(c)) {
		struct resp_frame fr;
		enum resp_result r = resp_parse(c->in.p + off, c->in.len - off, &lim, argv, &fr);

		if (r == RESP_MORE)
			break;
		if (r == RESP_BAD || r == RESP_TOO_BIG) {
			conn_protocol_error(c, fr.error, r == RESP_TOO_BIG);
			return;
		}
		if (fr.argc)
			command_dispatch(c, fr.argc, argv);
		off += fr.len;
	}
	if (!c->dead)
		kv_buf_consume(&c->in, off);
	if (!c->dead && c->in.len == 0 && c->in.cap > IN_KEEP)
		kv_buf_free(&c->in);
}

static void conn_read(struct conn *c)
{
	size_t got = 0;

	while (got < READ_BUDGET) {
		size_t room;
		ssize_t n;

		if (!kv_buf_reserve(&c->in, READ_CHUNK)) {
			conn_close(c, "out of memory");
			return;
		}
		room = c->in.cap - c->in.len;
		n = recv(c->fd, c->in.p + c->in.len, room, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			conn_close(c, strerror(errno));
			return;
		}
		if (n == 0) {
			/* The client finished sending: answer what it sent, then close. */
			c->closing = true;
			c->reading = false;
			break;
		}
		c->in.len += (size_t)n;
		got += (size_t)n;
		if ((size_t)n < room)
			break; /* the socket is drained */
	}
	conn_parse(c);
	if (!c->dead)
		conn_queue_flush(c);
}

void conn_event(struct conn *c, uint32_t events)
{
	if (c->dead)
		return;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (c->reading) {
			conn_read(c);
		} else if (events & (EPOLLHUP | EPOLLERR)) {
			conn_close(c, "connection reset");
			return;
		}
	}
	if (!c->dead && (events & EPOLLOUT))
		conn_queue_flush(c);
}

struct kv_buf *conn_reply_buf(struct conn *c)
{
	struct cmd *cmd;

	/* Nothing before it unanswered: straight into the output. */
	if (!c->head)
		return &c->out;
	cmd = cmd_new(c, NULL, 0, NULL, 0);
	return cmd ? &cmd->reply : &c->out; /* out of memory: better out of order than lost */
}

void conn_reply_done(struct conn *c, struct kv_buf *b)
{
	if (b != &c->out)
		c->tail->done = true;
	conn_queue_flush(c);
}

void conn_queue_flush(struct conn *c)
{
	if (c->flush_queued || c->dead)
		return;
	c->flush_queued = true;
	c->flush_next = c->f->flush_head;
	c->f->flush_head = c;
}

/* Send what is ready; adjust the epoll interest; resume reading when drained. */
static void conn_flush(struct conn *c)
{
	while (c->head && c->head->done) {
		struct cmd *cmd = c->head;

		c->head = cmd->next;
		if (!c->head)
			c->tail = NULL;
		c->ncmds--;
		kv_buf_append(&c->out, cmd->reply.p, cmd->reply.len);
		cmd_free(cmd);
	}
	if (c->out.oom) {
		conn_close(c, "out of memory for replies");
		return;
	}
	while (c->out_sent < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->out_sent, c->out.len - c->out_sent,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			conn_close(c, strerror(errno));
			return;
		}
		c->out_sent += (size_t)n;
	}
	if (c->out_sent == c->out.len) {
		c->out.len = c->out_sent = 0;
	} else if (c->out_sent > (1u << 20)) {
		kv_buf_consume(&c->out, c->out_sent);
		c->out_sent = 0;
	}
	if (c->closing && !c->head && c->out.len == 0) {
		conn_close(c, c->close_reason ? c->close_reason : "closed after the last reply");
		return;
	}
	if (!c->closing && !c->reading && !conn_over_limits(c)) {
		/* Drained: frames buffered meanwhile first, then the socket again. */
		c->reading = true;
		conn_parse(c);
		if (c->dead)
			return;
		if (c->head && c->head->done) {
			conn_queue_flush(c); /* parsing answered some at once */
			return;
		}
	}
	if (c->reading && conn_over_limits(c))
		c->reading = false;
	conn_set_events(c, c->out.len > 0);
}

void conn_flush_all(struct front *f)
{
	while (f->flush_head) {
		struct conn *c = f->flush_head;

		f->flush_head = c->flush_next;
		c->flush_queued = false;
		if (!c->dead)
			conn_flush(c);
	}
	while (f->dead_head) {
		struct conn *c = f->dead_head;

		f->dead_head = c->next;
		kv_buf_free(&c->in);
		kv_buf_free(&c->out);
		free(c);
	}
}

void conn_close_all(struct front *f)
{
	while (f->conns)
		conn_close(f->conns, "the front stops");
	conn_flush_all(f);
}
