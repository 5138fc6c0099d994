/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * front.h: internal interfaces of kvstore-front, the server clients talk
 * RESP to and the pool's one rmr client (its only writer).
 *
 * Threads: the front runs on librmr's event-loop thread
 * (rmr_client_watch_fd): its epoll descriptor of the listening socket and
 * every client connection is one watch, its eventfd another. There it
 * parses commands, keeps the per-bucket order (front_order.h) and submits
 * requests to librmr; a completion queues the finished request and kicks
 * the eventfd's watch (no system call), whose turn does the rest. The main
 * thread waits for a stop signal, takes both watches back, and then owns
 * everything (it drains what is still in flight). So everything below is
 * touched by one thread at a time, except the done queue (done_lock).
 *
 * Objects: a connection (struct conn) holds its commands (struct cmd) in
 * arrival order and sends their replies in that order as they finish; a
 * command runs one request (struct op) per key, or one for the whole pool;
 * an op may take two librmr requests (read, then write, for INCR and
 * friends).
 */
#ifndef KVSTORE_FRONT_H
#define KVSTORE_FRONT_H

#include <rmr/client.h>

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "front_order.h"
#include "kv_buf.h"
#include "resp.h"

#define FRONT_DEFAULT_LISTEN "127.0.0.1:7379"
#define FRONT_DEFAULT_MAX_FRAME (1u << 20)
#define FRONT_DEFAULT_MAX_CLIENTS 1024u
#define FRONT_MAX_ARGS 65536u
/* A connection stops being read while this many of its commands are unanswered. */
#define CONN_MAX_PENDING 1024u
/* ... or while this many reply bytes wait to be sent. */
#define CONN_MAX_OUT (8u << 20)

struct front_cfg {
	const char *pool;
	const char *members[RMR_MAX_MEMBERS];
	unsigned nmembers;
	const char *provider;
	const char *transport;
	const char *listen;
	size_t max_frame;
	unsigned max_clients;
	unsigned queue_depth;
	unsigned max_io;
	unsigned min_legs;
	bool takeover;
	const char *ready_file;
	const char *pid_file;
	bool verbose;
	const char *key_file;
	bool keyed;                  /* key holds the pool key from key_file */
	uint8_t key[RMR_KEY_LEN];
};

struct cmd;
struct conn;
struct front;
struct op;

/* What an op does when its librmr request completes. */
typedef void (*op_step_fn)(struct op *op);

struct op {
	struct order_item order;     /* its place in the bucket order */
	struct front *f;
	struct cmd *cmd;             /* NULL for the front's own requests (expiry) */
	unsigned index;              /* in cmd->ops */
	op_step_fn step;
	op_step_fn start;            /* builds and submits its first request, when its turn comes */
	const uint8_t *key;
	uint32_t klen;
	uint64_t hash;
	const uint8_t *value;        /* SET, MSET */
	uint32_t vlen;
	uint64_t deadline_ms;        /* the front's expiry delete: expired by then */
	uint32_t phase;              /* for steps with more than one request */
	struct rmr_io io;
	struct iovec iov[3];
	uint8_t hdr[16];             /* a write's fixed header, or a read's small argument */
	uint8_t hdr_len;             /* bytes of @hdr a write uses */
	uint16_t wop;                /* a write's opcode (KV_OP_SET, ...) */
	char num[24];                /* INCR and friends: the new value, as text */
	uint8_t *answer;             /* a read's answer buffer (front_answer_get) */
	int status;                  /* the request's completion status */
	const uint8_t *ans;          /* a read's answer, when it came in a batch's (else NULL) */
	bool alone;                  /* must go in a request of its own (a batch could not take it) */
	bool bucket_only;            /* a write that goes with writes of its own bucket only */
	struct op *batch_next;       /* in a batch being gathered or in flight */
	bool submitted;              /* holds a librmr slot */
	uint64_t tried_mask;         /* DBSIZE: members asked so far (bit n = id n) */
	struct kv_buf result;        /* multi-key commands: this key's part of the reply */
	struct op *next;             /* submit queue, done queue */
};

/* A command. The reply is built when its last op finishes. */
struct cmd {
	struct front *f;
	struct conn *conn;           /* NULL once the client is gone */
	struct cmd *next;            /* in the connection's order */
	const struct command *def;
	unsigned argc;
	struct resp_arg *argv;       /* copies, in the same allocation */
	unsigned nops, pending;
	int64_t count;               /* DEL, EXISTS: keys counted */
	int err;                     /* first error of an op, negative errno */
	const char *err_text;        /* or a RESP error line chosen by a step */
	bool done;
	/* Options parsed before the ops ran. */
	bool nx, xx;
	uint64_t expire_ms;
	bool keepttl;
	int64_t delta;               /* INCRBY and friends */
	uint16_t member_id;          /* KVDIGEST */
	void (*finish)(struct cmd *cmd); /* builds @reply once every op finished */
	bool small;                  /* a CMD_SMALL_BYTES allocation: goes back to the cache */
	struct kv_buf reply;
	struct op ops[];
};

struct conn {
	struct front *f;
	int fd;
	uint64_t id;
	char peer[64];
	struct kv_buf in;            /* received, not yet parsed */
	struct kv_buf out;           /* replies not yet sent */
	size_t out_sent;             /* bytes of @out already sent */
	struct cmd *head, *tail;     /* unanswered commands, in order */
	unsigned ncmds;
	bool reading;                /* wants EPOLLIN */
	uint32_t registered;         /* the epoll interest set now */
	bool closing;                /* QUIT, end of stream or a protocol error: close once answered */
	bool stop_parsing;           /* QUIT or a protocol error: run nothing more it sent */
	const char *close_reason;    /* for the log line */
	bool dead;                   /* socket closed; freed at the end of the loop turn */
	bool flush_queued;
	struct conn *flush_next;     /* connections with replies to send this turn */
	struct conn *prev, *next;    /* every connection */
};

/* A command of the table (front_commands.c). */
struct command {
	const char *name;            /* lower case */
	int arity;                   /* argc exactly, or at least -arity if negative */
	const char *flags;           /* for COMMAND: "readonly", "write", ... */
	int first_key, last_key, step;
	/* Run it: reply at once or start ops. */
	void (*run)(struct conn *c, const struct command *def, unsigned argc,
		    const struct resp_arg *argv);
};

struct front {
	struct front_cfg cfg;
	struct rmr_client *client;
	uint64_t nbuckets;
	uint32_t bucket_size;
	uint32_t max_io;
	uint32_t qd;
	uint32_t answer_cap;         /* bytes of a GET answer buffer */
	uint32_t max_kv;             /* largest klen + vlen a bucket holds */
	struct order order;
	int epfd, lfd, sigfd, evfd;
	char listen_addr[INET6_ADDRSTRLEN + 16];

	pthread_mutex_t done_lock;
	struct op *done_head, *done_tail; /* finished requests, from librmr's thread */
	bool done_signalled;
	bool done_evfd;              /* done_signalled through the eventfd (not a kick) */

	struct op *sub_head, *sub_tail; /* may run, wait for a librmr slot */
	struct front_batches *batches; /* requests gathered this loop turn (front_batch.c) */
	unsigned inflight;           /* librmr requests in flight */
	uint64_t ops_alive;          /* ops started and not finished, for the stop */
	uint8_t **answers;           /* free answer buffers */
	unsigned nanswers;

	struct conn *conns;
	unsigned nconns;
	struct conn *flush_head;     /* connections to flush at the end of this turn */
	struct conn *dead_head;      /* closed connections to free at the end of this turn */
	uint64_t next_conn_id;

	/* Counters for INFO. */
	uint64_t start_ms;
	uint64_t total_connections, rejected_connections, total_commands;
	uint64_t protocol_errors, oversized_frames, rmr_requests, rmr_errors;
	uint64_t expired_deleted;
	unsigned dbsize_rr;          /* DBSIZE: the member to ask first, round-robin */
	bool stopping;

	struct cmd *cmd_cache;       /* freed small commands, with their reply buffers */
	unsigned ncmd_cache;
	uint64_t now_ms;             /* Unix ms, read once per loop turn (front_clock) */
};

/* Read the clock for this loop turn: expiry checks use the turn's time. */
void front_clock(struct front *f);

/* front_pool.c: requests to librmr. */
int front_pool_open(struct front *f);
void front_pool_close(struct front *f);
/* @op may run now: submit its request (it waits for a slot if none is free). */
void front_pool_submit(struct op *op);
/* @op's request failed before librmr took it: its step runs with @err, later. */
void front_pool_fail(struct op *op, int err);
/* Drain the requests librmr finished (the eventfd fired). */
void front_pool_completions(struct front *f);
/* A GET answer buffer, answer_cap bytes; NULL if out of memory. */
uint8_t *front_answer_get(struct front *f);
void front_answer_put(struct front *f, uint8_t *buf);

/*
 * front_batch.c: fewer, larger requests. librmr costs a send and a receive
 * per request on each side, so the GETs of one loop turn go in one
 * KV_OP_MGET, and the writes to one bucket while one is in flight go in one
 * KV_OP_BATCH after it (librmr would hold them back anyway: they overlap).
 */
int front_batch_init(struct front *f);
void front_batch_destroy(struct front *f);
/* A plain GET whose turn came: joins this loop turn's read. */
void batch_read(struct op *op);
/* A write whose turn came, payload [hdr, key, value] ready: joins its bucket's next request. */
void batch_write(struct op *op);
/* End of a loop turn: send what was gathered. */
void front_batch_flush(struct front *f);

/* front_ops.c: building requests. */
/* The bucket order's start callback: an op's turn came. */
void op_order_start(void *ctx, struct order_item *it);
void op_read_get(struct op *op, bool meta);
/* Submit @op's GET in a request of its own. */
void op_read_get_alone(struct op *op);
void op_write_set(struct op *op, const void *value, uint32_t vlen, uint64_t expire_ms);
void op_write_del(struct op *op);
/* The op finished (its step is done): the bucket order and the command go on. */
void op_finish(struct op *op);
/* Delete @key if it expired by @deadline_ms: a request of the front's own. */
void front_expire_key(struct front *f, const uint8_t *key, uint32_t klen, uint64_t deadline_ms);

/* front_cmd.c: commands in flight. */
struct cmd *cmd_new(struct conn *c, const struct command *def, unsigned argc,
		    const struct resp_arg *argv, unsigned nops);
/* Put every op of @cmd in the bucket order (or the global one). */
void cmd_start(struct cmd *cmd);
/* The last op of @cmd finished: build the reply, pass it to the connection. */
void cmd_finish(struct cmd *cmd);
void cmd_free(struct cmd *cmd);
/* Free the cached commands (at exit). */
void cmd_cache_drain(struct front *f);
/* A RESP error line for a failed librmr request. */
void reply_rmr_error(struct kv_buf *b, int err);

/* front_conn.c: connections. */
void conn_accept(struct front *f);
void conn_event(struct conn *c, uint32_t events);
/* Reply at once (no op): in order behind the connection's unanswered commands. */
struct kv_buf *conn_reply_buf(struct conn *c);
void conn_reply_done(struct conn *c, struct kv_buf *b);
/* @c has finished commands or output: send at the end of this loop turn. */
void conn_queue_flush(struct conn *c);
/* End of a loop turn: send what is ready, free closed connections. */
void conn_flush_all(struct front *f);
/* Stop: close every connection (commands in flight still complete). */
void conn_close_all(struct front *f);

/* front_commands.c: the command table and the commands. */
const struct command *command_find(const char *name, size_t len);
void command_dispatch(struct conn *c, unsigned argc, const struct resp_arg *argv);
unsigned command_count(void);
const struct command *command_at(unsigned i);

/* front_info.c: INFO. */
void front_info(struct front *f, struct kv_buf *out, unsigned nsections, const struct resp_arg *sections);

#endif
