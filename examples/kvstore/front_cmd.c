/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Commands in flight: one allocation holds the command, its ops and a copy
 * of its arguments (the connection's input buffer moves on meanwhile).
 */
#include "front.h"
#include "kv_log.h"

#include <errno.h>
#include <string.h>

struct cmd *cmd_new(struct conn *c, const struct command *def, unsigned argc,
		    const struct resp_arg *argv, unsigned nops)
{
	size_t bytes = 0, size;
	struct cmd *cmd;
	char *p;

	for (unsigned i = 0; i < argc; i++)
		bytes += argv[i].len;
	size = sizeof(*cmd) + nops * sizeof(struct op) + argc * sizeof(struct resp_arg) + bytes;
	cmd = calloc(1, size);
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
	for (unsigned i = 0; i < cmd->nops; i++)
		kv_buf_free(&cmd->ops[i].result);
	kv_buf_free(&cmd->reply);
	free(cmd);
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
