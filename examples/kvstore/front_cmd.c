/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Commands in flight: one allocation holds the command, its ops and a copy
 * of its arguments (the connection's input buffer moves on meanwhile).
 *
 * Small ones (one op, short arguments: a GET, a SET, a PING's reply) come
 * from a cache of freed ones that keep their reply buffer. With hundreds
 * in flight (50 clients pipelining 16 each) glibc's per-thread cache holds
 * none of them, and malloc and free took 15 % of the front's time at GET
 * -P 16 (perf). The sanitizer builds skip the cache, so that a command
 * used after its free is still caught.
 */
#include "front.h"
#include "kv_log.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define CMD_SMALL_BYTES                                                          \
	(sizeof(struct cmd) + sizeof(struct op) + 3 * sizeof(struct resp_arg) + 256)
#define CMD_KEEP_REPLY 1024u /* the largest reply buffer a cached command keeps */
#define CMD_CACHE_MAX 1024u
#if defined(__SANITIZE_ADDRESS__)
#define CMD_CACHING false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CMD_CACHING false
#endif
#endif
#ifndef CMD_CACHING
#define CMD_CACHING true
#endif

/*
 * A command of @size bytes whose first @zero bytes are zero (all of them if
 * new), and the reply buffer it brings (empty if new).
 */
static struct cmd *cmd_alloc(struct front *f, size_t size, size_t zero, struct kv_buf *spare)
{
	struct cmd *cmd;

	*spare = (struct kv_buf){ 0 };
	if (size > CMD_SMALL_BYTES) {
		cmd = calloc(1, size);
	} else if (f->cmd_cache) {
		cmd = f->cmd_cache;
		f->cmd_cache = cmd->next;
		f->ncmd_cache--;
		*spare = cmd->reply;
		memset(cmd, 0, zero);
	} else {
		cmd = calloc(1, CMD_SMALL_BYTES);
	}
	if (cmd) {
		cmd->f = f;
		cmd->small = size <= CMD_SMALL_BYTES;
	}
	return cmd;
}

struct cmd *cmd_new(struct conn *c, const struct command *def, unsigned argc,
		    const struct resp_arg *argv, unsigned nops)
{
	size_t bytes = 0, size;
	struct kv_buf spare;
	struct cmd *cmd;
	char *p;

	for (unsigned i = 0; i < argc; i++)
		bytes += argv[i].len;
	size = sizeof(*cmd) + nops * sizeof(struct op) + argc * sizeof(struct resp_arg) + bytes;
	/* The arguments' room is written below: only the command and its ops start zeroed. */
	cmd = cmd_alloc(c->f, size, offsetof(struct cmd, ops) + nops * sizeof(struct op), &spare);
	if (!cmd)
		return NULL;
	cmd->conn = c;
	cmd->def = def;
	cmd->nops = cmd->pending = nops;
	cmd->argc = argc;
	cmd->argv = (struct resp_arg *)&cmd->ops[nops];
	p = (char *)&cmd->argv[argc];
	for (unsigned i = 0; i < argc; i++) {
		cmd->argv[i].p = p;
		cmd->argv[i].len = argv[i].len;
		if (argv[i].len)
			memcpy(p, argv[i].p, argv[i].len);
		p += argv[i].len;
	}
	for (unsigned i = 0; i < nops; i++) {
		cmd->ops[i].f = c->f;
		cmd->ops[i].cmd = cmd;
		cmd->ops[i].index = i;
	}
	/* The first op's answer, or the reply itself, is written where the last one was. */
	if (nops)
		cmd->ops[0].result = spare;
	else
		cmd->reply = spare;
	/* In the connection's order: its reply goes out after every earlier one. */
	if (c->tail)
		c->tail->next = cmd;
	else
		c->head = cmd;
	c->tail = cmd;
	c->ncmds++;
	return cmd;
}

void cmd_start(struct cmd *cmd)
{
	struct front *f = cmd->conn->f;

	/* Ops may finish (and free the command) only through the event loop, never in here. */
	f->ops_alive += cmd->nops;
	for (unsigned i = 0; i < cmd->nops; i++)
		order_submit(&f->order, &cmd->ops[i].order);
}

void cmd_finish(struct cmd *cmd)
{
	if (cmd->finish)
		cmd->finish(cmd);
	for (unsigned i = 0; i < cmd->nops; i++)
		kv_buf_free(&cmd->ops[i].result);
	cmd->done = true;
	if (cmd->conn)
		conn_queue_flush(cmd->conn);
	else
		cmd_free(cmd); /* its client left */
}

void cmd_free(struct cmd *cmd)
{
	struct front *f = cmd->f;

	for (unsigned i = 0; i < cmd->nops; i++)
		kv_buf_free(&cmd->ops[i].result);
	if (CMD_CACHING && cmd->small && f->ncmd_cache < CMD_CACHE_MAX) {
		if (cmd->reply.oom || cmd->reply.cap > CMD_KEEP_REPLY)
			kv_buf_free(&cmd->reply);
		cmd->reply.len = 0;
		cmd->next = f->cmd_cache;
		f->cmd_cache = cmd;
		f->ncmd_cache++;
		return;
	}
	kv_buf_free(&cmd->reply);
	free(cmd);
}

void cmd_cache_drain(struct front *f)
{
	while (f->cmd_cache) {
		struct cmd *cmd = f->cmd_cache;

		f->cmd_cache = cmd->next;
		kv_buf_free(&cmd->reply);
		free(cmd);
	}
	f->ncmd_cache = 0;
}

void reply_rmr_error(struct kv_buf *b, int err)
{
	switch (err) {
	case -ESTALE:
		resp_error(b, "ERR fenced: another kvstore-front took the pool over");
		break;
	case -EIO:
		resp_error(b, "ERR replication: no member could serve the request (or fewer than min-legs applied it)");
		break;
	case -ENOMEM:
		resp_error(b, "ERR out of memory");
		break;
	case -ESHUTDOWN:
		resp_error(b, "ERR the front is shutting down");
		break;
	default:
		resp_error(b, "ERR request failed: %s", strerror(-err));
		break;
	}
}
