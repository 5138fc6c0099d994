/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Authenticated membership over the in-process transport: a pool whose
 * members hold a key admits only clients and members that prove it, and
 * they refuse a member that does not prove it back; a wrong pool UUID, a
 * spoofed member id and an id held by a live member are refused; each
 * refusal is counted and told to the consumer.
 */
#include "memstore.h"
#include "unit.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rmr/client.h>
#include <rmr/server.h>
#include <rmr/transport.h>

#include "auth.h"
#include "wire.h"

#define POOL_SIZE (1u << 20)
#define CHUNK (128u * 1024)
#define NMEMBERS 3
/* Polls of 10 ms before a wait fails: a hang detector, generous because the
 * sanitizer run shares two CPUs with the other tests in CI. */
#define POLLS 2000
#define MASK 0xeull /* ids 1..3 */

struct member {
	char addr[32];
	struct memstore store;
	struct rmr_server *srv;
	struct rmr_server_pool *pool;
};

/* members[NMEMBERS] is an extra process: an impostor, or a member without the key. */
static struct member members[NMEMBERS + 1];
static rmr_uuid pool_uuid;
static int test_round;
static const uint8_t key_a[RMR_KEY_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
					     16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
					     28, 29, 30, 31, 32 };
static uint8_t key_b[RMR_KEY_LEN];

/* What the auth_refused event told, per member process. */
static struct {
	atomic_uint count[NMEMBERS + 1];
	pthread_mutex_t lock;
	char last_reason[NMEMBERS + 1][160];
	uint16_t last_claimed[NMEMBERS + 1];
} ev = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void ev_auth_refused(void *priv, const char *pool, const char *role, uint16_t claimed,
			    const char *reason)
{
	unsigned idx = (unsigned)(uintptr_t)priv;

	(void)pool;
	ck_assert(!strcmp(role, "client") || !strcmp(role, "member"));
	pthread_mutex_lock(&ev.lock);
	snprintf(ev.last_reason[idx], sizeof(ev.last_reason[idx]), "%s", reason);
	ev.last_claimed[idx] = claimed;
	pthread_mutex_unlock(&ev.lock);
	atomic_fetch_add(&ev.count[idx], 1);
}

static const struct rmr_server_events member_events = {
	.size = sizeof(member_events),
	.auth_refused = ev_auth_refused,
};

/*
 * Start process @i serving member @id of the pool (@uuid) with @key (NULL:
 * an open pool); its peers are the other members 1..3 but itself (by id).
 */
static void member_start_as(unsigned i, uint16_t id, const rmr_uuid *uuid, const uint8_t *key)
{
	struct rmr_peer peers[NMEMBERS];
	unsigned npeers = 0;
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = members[i].addr,
		.transport = "mem",
		.events = &member_events,
		.priv = (void *)(uintptr_t)i,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
	};
	struct rmr_pool_params pp = {
		.size = sizeof(pp),
		.name = "vol",
		.uuid = *uuid,
		.pool_size = POOL_SIZE,
		.chunk_size = CHUNK,
		.member_id = id,
		.members_mask = MASK | (1ull << id),
		.peers = peers,
		.key = key,
	};

	for (unsigned k = 0; k < NMEMBERS; k++)
		if (k + 1 != id)
			peers[npeers++] = (struct rmr_peer){ .member_id = (uint16_t)(k + 1),
							     .addr = members[k].addr };
	pp.npeers = npeers;
	ck_assert_int_eq(rmr_server_create(&so, &members[i].srv), 0);
	ck_assert_int_eq(rmr_server_add_pool(members[i].srv, &pp, &memstore_ops, &members[i].store,
					     &members[i].pool), 0);
}

static void member_stop(unsigned i)
{
	if (!members[i].srv)
		return;
	rmr_server_remove_pool(members[i].pool);
	rmr_server_destroy(members[i].srv);
	members[i].srv = NULL;
}

static void setup(void)
{
	rmr_log_set_sink(NULL, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_ERR);
	ck_assert_int_eq(rmr_uuid_generate(&pool_uuid), 0);
	memcpy(key_b, key_a, sizeof(key_b));
	key_b[17] ^= 0x40;
	test_round++;
	for (unsigned i = 0; i <= NMEMBERS; i++) {
		atomic_store(&ev.count[i], 0);
		ev.last_reason[i][0] = '\0';
		ev.last_claimed[i] = 0;
		snprintf(members[i].addr, sizeof(members[i].addr), "auth%d-m%u", test_round, i + 1);
		memstore_init(&members[i].store, POOL_SIZE, CHUNK);
	}
}

static void teardown(void)
{
	for (unsigned i = 0; i <= NMEMBERS; i++) {
		member_stop(i);
		memstore_destroy(&members[i].store);
	}
}

/* Start members 1..3, each with its key (NULL: none). */
static void start_members(const uint8_t *k1, const uint8_t *k2, const uint8_t *k3)
{
	member_start_as(0, 1, &pool_uuid, k1);
	member_start_as(1, 2, &pool_uuid, k2);
	member_start_as(2, 3, &pool_uuid, k3);
}

/*
 * Member ids an open may go without (rmr_client_opts.open_without): a member
 * that cannot prove the key is refused like one that is away, and an open
 * waits for a member it did not hear from unless the others record it as
 * having missed writes, or the operator gives it up.
 */
static uint64_t open_without;

static int open_client(const uint8_t *key, const rmr_uuid *uuid, unsigned open_ms,
		       struct rmr_client **out)
{
	const char *addrs[NMEMBERS];
	struct rmr_client_opts o = {
		.size = sizeof(o),
		.pool_name = "vol",
		.pool_uuid = uuid,
		.transport = "mem",
		.nmembers = NMEMBERS,
		.members = addrs,
		.queue_depth = 16,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 200,
		.open_timeout_ms = open_ms,
		.key = key,
		.open_without = open_without,
	};

	for (unsigned i = 0; i < NMEMBERS; i++)
		addrs[i] = members[i].addr;
	*out = NULL;
	return rmr_client_open(&o, out);
}

static void server_status(unsigned i, struct rmr_server_status *ss)
{
	ss->size = sizeof(*ss);
	ck_assert_int_eq(rmr_server_status(members[i].srv, ss), 0);
}

static uint64_t auth_refused(unsigned i)
{
	static struct rmr_server_status ss;

	server_status(i, &ss);
	return ss.auth_refused;
}

/* Poll (bounded) until process @i counted at least @n refusals. */
static void wait_refused(unsigned i, uint64_t n)
{
	for (int k = 0; k < POLLS && auth_refused(i) < n; k++)
		usleep(10000);
	ck_assert_uint_ge(auth_refused(i), n);
	ck_assert_uint_ge(atomic_load(&ev.count[i]), n);
}

/* Is the member-to-member session of process @i to member @id up? */
static bool peer_up(unsigned i, uint16_t id)
{
	static struct rmr_server_status ss;

	server_status(i, &ss);
	for (unsigned k = 0; k < ss.pools[0].npeers; k++)
		if (ss.pools[0].peers[k].member_id == id)
			return ss.pools[0].peers[k].connected;
	return false;
}

static void wait_peer(unsigned i, uint16_t id, bool up)
{
	for (int k = 0; k < POLLS && peer_up(i, id) != up; k++)
		usleep(10000);
	ck_assert_int_eq(peer_up(i, id), up);
}

static void wait_mesh_up(void)
{
	for (unsigned i = 0; i < NMEMBERS; i++)
		for (uint16_t id = 1; id <= NMEMBERS; id++)
			if (id != i + 1)
				wait_peer(i, id, true);
}

static void reason_has(unsigned i, const char *what)
{
	pthread_mutex_lock(&ev.lock);
	ck_assert_msg(strstr(ev.last_reason[i], what), "member %u's last reason '%s' lacks '%s'",
		      i + 1, ev.last_reason[i], what);
	pthread_mutex_unlock(&ev.lock);
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, status;
};

static void waiter_cb(void *priv, int status)
{
	struct waiter *w = priv;

	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int do_io(struct rmr_client *c, enum rmr_io_kind kind, uint64_t addr, void *buf,
		 uint32_t len)
{
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct rmr_io io = {
		.kind = kind, .op = 1, .addr = addr, .len = len, .iov = &iov, .iovcnt = 1,
		.cb = waiter_cb, .priv = &w,
	};
	int ret = rmr_client_submit(c, &io, RMR_SUBMIT_WAIT);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	return kind == RMR_IO_READ && w.status == (int)len ? 0 : w.status;
}

static unsigned normal_members(struct rmr_client *c, uint64_t *refused)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	if (refused)
		*refused = st.auth_refused;
	return st.normal_members;
}

START_TEST(right_key_works_and_refuses_nothing)
{
	static uint8_t buf[8192], back[8192];
	struct rmr_client *c;
	uint64_t refused;

	start_members(key_a, key_a, key_a);
	wait_mesh_up();
	ck_assert_int_eq(open_client(key_a, NULL, 3000, &c), 0);
	for (int k = 0; k < POLLS && normal_members(c, NULL) < NMEMBERS; k++)
		usleep(10000);
	ck_assert_uint_eq(normal_members(c, &refused), NMEMBERS);
	ck_assert_uint_eq(refused, 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, CHUNK, buf, sizeof(buf)), 0);
	ck_assert_int_eq(do_io(c, RMR_IO_READ, CHUNK, back, sizeof(back)), 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_mem_eq(members[i].store.data + CHUNK, buf, sizeof(buf));
		ck_assert_uint_eq(auth_refused(i), 0);
	}
	rmr_client_close(c);
}
END_TEST

/* A client with another key, or none, never gets a session of a keyed pool. */
START_TEST(wrong_or_no_key_client_is_refused)
{
	struct rmr_client *c;

	start_members(key_a, key_a, key_a);
	ck_assert_int_eq(open_client(key_b, NULL, 800, &c), -ETIMEDOUT);
	ck_assert_ptr_null(c);
	/* The client found their proofs wrong and said so: they count that. */
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_refused(i, 1);
	reason_has(0, "another pool key");
	ck_assert_uint_eq(ev.last_claimed[0], 0);

	ck_assert_int_eq(open_client(NULL, NULL, 800, &c), -ETIMEDOUT);
	ck_assert_ptr_null(c);
	reason_has(0, "no pool key");
	/* Nothing of theirs reached a store. */
	for (unsigned i = 0; i < NMEMBERS; i++) {
		static struct rmr_server_status ss;

		server_status(i, &ss);
		ck_assert_uint_eq(ss.pools[0].writes, 0);
		ck_assert_uint_eq(ss.pools[0].writer_epoch, 0);
	}
}
END_TEST

/* A client with a key refuses members that prove none, or another key. */
START_TEST(keyed_client_refuses_member_without_the_key)
{
	struct rmr_client *c;
	uint64_t refused;

	/* Member 3 holds another key: the client takes 1 and 2, refuses 3. */
	start_members(key_a, key_a, key_b);
	/* Refused, it is not heard from: without it given up, no open. */
	ck_assert_int_eq(open_client(key_a, NULL, 800, &c), -EHOSTUNREACH);
	ck_assert_ptr_null(c);
	open_without = 1ull << 3;
	ck_assert_int_eq(open_client(key_a, NULL, 3000, &c), 0);
	open_without = 0;
	for (int k = 0; k < POLLS && (normal_members(c, &refused) < 2 || refused < 1); k++)
		usleep(10000);
	ck_assert_uint_eq(normal_members(c, &refused), 2);
	ck_assert_uint_ge(refused, 1);
	rmr_client_close(c);
	/* Members refuse member 3 both ways: its proof, and its check of theirs. */
	wait_refused(0, 1);
	wait_refused(2, 1);
	wait_peer(0, 3, false);
	wait_peer(2, 1, false);
	wait_peer(0, 2, true);

	/* An open pool: the keyed client refuses it whole. */
	teardown();
	setup();
	start_members(NULL, NULL, NULL);
	ck_assert_int_eq(open_client(key_a, NULL, 800, &c), -ETIMEDOUT);
	wait_refused(0, 1);
	reason_has(0, "this member has none");
}
END_TEST

/* A member without the key, in a keyed pool: refused both ways. */
START_TEST(member_without_key_is_refused)
{
	start_members(key_a, key_a, NULL);
	wait_peer(0, 2, true);
	wait_refused(0, 1);
	wait_refused(1, 1);
	wait_refused(2, 1); /* member 3 refuses the others' challenges */
	wait_peer(0, 3, false);
	wait_peer(2, 1, false);
	wait_peer(2, 2, false);
}
END_TEST

/*
 * A member listens before it adds its pool: its peers' hellos in between are
 * refused (no such pool yet) but are no false claim, so not counted as
 * authentication failures; once the pool is there the mesh comes up.
 */
START_TEST(hello_before_the_pool_is_added_is_not_a_refusal)
{
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = members[2].addr,
		.transport = "mem",
		.events = &member_events,
		.priv = (void *)(uintptr_t)2,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
	};
	struct rmr_server *early;
	static struct rmr_server_status ss;

	ck_assert_int_eq(rmr_server_create(&so, &early), 0);
	member_start_as(0, 1, &pool_uuid, key_a);
	member_start_as(1, 2, &pool_uuid, key_a);
	for (int k = 0; k < POLLS; k++) {
		ss.size = sizeof(ss);
		ck_assert_int_eq(rmr_server_status(early, &ss), 0);
		if (ss.rejected >= 2)
			break;
		usleep(10000);
	}
	ck_assert_uint_ge(ss.rejected, 2); /* members 1 and 2 dialed it */
	ck_assert_uint_eq(ss.auth_refused, 0);
	ck_assert_int_eq(atomic_load(&ev.count[2]), 0);
	rmr_server_destroy(early);

	member_start_as(2, 3, &pool_uuid, key_a);
	wait_mesh_up();
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_uint_eq(auth_refused(i), 0);
}
END_TEST

/* A client that asks for another pool UUID is refused and counted. */
START_TEST(wrong_pool_uuid_is_refused)
{
	struct rmr_client *c;
	rmr_uuid other;

	start_members(key_a, key_a, key_a);
	ck_assert_int_eq(rmr_uuid_generate(&other), 0);
	ck_assert_int_eq(open_client(key_a, &other, 800, &c), -ETIMEDOUT);
	wait_refused(0, 1);
	reason_has(0, "wrong pool UUID");
}
END_TEST

/*
 * Spoofing, with the right key: a second process claiming member 2 while
 * member 2 is up is refused; a process claiming an id that is no member's
 * is refused; once the real member 2 is gone, a restarted one gets in.
 */
START_TEST(spoofed_member_id_is_refused)
{
	unsigned x = NMEMBERS; /* the impostor's process */

	start_members(key_a, key_a, key_a);
	wait_mesh_up();
	member_start_as(x, 2, &pool_uuid, key_a);
	wait_refused(0, 1);
	wait_refused(2, 1);
	reason_has(0, "member id 2 is held by a live session");
	ck_assert_uint_eq(ev.last_claimed[0], 2);
	/* The impostor never got a session; the real member 2 still has its own. */
	wait_peer(x, 1, false);
	wait_peer(x, 3, false);
	wait_peer(1, 1, true);
	member_stop(x);

	/* An id that is not a member of the pool. */
	member_start_as(x, 9, &pool_uuid, key_a);
	wait_refused(0, 2);
	reason_has(0, "member id 9 is not another member");
	ck_assert_uint_eq(ev.last_claimed[0], 9);
	member_stop(x);

	/* A genuine restart of member 2 gets in again once its old session is gone. */
	member_stop(1);
	member_start_as(1, 2, &pool_uuid, key_a);
	wait_peer(1, 1, true);
	wait_peer(1, 3, true);
	wait_peer(0, 2, true);
}
END_TEST

/* A member claiming the receiver's own id: refused, counted. */
START_TEST(own_id_is_refused)
{
	unsigned x = NMEMBERS;
	/* Process x says it is member 1 and dials "member 2" at member 1's address. */
	struct rmr_peer peer = { .member_id = 2, .addr = members[0].addr };
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = members[x].addr,
		.transport = "mem",
		.events = &member_events,
		.priv = (void *)(uintptr_t)x,
	};
	struct rmr_pool_params pp = {
		.size = sizeof(pp),
		.name = "vol",
		.uuid = pool_uuid,
		.pool_size = POOL_SIZE,
		.chunk_size = CHUNK,
		.member_id = 1,
		.members_mask = MASK,
		.npeers = 1,
		.peers = &peer,
		.key = key_a,
	};

	start_members(key_a, key_a, key_a);
	ck_assert_int_eq(rmr_server_create(&so, &members[x].srv), 0);
	ck_assert_int_eq(rmr_server_add_pool(members[x].srv, &pp, &memstore_ops, &members[x].store,
					     &members[x].pool), 0);
	wait_refused(0, 1);
	reason_has(0, "member id 1 is not another member");
	ck_assert_uint_eq(ev.last_claimed[0], 1);
	wait_peer(x, 2, false);
}
END_TEST

/* --- a raw initiator: the wire as an attacker without the key speaks it --- */

static struct raw {
	const struct rmr_transport_ops *tops;
	void *tp;
	struct rmr_conn *conn;
	bool connected, closed;
	uint8_t msg[4096];
	size_t len;
	bool got;
	_Alignas(8) uint8_t out[512];
} raw;

static void raw_connected(void *ctx, void *conn_ctx, int status)
{
	(void)ctx;
	(void)conn_ctx;
	raw.connected = status == 0;
	raw.closed = status != 0;
}

/*
 * Keep the first message that answers: a member's heartbeat (sent once a
 * hello is answered, whenever its interval or a peer change comes) is not one.
 */
static void raw_recv(void *ctx, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct rmr_msg m;
	char why[128];
	bool heartbeat = rmr_wire_decode(buf, len, &m, why, sizeof(why)) == 0 &&
			 m.type == RMR_MSG_HEARTBEAT;

	(void)ctx;
	(void)conn_ctx;
	if (!raw.got && !heartbeat && len <= sizeof(raw.msg)) {
		memcpy(raw.msg, buf, len);
		raw.len = len;
		raw.got = true;
	}
	raw.tops->recv_release(raw.tp, raw.conn, rx);
}

static void raw_send_done(void *ctx, void *conn_ctx, void *op_ctx, int status)
{
	(void)ctx;
	(void)conn_ctx;
	(void)op_ctx;
	(void)status;
}

static void raw_closed(void *ctx, void *conn_ctx, int reason)
{
	(void)ctx;
	(void)conn_ctx;
	(void)reason;
	raw.closed = true;
}

static const struct rmr_transport_events raw_events = {
	.size = sizeof(raw_events),
	.connected = raw_connected,
	.recv = raw_recv,
	.send_done = raw_send_done,
	.closed = raw_closed,
};

/* Progress until @cond, or fail after about 20 s. */
#define RAW_UNTIL(cond)                                                   \
	do {                                                              \
		for (int k_ = 0; k_ < 10 * POLLS && !(cond); k_++) {      \
			raw.tops->progress(raw.tp);                       \
			usleep(1000);                                     \
		}                                                         \
	} while (0)

static void raw_open(unsigned i)
{
	struct rmr_transport_params tp = {
		.size = sizeof(tp), .max_msg = 4096, .rx_depth = 8, .tx_depth = 8, .name = "raw",
	};

	memset(&raw, 0, sizeof(raw));
	raw.tops = rmr_transport_find("mem");
	ck_assert_ptr_nonnull(raw.tops);
	ck_assert_int_eq(raw.tops->create(&tp, &raw_events, NULL, &raw.tp), 0);
	ck_assert_int_eq(raw.tops->connect(raw.tp, members[i].addr, &raw, &raw.conn), 0);
	RAW_UNTIL(raw.connected || raw.closed);
	ck_assert(raw.connected);
}

static void raw_close(void)
{
	raw.tops->close(raw.tp, raw.conn);
	raw.tops->destroy(raw.tp);
}

/* Send a message of @type from member id @sender with @payload; wait for the answer. */
static void raw_send(unsigned type, uint16_t sender, const void *payload, uint32_t len)
{
	struct rmr_msg m = { .type = type, .pool_uuid = pool_uuid, .sender_id = sender,
			     .payload_len = len };
	struct iovec iov = { .iov_base = raw.out, .iov_len = sizeof(struct rmr_wire_hdr) + len };

	if (type == RMR_MSG_READ)
		m.len = 4096;
	rmr_wire_encode((struct rmr_wire_hdr *)raw.out, &m);
	if (len)
		memcpy(raw.out + sizeof(struct rmr_wire_hdr), payload, len);
	raw.got = false;
	ck_assert_int_eq(raw.tops->send(raw.tp, raw.conn, &iov, 1, &raw), 0);
	RAW_UNTIL(raw.got || raw.closed);
}

static void raw_expect(unsigned type, int status, struct rmr_msg *m)
{
	char why[128];

	ck_assert(raw.got);
	ck_assert_int_eq(rmr_wire_decode(raw.msg, raw.len, m, why, sizeof(why)), 0);
	ck_assert_str_eq(rmr_msg_type_name(m->type), rmr_msg_type_name(type));
	ck_assert_int_eq(m->status, status);
}

/* A keyed hello of member @sender; the CHALLENGE's payload in @a. */
static void raw_hello(uint16_t sender, uint8_t nonce[RMR_NONCE_LEN], struct rmr_auth *a)
{
	struct rmr_hello h = { .role = RMR_ROLE_PEER, .queue_depth = 8, .max_io_size = 65536,
			       .heartbeat_ms = 50, .incarnation = 77, .flags = RMR_HELLO_AUTH };
	struct rmr_wire_hello w;
	struct rmr_msg m;
	char why[128];

	strcpy(h.pool_name, "vol");
	rmr_auth_nonce(h.nonce);
	memcpy(nonce, h.nonce, RMR_NONCE_LEN);
	rmr_wire_encode_hello(&w, &h);
	raw_send(RMR_MSG_HELLO, sender, &w, sizeof(w));
	raw_expect(RMR_MSG_CHALLENGE, 0, &m);
	ck_assert_uint_eq(m.sender_id, 1);
	ck_assert_int_eq(rmr_wire_decode_auth(&m, a, why, sizeof(why)), 0);
}

/* The last "refusing session" warning any server logged. */
static struct {
	pthread_mutex_t lock;
	char last[256];
} refusal = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void refusal_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	if (!strstr(msg, "refusing session"))
		return;
	pthread_mutex_lock(&refusal.lock);
	snprintf(refusal.last, sizeof(refusal.last), "%s", msg);
	pthread_mutex_unlock(&refusal.lock);
}

/* Send @m as it is (after the header: @payload of m->payload_len bytes); wait for an answer. */
static void raw_send_msg(const struct rmr_msg *m, const void *payload)
{
	struct iovec iov = { .iov_base = raw.out,
			     .iov_len = sizeof(struct rmr_wire_hdr) + m->payload_len };

	rmr_wire_encode((struct rmr_wire_hdr *)raw.out, m);
	if (m->payload_len)
		memcpy(raw.out + sizeof(struct rmr_wire_hdr), payload, m->payload_len);
	raw.got = false;
	ck_assert_int_eq(raw.tops->send(raw.tp, raw.conn, &iov, 1, &raw), 0);
	RAW_UNTIL(raw.got || raw.closed);
}

/* A client's hello to an open pool: 8 slots granted. */
static void raw_client_hello(struct rmr_wire_hello *w)
{
	struct rmr_hello h = { .role = RMR_ROLE_CLIENT, .queue_depth = 8, .max_io_size = 65536,
			       .heartbeat_ms = 50, .incarnation = 99 };
	struct rmr_msg m;

	strcpy(h.pool_name, "vol");
	rmr_wire_encode_hello(w, &h);
	raw_send(RMR_MSG_HELLO, 0, w, sizeof(*w));
	raw_expect(RMR_MSG_HELLO_RSP, 0, &m);
}

/*
 * Well-formed messages that break a session's rules, after a client's
 * hello: each closes that session with its reason logged and counted; the
 * member goes on serving (a real client writes afterwards).
 */
START_TEST(session_rules_close_the_session)
{
	static const struct {
		unsigned type;
		uint32_t slot, len;
		uint64_t addr;
		bool other_pool;
		const char *reason;
	} cases[] = {
		{ RMR_MSG_READ, 8, 4096, 0, false, "slot beyond the queue depth" },
		{ RMR_MSG_READ, 0, 4096, POOL_SIZE, false, "range beyond the pool" },
		{ RMR_MSG_READ, 0, 4096, POOL_SIZE - 2048, false, "range beyond the pool" },
		{ RMR_MSG_READ, 0, 4096, 0, true, "request for another pool" },
		{ RMR_MSG_SYNC_READ, 0, 4096, 0, false, "member-to-member request from a client" },
		{ RMR_MSG_MAP_GET, 0, 0, 0, false, "member-to-member request from a client" },
		{ RMR_MSG_WRITE_RSP, 0, 4096, 0, false, "answer sent to a server" },
		{ RMR_MSG_HELLO, 0, 0, 0, false, "second hello" },
	};
	static struct rmr_server_status ss;
	struct rmr_wire_hello w;
	struct rmr_client *c;
	uint8_t buf[4096] = { 7 };

	start_members(NULL, NULL, NULL);
	rmr_log_set_sink(refusal_sink, NULL, RMR_LOG_WARN);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rmr_msg m = { .type = cases[i].type, .pool_uuid = pool_uuid,
				     .slot = cases[i].slot, .addr = cases[i].addr,
				     .len = cases[i].len };
		uint64_t rejected;

		server_status(0, &ss);
		rejected = ss.rejected;
		raw_open(0);
		raw_client_hello(&w);
		if (cases[i].other_pool)
			ck_assert_int_eq(rmr_uuid_generate(&m.pool_uuid), 0);
		if (m.type == RMR_MSG_HELLO)
			m.payload_len = sizeof(w);
		raw_send_msg(&m, &w);
		RAW_UNTIL(raw.closed);
		ck_assert_msg(raw.closed, "case %u (%s): the session stays open", i,
			      cases[i].reason);
		ck_assert_msg(!raw.got, "case %u (%s): answered", i, cases[i].reason);
		raw_close();
		for (int k = 0; k < POLLS && ss.rejected == rejected; k++) {
			usleep(10000);
			server_status(0, &ss);
		}
		ck_assert_uint_eq(ss.rejected, rejected + 1);
		pthread_mutex_lock(&refusal.lock);
		ck_assert_msg(strstr(refusal.last, cases[i].reason),
			      "case %u: logged '%s', expected '%s'", i, refusal.last,
			      cases[i].reason);
		refusal.last[0] = '\0';
		pthread_mutex_unlock(&refusal.lock);
	}
	rmr_log_set_sink(NULL, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_ERR);
	/* The member still serves: a client opens and writes. */
	ck_assert_int_eq(open_client(NULL, NULL, 5000, &c), 0);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 0, buf, sizeof(buf)), 0);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(do_io(c, RMR_IO_READ, 0, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(buf[0], 7);
	rmr_client_close(c);
}
END_TEST

/*
 * Without the key: a forged proof, no proof at all (a request instead of the
 * AUTH), and a proof made with another key are refused before the hello
 * has any effect; the right key gets in.
 */
START_TEST(unauthenticated_initiator_is_refused)
{
	uint8_t ni[RMR_NONCE_LEN];
	struct rmr_auth a;
	struct rmr_auth_ctx ctx;
	struct rmr_wire_auth wa;
	struct rmr_msg m;

	start_members(key_a, key_a, key_a);
	ck_assert_int_eq(rmr_auth_init(), 0);

	/* A forged proof (random bytes). */
	raw_open(0);
	raw_hello(2, ni, &a);
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_auth_nonce(a.proof);
	rmr_wire_encode_auth(&wa, &a);
	raw_send(RMR_MSG_AUTH, 2, &wa, sizeof(wa));
	raw_expect(RMR_MSG_HELLO_RSP, -EACCES, &m);
	raw_close();
	wait_refused(0, 1);
	reason_has(0, "wrong pool key");

	/* No proof: a request right after the challenge. */
	raw_open(0);
	raw_hello(2, ni, &a);
	raw_send(RMR_MSG_READ, 2, NULL, 0);
	raw_expect(RMR_MSG_HELLO_RSP, -EACCES, &m);
	raw_close();
	wait_refused(0, 2);
	reason_has(0, "READ instead of AUTH");

	/* The member's proof replayed back as ours (reflection). */
	raw_open(0);
	raw_hello(3, ni, &a);
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_wire_encode_auth(&wa, &a);
	raw_send(RMR_MSG_AUTH, 3, &wa, sizeof(wa));
	raw_expect(RMR_MSG_HELLO_RSP, -EACCES, &m);
	raw_close();
	wait_refused(0, 3);

	/* A proof under another key. */
	raw_open(0);
	raw_hello(2, ni, &a);
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.initiator_nonce, ni, RMR_NONCE_LEN);
	memcpy(ctx.member_nonce, a.nonce, RMR_NONCE_LEN);
	ctx.pool_uuid = pool_uuid;
	ctx.role = RMR_ROLE_PEER;
	ctx.initiator_id = 2;
	ctx.member_id = 1;
	ck_assert(rmr_auth_check(key_a, RMR_AUTH_MEMBER, &ctx, a.proof)); /* the member proved it */
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_auth_proof(key_b, RMR_AUTH_INITIATOR, &ctx, a.proof);
	rmr_wire_encode_auth(&wa, &a);
	raw_send(RMR_MSG_AUTH, 2, &wa, sizeof(wa));
	raw_expect(RMR_MSG_HELLO_RSP, -EACCES, &m);
	raw_close();
	wait_refused(0, 4);

	/* An open hello (no proof offered) to a keyed pool. */
	{
		struct rmr_hello h = { .role = RMR_ROLE_CLIENT, .queue_depth = 8,
				       .max_io_size = 65536, .heartbeat_ms = 50, .incarnation = 5 };
		struct rmr_wire_hello w;

		strcpy(h.pool_name, "vol");
		rmr_wire_encode_hello(&w, &h);
		raw_open(0);
		raw_send(RMR_MSG_HELLO, 0, &w, sizeof(w));
		raw_expect(RMR_MSG_HELLO_RSP, -EACCES, &m);
		raw_close();
		wait_refused(0, 5);
		reason_has(0, "no pool key");
	}

	/*
	 * A hang-up after the challenge, no AUTH: refused, but not counted as
	 * a wrong key (an honest initiator whose deadline ran out does that).
	 */
	{
		static struct rmr_server_status ss;
		uint64_t rejected, refused;

		server_status(0, &ss);
		rejected = ss.rejected;
		refused = ss.auth_refused;
		raw_open(0);
		raw_hello(2, ni, &a);
		raw_close();
		for (int k = 0; k < POLLS && ss.rejected == rejected; k++) {
			usleep(10000);
			server_status(0, &ss);
		}
		ck_assert_uint_eq(ss.rejected, rejected + 1);
		ck_assert_uint_eq(ss.auth_refused, refused);
	}

	/*
	 * An AUTH refusing the member's proof, and the initiator gone at once:
	 * the member counts it and frees the session with nothing left to use
	 * (a use after free under ASan, in CI, before the fix).
	 */
	{
		struct rmr_msg rm = { .type = RMR_MSG_AUTH, .pool_uuid = pool_uuid, .sender_id = 2,
				      .payload_len = sizeof(wa), .status = -EACCES };
		struct iovec iov = { .iov_base = raw.out,
				     .iov_len = sizeof(struct rmr_wire_hdr) + sizeof(wa) };
		static const struct rmr_auth none;
		uint64_t before = auth_refused(0);

		raw_open(0);
		raw_hello(2, ni, &a);
		rmr_wire_encode((struct rmr_wire_hdr *)raw.out, &rm);
		rmr_wire_encode_auth((struct rmr_wire_auth *)(raw.out + sizeof(struct rmr_wire_hdr)),
				     &none);
		ck_assert_int_eq(raw.tops->send(raw.tp, raw.conn, &iov, 1, &raw), 0);
		raw_close();
		wait_refused(0, before + 1);
		reason_has(0, "another pool key");
	}

	/* The right key, for a member id not held by a live session: admitted. */
	member_stop(2); /* member 3 leaves; its id is free */
	for (int k = 0; k < POLLS && peer_up(0, 3); k++)
		usleep(10000);
	raw_open(0);
	raw_hello(3, ni, &a);
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.initiator_nonce, ni, RMR_NONCE_LEN);
	memcpy(ctx.member_nonce, a.nonce, RMR_NONCE_LEN);
	ctx.pool_uuid = pool_uuid;
	ctx.role = RMR_ROLE_PEER;
	ctx.initiator_id = 3;
	ctx.member_id = 1;
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_auth_proof(key_a, RMR_AUTH_INITIATOR, &ctx, a.proof);
	rmr_wire_encode_auth(&wa, &a);
	raw_send(RMR_MSG_AUTH, 3, &wa, sizeof(wa));
	raw_expect(RMR_MSG_HELLO_RSP, 0, &m);
	raw_close();
	ck_assert_uint_eq(auth_refused(0), 6); /* the five above, and the refusal */
}
END_TEST

/* --- a fake member: answers a hello with a proof it cannot make --- */

static struct fake {
	const struct rmr_transport_ops *tops;
	void *tp;
	struct rmr_conn *conn;       /* the newest; all are closed at the end */
	struct rmr_conn *conns[64];
	unsigned nconns;
	atomic_int hellos, auths, refusals;
	_Alignas(8) uint8_t out[256];
} fake;

static void *fake_accepted(void *ctx, struct rmr_conn *conn)
{
	(void)ctx;
	if (fake.nconns == 64)
		return NULL;
	fake.conn = fake.conns[fake.nconns++] = conn;
	return (void *)(uintptr_t)fake.nconns; /* its index + 1 */
}

static void fake_recv(void *ctx, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct rmr_conn *conn = fake.conns[(uintptr_t)conn_ctx - 1];
	struct rmr_msg m;
	char why[128];

	(void)ctx;
	if (rmr_wire_decode(buf, len, &m, why, sizeof(why)) == 0 && m.type == RMR_MSG_HELLO) {
		struct rmr_msg c = { .type = RMR_MSG_CHALLENGE, .pool_uuid = pool_uuid,
				     .sender_id = 3, .payload_len = sizeof(struct rmr_wire_auth) };
		struct iovec iov = { .iov_base = fake.out,
				     .iov_len = sizeof(struct rmr_wire_hdr) + c.payload_len };
		struct rmr_auth a;

		atomic_fetch_add(&fake.hellos, 1);
		rmr_auth_nonce(a.nonce);
		rmr_auth_nonce(a.proof); /* not a proof of anything */
		rmr_wire_encode((struct rmr_wire_hdr *)fake.out, &c);
		rmr_wire_encode_auth((void *)(fake.out + sizeof(struct rmr_wire_hdr)), &a);
		fake.tops->send(fake.tp, conn, &iov, 1, &fake);
	} else if (m.type == RMR_MSG_AUTH) {
		static const uint8_t zero[sizeof(struct rmr_wire_auth)];
		bool none = len == sizeof(struct rmr_wire_hdr) + sizeof(zero) &&
			    !memcmp((uint8_t *)buf + sizeof(struct rmr_wire_hdr), zero, sizeof(zero));

		/* A refusal proves nothing: no proof, all zero. */
		atomic_fetch_add(m.status == -EACCES && none ? &fake.refusals : &fake.auths, 1);
	}
	fake.tops->recv_release(fake.tp, conn, rx);
}

static void fake_closed(void *ctx, void *conn_ctx, int reason)
{
	(void)ctx;
	(void)conn_ctx;
	(void)reason; /* closed by the test thread at the end */
}

static const struct rmr_transport_events fake_events = {
	.size = sizeof(fake_events),
	.accepted = fake_accepted,
	.recv = fake_recv,
	.send_done = raw_send_done,
	.closed = fake_closed,
};

struct open_call {
	struct rmr_client *c;
	int ret;
};

static void *open_thread(void *arg)
{
	struct open_call *oc = arg;

	oc->ret = open_client(key_a, NULL, 3000, &oc->c); /* open_without: the fake */
	return NULL;
}

/*
 * The initiator checks the member's proof before it sends anything else: a
 * member that answers with a proof it cannot make gets no proof back
 * (nothing the fake could replay elsewhere), only the refusal (AUTH with
 * -EACCES, all zero), and is counted and failed by the client.
 */
START_TEST(client_checks_member_proof_first)
{
	struct rmr_transport_params tp = {
		.size = sizeof(tp), .max_msg = 4096, .rx_depth = 8, .tx_depth = 8, .name = "fake",
	};
	struct open_call oc = { 0 };
	pthread_t th;
	uint64_t refused;

	member_start_as(0, 1, &pool_uuid, key_a);
	member_start_as(1, 2, &pool_uuid, key_a);
	memset(&fake, 0, sizeof(fake));
	fake.tops = rmr_transport_find("mem");
	ck_assert_int_eq(fake.tops->create(&tp, &fake_events, NULL, &fake.tp), 0);
	ck_assert_int_eq(fake.tops->listen(fake.tp, members[2].addr), 0); /* "member 3" */
	open_without = 1ull << 3;
	ck_assert_int_eq(pthread_create(&th, NULL, open_thread, &oc), 0);
	for (int k = 0; k < 1500; k++) {
		fake.tops->progress(fake.tp);
		usleep(1000);
	}
	pthread_join(th, NULL);
	open_without = 0;
	ck_assert_int_eq(oc.ret, 0);
	ck_assert_int_ge(atomic_load(&fake.hellos), 1);
	ck_assert_int_eq(atomic_load(&fake.auths), 0);
	ck_assert_int_ge(atomic_load(&fake.refusals), 1);
	ck_assert_uint_eq(normal_members(oc.c, &refused), 2);
	ck_assert_uint_ge(refused, 1);
	rmr_client_close(oc.c);
	for (int k = 0; k < 50; k++) {
		fake.tops->progress(fake.tp);
		usleep(1000);
	}
	for (unsigned i = 0; i < fake.nconns; i++)
		fake.tops->close(fake.tp, fake.conns[i]);
	fake.tops->destroy(fake.tp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth_mem");
	TCase *tc = tcase_create("auth");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, right_key_works_and_refuses_nothing);
	tcase_add_test(tc, wrong_or_no_key_client_is_refused);
	tcase_add_test(tc, hello_before_the_pool_is_added_is_not_a_refusal);
	tcase_add_test(tc, keyed_client_refuses_member_without_the_key);
	tcase_add_test(tc, member_without_key_is_refused);
	tcase_add_test(tc, wrong_pool_uuid_is_refused);
	tcase_add_test(tc, spoofed_member_id_is_refused);
	tcase_add_test(tc, own_id_is_refused);
	tcase_add_test(tc, unauthenticated_initiator_is_refused);
	tcase_add_test(tc, client_checks_member_proof_first);
	tcase_add_test(tc, session_rules_close_the_session);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
