/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commands: the table, argument checks, and what each one asks of the
 * pool. Replies and errors are worded as Redis words them.
 *
 * Every replicated write is a state-setting, idempotent request (SET a key
 * to a value with an absolute expiry, DEL a key, FLUSHALL): a member that
 * resyncs may copy a bucket that already holds a write and then apply it
 * again. So what depends on the current value (INCR, SET NX/XX/KEEPTTL,
 * DEL's count) is computed here, in an EXCLUSIVE op that reads the key and
 * then writes the result while nothing else touches its bucket.
 */
#include "front.h"
#include "kv_bucket.h"
#include "kv_log.h"
#include "kv_sha256.h"
#include "kv_util.h"
#include "kv_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- helpers ------------------------------------------------------------------ */

static bool arg_is(const struct resp_arg *a, const char *word)
{
	size_t n = strlen(word);

	return a->len == n && !strncasecmp(a->p, word, n);
}

static bool live(uint64_t expire_ms, uint64_t now_ms)
{
	return !expire_ms || expire_ms > now_ms;
}

/* Reply now (no op needed) with a formatted error. */
static void __attribute__((format(printf, 2, 3))) reply_error(struct conn *c, const char *fmt, ...)
{
	struct kv_buf *b = conn_reply_buf(c);
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	resp_error(b, "%s", msg);
	conn_reply_done(c, b);
}

static void reply_simple(struct conn *c, const char *text)
{
	struct kv_buf *b = conn_reply_buf(c);

	resp_simple(b, text);
	conn_reply_done(c, b);
}

static void reply_arity(struct conn *c, const struct command *def)
{
	reply_error(c, "ERR wrong number of arguments for '%s' command", def->name);
}

static const char *const ERR_INT = "ERR value is not an integer or out of range";
static const char *const ERR_SYNTAX = "ERR syntax error";

static bool key_fits(struct conn *c, const struct resp_arg *key)
{
	if (key->len <= KV_KEY_MAX)
		return true;
	reply_error(c, "ERR key longer than %u bytes", KV_KEY_MAX);
	return false;
}

static bool entry_fits(struct conn *c, const struct resp_arg *key, size_t vlen)
{
	struct front *f = c->f;

	if (!key_fits(c, key))
		return false;
	if (key->len + vlen <= f->max_kv)
		return true;
	reply_error(c, "ERR key and value take %zu bytes; a bucket of %" PRIu32 " bytes holds at most %" PRIu32,
		    key->len + vlen, f->bucket_size, f->max_kv);
	return false;
}

static struct cmd *new_cmd(struct conn *c, const struct command *def, unsigned argc,
			   const struct resp_arg *argv, unsigned nops)
{
	struct cmd *cmd = cmd_new(c, def, argc, argv, nops);

	if (!cmd)
		reply_error(c, "ERR out of memory");
	return cmd;
}

/* Set up op @i of @cmd for key @key (an argument of @cmd, so it lives as long). */
static struct op *key_op(struct cmd *cmd, unsigned i, const struct resp_arg *key,
			 enum order_class cls, op_step_fn start, op_step_fn step)
{
	struct op *op = &cmd->ops[i];

	op->key = (const uint8_t *)key->p;
	op->klen = (uint32_t)key->len;
	op->hash = kv_hash(key->len ? key->p : "", key->len);
	op->order.bucket = kv_bucket_of_hash(op->hash, op->f->nbuckets);
	op->order.cls = cls;
	op->start = start;
	op->step = step;
	return op;
}

static struct op *global_op(struct cmd *cmd, op_step_fn start, op_step_fn step)
{
	struct op *op = &cmd->ops[0];

	op->order.cls = ORDER_GLOBAL;
	op->start = start;
	op->step = step;
	return op;
}

static void cmd_fail(struct cmd *cmd, int err)
{
	if (!cmd->err && !cmd->err_text)
		cmd->err = err;
}

static void cmd_fail_text(struct cmd *cmd, const char *text)
{
	if (!cmd->err && !cmd->err_text)
		cmd->err_text = text;
}

/* The op failed: record it, and it is done. */
static void op_failed(struct op *op, int err)
{
	cmd_fail(op->cmd, err);
	op_finish(op);
}

/* Reply builders, run once every op of a command finished. */
static bool finish_error(struct cmd *cmd)
{
	if (cmd->err_text)
		resp_error(&cmd->reply, "%s", cmd->err_text);
	else if (cmd->err)
		reply_rmr_error(&cmd->reply, cmd->err);
	return cmd->err_text || cmd->err;
}

static void finish_first(struct cmd *cmd)
{
	struct kv_buf tmp;

	if (finish_error(cmd))
		return;
	tmp = cmd->reply;
	cmd->reply = cmd->ops[0].result;
	cmd->ops[0].result = tmp;
}

static void finish_array(struct cmd *cmd)
{
	if (finish_error(cmd))
		return;
	resp_array(&cmd->reply, cmd->nops);
	for (unsigned i = 0; i < cmd->nops; i++)
		kv_buf_append(&cmd->reply, cmd->ops[i].result.p, cmd->ops[i].result.len);
}

static void finish_count(struct cmd *cmd)
{
	if (!finish_error(cmd))
		resp_int(&cmd->reply, cmd->count);
}

static void finish_ok(struct cmd *cmd)
{
	if (!finish_error(cmd))
		resp_simple(&cmd->reply, "OK");
}

/* Decode a GET answer; false (and the op failed) if it does not add up. */
static bool get_answer(struct op *op, bool meta, struct kv_get_answer *a)
{
	/* From a batch's answer (valid during this step only), or the op's own buffer. */
	const void *buf = op->ans ? op->ans : meta ? (const void *)op->hdr : op->answer;

	op->ans = NULL;
	if (op->status < 0) {
		op_failed(op, op->status);
		return false;
	}
	if (kv_wire_decode_get(buf, (uint32_t)op->status, meta, a) < 0) {
		kv_log(KV_LOG_ERR, "a member answered a GET with %d bytes that do not add up",
		       op->status);
		op_failed(op, -EPROTO);
		return false;
	}
	return true;
}

/* A key found past its expiry: gone for the client, deleted in the background. */
static bool check_live(struct op *op, const struct kv_get_answer *a, uint64_t now)
{
	if (!a->found)
		return false;
	if (live(a->expire_ms, now))
		return true;
	front_expire_key(op->f, op->key, op->klen, now);
	return false;
}

/* --- GET, MGET, EXISTS ---------------------------------------------------------- */

static void start_get(struct op *op)
{
	op_read_get(op, false);
}

static void start_get_meta(struct op *op)
{
	op_read_get(op, true);
}

static void step_get(struct op *op)
{
	struct kv_get_answer a;

	if (!get_answer(op, false, &a))
		return;
	if (check_live(op, &a, op->f->now_ms))
		resp_bulk(&op->result, a.value, a.vlen);
	else
		resp_nil(&op->result);
	op_finish(op);
}

static void run_get(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;

	if (!key_fits(c, &argv[1]) || !(cmd = new_cmd(c, def, argc, argv, 1)))
		return;
	key_op(cmd, 0, &cmd->argv[1], ORDER_READ, start_get, step_get);
	cmd->finish = finish_first;
	cmd_start(cmd);
}

static void run_mget(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;

	for (unsigned i = 1; i < argc; i++)
		if (!key_fits(c, &argv[i]))
			return;
	cmd = new_cmd(c, def, argc, argv, argc - 1);
	if (!cmd)
		return;
	for (unsigned i = 1; i < argc; i++)
		key_op(cmd, i - 1, &cmd->argv[i], ORDER_READ, start_get, step_get);
	cmd->finish = finish_array;
	cmd_start(cmd);
}

static void step_exists(struct op *op)
{
	struct kv_get_answer a;

	if (!get_answer(op, true, &a))
		return;
	op->cmd->count += check_live(op, &a, op->f->now_ms);
	op_finish(op);
}

static void run_exists(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;

	for (unsigned i = 1; i < argc; i++)
		if (!key_fits(c, &argv[i]))
			return;
	cmd = new_cmd(c, def, argc, argv, argc - 1);
	if (!cmd)
		return;
	for (unsigned i = 1; i < argc; i++)
		key_op(cmd, i - 1, &cmd->argv[i], ORDER_READ, start_get_meta, step_exists);
	cmd->finish = finish_count;
	cmd_start(cmd);
}

/* --- SET, MSET ------------------------------------------------------------------ */

static const char *const ERR_BUCKET_FULL =
	"OOM the key's bucket is full (create the stores with more or larger buckets)";

static void step_set_written(struct op *op)
{
	if (op->status == -ERANGE)
		cmd_fail_text(op->cmd, ERR_BUCKET_FULL);
	else if (op->status < 0)
		cmd_fail(op->cmd, op->status);
	else
		resp_simple(&op->result, "OK");
	op_finish(op);
}

static void start_set(struct op *op)
{
	op_write_set(op, op->value, op->vlen, op->cmd->expire_ms);
}

/* SET with NX, XX or KEEPTTL: the current state decides. */
static void step_set_checked(struct op *op)
{
	struct cmd *cmd = op->cmd;
	struct kv_get_answer a;
	uint64_t expire = cmd->expire_ms;
	bool exists;

	if (!get_answer(op, true, &a))
		return;
	exists = check_live(op, &a, op->f->now_ms);
	if ((cmd->nx && exists) || (cmd->xx && !exists)) {
		resp_nil(&op->result);
		op_finish(op);
		return;
	}
	if (cmd->keepttl && exists)
		expire = a.expire_ms;
	op->step = step_set_written;
	op_write_set(op, op->value, op->vlen, expire);
}

/* The expiry of SET's EX/PX/EXAT/PXAT @value: absolute Unix ms, or 0 and an error. */
static uint64_t parse_expiry(const struct resp_arg *opt, const struct resp_arg *value,
			     const char **err)
{
	uint64_t now = kv_now_ms();
	int64_t v;

	if (!kv_parse_i64(value->p, value->len, &v)) {
		*err = ERR_INT;
		return 0;
	}
	*err = "ERR invalid expire time in 'set' command";
	if (v <= 0)
		return 0;
	if (arg_is(opt, "ex"))
		return (uint64_t)v <= (UINT64_MAX - now) / 1000 ? now + (uint64_t)v * 1000 : 0;
	if (arg_is(opt, "px"))
		return (uint64_t)v <= UINT64_MAX - now ? now + (uint64_t)v : 0;
	if (arg_is(opt, "exat"))
		return (uint64_t)v <= UINT64_MAX / 1000 ? (uint64_t)v * 1000 : 0;
	return (uint64_t)v; /* pxat */
}

static void run_set(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	bool nx = false, xx = false, keepttl = false, has_expiry = false;
	uint64_t expire = 0;
	struct cmd *cmd;
	struct op *op;

	for (unsigned i = 3; i < argc; i++) {
		const struct resp_arg *o = &argv[i];

		if (arg_is(o, "nx") && !xx) {
			nx = true;
		} else if (arg_is(o, "xx") && !nx) {
			xx = true;
		} else if (arg_is(o, "keepttl") && !has_expiry) {
			keepttl = true;
		} else if ((arg_is(o, "ex") || arg_is(o, "px") || arg_is(o, "exat") ||
			    arg_is(o, "pxat")) && !has_expiry && !keepttl && i + 1 < argc) {
			const char *err;

			expire = parse_expiry(o, &argv[++i], &err);
			if (!expire) {
				reply_error(c, "%s", err);
				return;
			}
			has_expiry = true;
		} else if (arg_is(o, "get")) {
			reply_error(c, "ERR SET ... GET is not supported by kvstore");
			return;
		} else {
			reply_error(c, "%s", ERR_SYNTAX);
			return;
		}
	}
	if (!entry_fits(c, &argv[1], argv[2].len) ||
	    !(cmd = new_cmd(c, def, argc, argv, 1)))
		return;
	cmd->nx = nx;
	cmd->xx = xx;
	cmd->keepttl = keepttl;
	cmd->expire_ms = expire;
	if (nx || xx || keepttl)
		op = key_op(cmd, 0, &cmd->argv[1], ORDER_EXCLUSIVE, start_get_meta, step_set_checked);
	else
		op = key_op(cmd, 0, &cmd->argv[1], ORDER_WRITE, start_set, step_set_written);
	op->value = (const uint8_t *)cmd->argv[2].p;
	op->vlen = (uint32_t)cmd->argv[2].len;
	cmd->finish = finish_first;
	cmd_start(cmd);
}

static void run_mset(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	unsigned n = (argc - 1) / 2;
	struct cmd *cmd;

	if (argc % 2 == 0) {
		reply_arity(c, def);
		return;
	}
	for (unsigned i = 1; i < argc; i += 2)
		if (!entry_fits(c, &argv[i], argv[i + 1].len))
			return;
	cmd = new_cmd(c, def, argc, argv, n);
	if (!cmd)
		return;
	for (unsigned i = 0; i < n; i++) {
		struct op *op = key_op(cmd, i, &cmd->argv[1 + 2 * i], ORDER_WRITE, start_set,
				       step_set_written);

		op->value = (const uint8_t *)cmd->argv[2 + 2 * i].p;
		op->vlen = (uint32_t)cmd->argv[2 + 2 * i].len;
	}
	cmd->finish = finish_ok;
	cmd_start(cmd);
}

/* --- DEL ------------------------------------------------------------------------ */

static void step_del(struct op *op)
{
	struct kv_get_answer a;

	if (op->phase == 1) {
		if (op->status < 0)
			cmd_fail(op->cmd, op->status);
		op_finish(op);
		return;
	}
	if (!get_answer(op, true, &a))
		return;
	if (!a.found) {
		op_finish(op);
		return;
	}
	/* An expired key does not count, but goes all the same. */
	op->cmd->count += live(a.expire_ms, op->f->now_ms);
	op->phase = 1;
	op_write_del(op);
}

static void run_del(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;

	for (unsigned i = 1; i < argc; i++)
		if (!key_fits(c, &argv[i]))
			return;
	cmd = new_cmd(c, def, argc, argv, argc - 1);
	if (!cmd)
		return;
	for (unsigned i = 1; i < argc; i++)
		key_op(cmd, i - 1, &cmd->argv[i], ORDER_EXCLUSIVE, start_get_meta, step_del);
	cmd->finish = finish_count;
	cmd_start(cmd);
}

/* --- INCR, INCRBY, DECR, DECRBY ----------------------------------------------------- */

static void step_incr(struct op *op)
{
	struct cmd *cmd = op->cmd;
	struct kv_get_answer a;
	int64_t cur = 0;
	uint64_t expire = 0;
	int n;

	if (op->phase == 1) {
		if (op->status == -ERANGE)
			cmd_fail_text(cmd, ERR_BUCKET_FULL);
		else if (op->status < 0)
			cmd_fail(cmd, op->status);
		op_finish(op);
		return;
	}
	if (!get_answer(op, false, &a))
		return;
	if (check_live(op, &a, op->f->now_ms)) {
		if (!kv_parse_i64((const char *)a.value, a.vlen, &cur)) {
			cmd_fail_text(cmd, ERR_INT);
			op_finish(op);
			return;
		}
		expire = a.expire_ms; /* INCR keeps the key's time to live */
	}
	if ((cmd->delta > 0 && cur > INT64_MAX - cmd->delta) ||
	    (cmd->delta < 0 && cur < INT64_MIN - cmd->delta)) {
		cmd_fail_text(cmd, "ERR increment or decrement would overflow");
		op_finish(op);
		return;
	}
	cur += cmd->delta;
	n = snprintf(op->num, sizeof(op->num), "%" PRId64, cur);
	resp_int(&op->result, cur);
	op->phase = 1;
	op_write_set(op, op->num, (uint32_t)n, expire);
}

static void run_incr_family(struct conn *c, const struct command *def, unsigned argc,
			    const struct resp_arg *argv, int64_t sign)
{
	int64_t delta = sign;
	struct cmd *cmd;

	if (argc == 3) {
		if (!kv_parse_i64(argv[2].p, argv[2].len, &delta)) {
			reply_error(c, "%s", ERR_INT);
			return;
		}
		if (sign < 0) {
			if (delta == INT64_MIN) {
				reply_error(c, "ERR decrement would overflow");
				return;
			}
			delta = -delta;
		}
	}
	if (!key_fits(c, &argv[1]) ||
	    !(cmd = new_cmd(c, def, argc, argv, 1)))
		return;
	cmd->delta = delta;
	key_op(cmd, 0, &cmd->argv[1], ORDER_EXCLUSIVE, start_get, step_incr);
	cmd->finish = finish_first;
	cmd_start(cmd);
}

static void run_incr(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	run_incr_family(c, def, argc, argv, 1);
}

static void run_incrby(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	run_incr_family(c, def, argc, argv, 1);
}

static void run_decr(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	run_incr_family(c, def, argc, argv, -1);
}

static void run_decrby(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	run_incr_family(c, def, argc, argv, -1);
}

/* --- whole-pool commands: FLUSHALL, DBSIZE, KVDIGEST --------------------------------- */

/*
 * FLUSHALL empties the pool with writes without data over whole buckets:
 * one, unless the pool is larger than a request's range can be (4 GiB),
 * then one after the other.
 */
static bool flush_next(struct op *op)
{
	struct front *f = op->f;
	uint64_t per = UINT32_MAX / f->bucket_size, first = (uint64_t)op->phase * per;

	if (first >= f->nbuckets)
		return false;
	op->phase++;
	op->io = (struct rmr_io){
		.kind = RMR_IO_WRITE,
		.op = KV_OP_FLUSHALL,
		.addr = first * f->bucket_size,
		.len = (uint32_t)((f->nbuckets - first < per ? f->nbuckets - first : per) *
				  f->bucket_size),
	};
	front_pool_submit(op);
	return true;
}

static void step_flushall(struct op *op)
{
	if (op->status < 0)
		cmd_fail(op->cmd, op->status);
	else if (flush_next(op))
		return;
	op_finish(op);
}

static void start_flushall(struct op *op)
{
	op->phase = 0;
	flush_next(op);
}

static void run_flushall(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;

	if (argc > 2 || (argc == 2 && !arg_is(&argv[1], "sync") && !arg_is(&argv[1], "async"))) {
		reply_error(c, "%s", ERR_SYNTAX);
		return;
	}
	cmd = new_cmd(c, def, argc, argv, 1);
	if (!cmd)
		return;
	global_op(cmd, start_flushall, step_flushall);
	cmd->finish = finish_ok;
	cmd_start(cmd);
}

/* The ids of the NORMAL members, in the client's order. @return how many. */
static unsigned normal_members(struct front *f, uint16_t ids[RMR_MAX_MEMBERS])
{
	struct rmr_pool_status *st = calloc(1, sizeof(*st));
	unsigned n = 0;

	if (!st)
		return 0;
	st->size = sizeof(*st);
	if (rmr_client_status(f->client, st) == 0)
		for (unsigned i = 0; i < st->nmembers; i++)
			if (st->members[i].state == RMR_MEMBER_NORMAL && st->members[i].member_id)
				ids[n++] = st->members[i].member_id;
	free(st);
	return n;
}

/*
 * Ask the next NORMAL member not asked yet, starting round-robin. @return
 * false if there is none.
 */
static bool dbsize_ask_next(struct op *op)
{
	struct front *f = op->f;
	uint16_t ids[RMR_MAX_MEMBERS];
	unsigned n = normal_members(f, ids);

	for (unsigned k = 0; k < n; k++) {
		uint16_t id = ids[(f->dbsize_rr + k) % n];

		if (op->tried_mask & (1ull << id))
			continue;
		op->tried_mask |= 1ull << id;
		kv_put_le64(op->hdr, f->now_ms);
		op->iov[0] = (struct iovec){ op->answer, KV_DBSIZE_ANSWER };
		op->io = (struct rmr_io){
			.kind = RMR_IO_READ,
			.op = KV_OP_DBSIZE,
			.addr = 0,
			.len = KV_DBSIZE_ANSWER,
			.iov = op->iov,
			.iovcnt = 1,
			.arg = op->hdr,
			.arg_len = KV_DBSIZE_ARG,
			.member_id = id,
		};
		front_pool_submit(op);
		return true;
	}
	return false;
}

static void start_dbsize(struct op *op)
{
	op->answer = front_answer_get(op->f);
	if (!op->answer) {
		front_pool_fail(op, -ENOMEM);
		return;
	}
	op->f->dbsize_rr++;
	if (!dbsize_ask_next(op))
		front_pool_fail(op, -EIO);
}

/*
 * A member that still copies buckets it missed may count short: another
 * NORMAL member is asked then, and the last answer stands if all are.
 */
static void step_dbsize(struct op *op)
{
	if (op->status == KV_DBSIZE_ANSWER) {
		uint32_t flags = kv_get_le32(op->answer + 8);

		kv_buf_free(&op->result);
		resp_int(&op->result, (int64_t)kv_get_le64(op->answer));
		if (!(flags & (KV_STATE_RESYNCING | KV_STATE_DAMAGED)) || !dbsize_ask_next(op))
			op_finish(op);
		return;
	}
	/* No answer (that member failed or left NORMAL meanwhile): another one. */
	if (dbsize_ask_next(op))
		return;
	if (op->result.len)
		op_finish(op); /* an earlier member's possibly short count */
	else
		op_failed(op, op->status < 0 ? op->status : -EPROTO);
}

static void run_dbsize(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd = new_cmd(c, def, argc, argv, 1);

	if (!cmd)
		return;
	global_op(cmd, start_dbsize, step_dbsize);
	cmd->finish = finish_first;
	cmd_start(cmd);
}

static void start_digest(struct op *op)
{
	op->answer = front_answer_get(op->f);
	if (!op->answer) {
		front_pool_fail(op, -ENOMEM);
		return;
	}
	op->iov[0] = (struct iovec){ op->answer, KV_DIGEST_ANSWER };
	op->io = (struct rmr_io){
		.kind = RMR_IO_READ,
		.op = KV_OP_DIGEST,
		.addr = 0,
		.len = KV_DIGEST_ANSWER,
		.iov = op->iov,
		.iovcnt = 1,
		.member_id = op->cmd->member_id,
	};
	front_pool_submit(op);
}

static void step_digest(struct op *op)
{
	struct cmd *cmd = op->cmd;
	char hex[2 * KV_SHA256_LEN + 1], text[128];
	uint32_t flags;
	int n;

	if (op->status == -ENXIO) {
		cmd_fail_text(cmd, "ERR that member is not NORMAL now (see INFO replication)");
		op_finish(op);
		return;
	}
	if (op->status < 0) {
		op_failed(op, op->status);
		return;
	}
	if (op->status != KV_DIGEST_ANSWER) {
		op_failed(op, -EPROTO);
		return;
	}
	flags = kv_get_le32(op->answer + KV_SHA256_LEN + 8);
	if (flags & KV_STATE_DAMAGED) {
		cmd_fail_text(cmd, "ERR that member has damaged buckets waiting for a copy from a peer");
	} else if (flags & KV_STATE_RESYNCING) {
		cmd_fail_text(cmd, "BUSY that member still copies buckets it missed from its peers");
	} else {
		kv_sha256_hex(op->answer, hex);
		n = snprintf(text, sizeof(text), "%s keys=%" PRIu64, hex,
			     kv_get_le64(op->answer + KV_SHA256_LEN));
		resp_bulk(&op->result, text, (size_t)n);
	}
	op_finish(op);
}

static void run_kvdigest(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct cmd *cmd;
	int64_t id;

	if (!kv_parse_i64(argv[1].p, argv[1].len, &id) || id < 1 || id > RMR_MAX_MEMBER_ID) {
		reply_error(c, "ERR KVDIGEST takes a member id in 1..%d", RMR_MAX_MEMBER_ID);
		return;
	}
	cmd = new_cmd(c, def, argc, argv, 1);
	if (!cmd)
		return;
	cmd->member_id = (uint16_t)id;
	global_op(cmd, start_digest, step_digest);
	cmd->finish = finish_first;
	cmd_start(cmd);
}

/* --- commands answered by the front alone -------------------------------------------- */

static void run_ping(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct kv_buf *b;

	if (argc > 2) {
		reply_arity(c, def);
		return;
	}
	b = conn_reply_buf(c);
	if (argc == 2)
		resp_bulk(b, argv[1].p, argv[1].len);
	else
		resp_simple(b, "PONG");
	conn_reply_done(c, b);
}

static void run_echo(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct kv_buf *b = conn_reply_buf(c);

	(void)def;
	(void)argc;
	resp_bulk(b, argv[1].p, argv[1].len);
	conn_reply_done(c, b);
}

static void run_quit(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	(void)def;
	(void)argc;
	(void)argv;
	reply_simple(c, "OK");
	c->closing = true;
	c->stop_parsing = true;
	c->reading = false;
	c->close_reason = "QUIT";
}

static void run_select(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	int64_t db;

	(void)def;
	(void)argc;
	if (!kv_parse_i64(argv[1].p, argv[1].len, &db))
		reply_error(c, "%s", ERR_INT);
	else if (db != 0)
		reply_error(c, "ERR DB index is out of range");
	else
		reply_simple(c, "OK");
}

static void run_info(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct kv_buf text = { 0 }, *b;

	(void)def;
	front_info(c->f, &text, argc - 1, argv + 1);
	b = conn_reply_buf(c);
	resp_bulk(b, text.p, text.len);
	conn_reply_done(c, b);
	kv_buf_free(&text);
}

/* One COMMAND entry: name, arity, flags, first key, last key, step. */
static void command_describe(struct kv_buf *b, const struct command *d)
{
	const char *p = d->flags;
	unsigned nflags = 0;

	for (const char *q = p; *q; q += strcspn(q, " "), q += *q == ' ')
		nflags++;
	resp_array(b, 6);
	resp_bulk(b, d->name, strlen(d->name));
	resp_int(b, d->arity);
	resp_array(b, nflags);
	while (*p) {
		size_t len = strcspn(p, " ");

		kv_buf_append(b, "+", 1);
		kv_buf_append(b, p, len);
		kv_buf_append(b, "\r\n", 2);
		p += len + (p[len] == ' ');
	}
	resp_int(b, d->first_key);
	resp_int(b, d->last_key);
	resp_int(b, d->step);
}

static void run_command(struct conn *c, const struct command *def, unsigned argc,
			 const struct resp_arg *argv)
{
	struct kv_buf *b;

	(void)def;
	if (argc >= 2 && !arg_is(&argv[1], "count") && !arg_is(&argv[1], "info") &&
	    !arg_is(&argv[1], "docs") && !arg_is(&argv[1], "list")) {
		reply_error(c, "ERR unknown subcommand '%.*s'. Try COMMAND COUNT, INFO, DOCS or LIST.",
			    (int)(argv[1].len > 64 ? 64 : argv[1].len), argv[1].p);
		return;
	}
	b = conn_reply_buf(c);
	if (argc >= 2 && arg_is(&argv[1], "count")) {
		resp_int(b, command_count());
	} else if (argc >= 2 && arg_is(&argv[1], "docs")) {
		resp_array(b, 0); /* no documentation to give */
	} else if (argc >= 2 && arg_is(&argv[1], "list")) {
		resp_array(b, command_count());
		for (unsigned i = 0; i < command_count(); i++)
			resp_bulk(b, command_at(i)->name, strlen(command_at(i)->name));
	} else if (argc >= 2) { /* INFO name... */
		resp_array(b, argc - 2);
		for (unsigned i = 2; i < argc; i++) {
			const struct command *d = command_find(argv[i].p, argv[i].len);

			if (d)
				command_describe(b, d);
			else
				kv_buf_append(b, "*-1\r\n", 5);
		}
	} else {
		resp_array(b, command_count());
		for (unsigned i = 0; i < command_count(); i++)
			command_describe(b, command_at(i));
	}
	conn_reply_done(c, b);
}

/* --- the table -------------------------------------------------------------------- */

static const struct command commands[] = {
	{ "command", -1, "random loading stale", 0, 0, 0, run_command },
	{ "dbsize", 1, "readonly fast", 0, 0, 0, run_dbsize },
	{ "decr", 2, "write denyoom fast", 1, 1, 1, run_decr },
	{ "decrby", 3, "write denyoom fast", 1, 1, 1, run_decrby },
	{ "del", -2, "write", 1, -1, 1, run_del },
	{ "echo", 2, "fast", 0, 0, 0, run_echo },
	{ "exists", -2, "readonly fast", 1, -1, 1, run_exists },
	{ "flushall", -1, "write", 0, 0, 0, run_flushall },
	{ "get", 2, "readonly fast", 1, 1, 1, run_get },
	{ "incr", 2, "write denyoom fast", 1, 1, 1, run_incr },
	{ "incrby", 3, "write denyoom fast", 1, 1, 1, run_incrby },
	{ "info", -1, "random loading stale", 0, 0, 0, run_info },
	{ "kvdigest", 2, "readonly admin", 0, 0, 0, run_kvdigest },
	{ "mget", -2, "readonly fast", 1, -1, 1, run_mget },
	{ "mset", -3, "write denyoom", 1, -1, 2, run_mset },
	{ "ping", -1, "fast stale", 0, 0, 0, run_ping },
	{ "quit", -1, "fast", 0, 0, 0, run_quit },
	{ "select", 2, "loading fast", 0, 0, 0, run_select },
	{ "set", -3, "write denyoom", 1, 1, 1, run_set },
};

unsigned command_count(void)
{
	return sizeof(commands) / sizeof(commands[0]);
}

const struct command *command_at(unsigned i)
{
	return &commands[i];
}

const struct command *command_find(const char *name, size_t len)
{
	for (unsigned i = 0; i < command_count(); i++)
		if (strlen(commands[i].name) == len && !strncasecmp(commands[i].name, name, len))
			return &commands[i];
	return NULL;
}

void command_dispatch(struct conn *c, unsigned argc, const struct resp_arg *argv)
{
	const struct command *def = command_find(argv[0].p, argv[0].len);

	c->f->total_commands++;
	if (!def) {
		char args[256];
		size_t n = 0;

		args[0] = '\0';
		for (unsigned i = 1; i < argc && n < sizeof(args) - 80; i++)
			n += (size_t)snprintf(args + n, sizeof(args) - n, "'%.*s' ",
					      (int)(argv[i].len > 64 ? 64 : argv[i].len), argv[i].p);
		reply_error(c, "ERR unknown command '%.*s', with args beginning with: %s",
			    (int)(argv[0].len > 64 ? 64 : argv[0].len), argv[0].p, args);
		return;
	}
	if (def->arity > 0 ? argc != (unsigned)def->arity : argc < (unsigned)-def->arity) {
		reply_arity(c, def);
		return;
	}
	def->run(c, def, argc, argv);
}
