/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Client internals shared by client.c (pool, member sessions) and
 * client_io.c (request fan-out, ordering and completion). Everything here is
 * touched only on the client's event-loop thread, except the submission
 * queue (sub_lock) and the slot allocator.
 */
#ifndef RMR_CORE_CLIENT_INTERNAL_H
#define RMR_CORE_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rmr/client.h>
#include <rmr/transport.h>

#include "dirty_map.h"
#include "loop.h"
#include "poll_policy.h"
#include "slots.h"
#include "wire.h"

/* What a send's op_ctx points to: both kinds start with this tag. */
enum send_kind { SEND_LEG = 1, SEND_CTRL = 2 };

/* A member's part of one request. */
struct leg {
	uint8_t kind;            /* SEND_LEG */
	struct rmr_wire_hdr hdr; /* sent header; lives until send_done */
	bool sending;            /* handed to the transport, no send_done yet */
	bool waiting;            /* no answer yet */
	int status;              /* member's answer */
	uint64_t deadline;       /* ns */
};

enum slot_phase {
	SLOT_FREE,
	SLOT_QUEUED,   /* submitted, not yet seen by the loop */
	SLOT_BLOCKED,  /* waits for earlier overlapping writes */
	SLOT_SENT,     /* legs in flight */
	SLOT_MAP_ADD,  /* recording missed members on the members that have the write */
};

struct slot {
	uint32_t index;
	uint32_t seq;            /* generation: a stale answer never matches */
	enum slot_phase phase;
	struct rmr_io io;
	struct iovec iov[RMR_MAX_IOV];
	uint32_t data_len;       /* bytes in iov */
	uint64_t legs_mask;      /* member indexes addressed in this phase */
	uint64_t ok_mask;        /* member indexes that applied the write */
	bool applied;            /* some member applied the write (whatever became of its MAP_ADD) */
	uint64_t failed_mask;    /* member indexes that failed it */
	uint64_t tried_mask;     /* read: member indexes tried */
	uint64_t missed_ids;     /* write: member ids recorded as missing it */
	uint64_t holder_ids;     /* write: member ids that were sent it (may hold it) */
	uint64_t missed_counted; /* write: ids of @missed_ids counted in the client's in-flight misses */
	int first_err;
	uint64_t first_answer;   /* when the first of several answers came (poll_on_answer) */
	bool flush_ended;        /* a flush that ended while records were on their way: */
	int flush_status;        /* ... its status, told once they are on the others */
	unsigned deps;           /* earlier overlapping writes still in progress */
	bool has_dependents;
	struct slot *next;       /* submission queue / ordered-writes list */
	struct slot *prev;
	struct slot *ready_next; /* writes released by a finished one */
	void *bounce;            /* gathers writes of more than three iovecs */
	struct leg legs[RMR_MAX_MEMBERS];
};

/* Small control messages (HELLO, HEARTBEAT, GOODBYE, MEMBERSHIP) of one member session. */
struct ctrl_msg {
	uint8_t kind;            /* SEND_CTRL */
	struct rmr_wire_hdr hdr;
	union {
		struct rmr_wire_hello hello;
		struct rmr_wire_auth auth;
		uint8_t members[RMR_WIRE_MEMBERS_MAX];
	} body;
	bool sending;
};

/* A membership change the operator asked for (client_membership.c). */
enum mc_phase { MC_IDLE, MC_DRAIN, MC_CHECK, MC_COMMIT };
struct mchange {
	enum mc_phase phase;
	uint16_t id;                 /* the member added, removed or detached */
	bool add;                    /* add (or attach again); else remove */
	bool detach;                 /* remove: keep tracking what it misses */
	struct rmr_membership next;  /* the membership it makes */
	bool refused;                /* a member said no in the check */
	unsigned confirmed;          /* members that said yes in the check */
	unsigned applied;            /* members that took the commit */
	int result;
};

struct member {
	struct rmr_client *c;
	unsigned index;
	char addr[RMR_ADDR_MAX + 1];
	enum rmr_member_state state;
	char reason[64];
	uint16_t id;                 /* 0 until the first hello */
	struct rmr_conn *conn;
	void *rx_lent;               /* receive buffer being handled (released before close) */
	bool connected;              /* transport up */
	bool hello_done;
	bool resolved;               /* open: answered or failed at least once */
	uint64_t last_rx, last_tx;   /* ns */
	uint64_t hello_deadline;
	uint64_t next_connect;       /* ns; 0 = not scheduled */
	unsigned backoff_ms;
	uint64_t map_ver, incarnation;
	uint64_t boot_id;            /* its host's boot, as its hello said (0: unknown) */
	uint64_t left_boot;          /* ... when it last left NORMAL: its records' boot */
	uint64_t left_incarnation;   /* its process then (0: none yet) */
	uint64_t granted_epoch;      /* the writer epoch its last hello answer granted */
	uint64_t reported_missed;    /* member ids its own record says missed writes */
	uint64_t peers_up;           /* member ids it last said it holds a session with */
	unsigned tx_inflight;
	unsigned inflight;
	struct ctrl_msg hello, heartbeat, goodbye, pull, membership, auth;
	uint8_t nonce[RMR_NONCE_LEN]; /* ours, in the hello of a keyed client */
	bool authed;                 /* its CHALLENGE proved the key; our AUTH went out */
	bool auth_refusing;          /* it did not: our AUTH said so, its answer is awaited */
	uint16_t auth_id;            /* the member id its proof was for */
	bool maintenance;            /* the operator holds it out of I/O */
	bool want_pull;              /* missed writes: must take the maps before NORMAL */
	uint64_t settle_retry;       /* ns: it could not be the source then (still copying) */
	bool settle_blocked;         /* ... and it still lacks chunks of its log: see gather_start */
	bool gathered;               /* took every member's maps since it came back */
	bool pulling;                /* MAP_PULL sent, no answer yet */
	bool stale_al;               /* holds an activity log of a writer that crashed */
	bool reconciling;            /* RECONCILE sent, no answer yet (uses @pull) */
	bool busy;                   /* its last hello was refused: another writer holds the pool */
	uint64_t membership_ver;     /* the membership version it holds */
	bool pushing;                /* MEMBERSHIP sent to bring it up to date, no answer yet */
	uint64_t pushed_ver;         /* the version that push carries */
	bool mc_waiting;             /* MEMBERSHIP of an operator change sent, no answer yet */
	uint64_t mc_deadline;        /* ns */
	uint16_t pull_source;
	uint64_t pull_deadline;      /* ns */
	uint64_t pull_ver;           /* the client's map version in that MAP_PULL or RECONCILE */
	/*
	 * volatile_writes: chunks of writes it acknowledged that no flush of
	 * its covered yet (client_unflushed.c). @flushing holds those acked
	 * before the flush in flight (slot @flush_slot, @flush_seq) went out.
	 */
	struct dirty_map *unflushed, *flushing;
	bool flush_out;
	uint32_t flush_slot, flush_seq;
	bool unflushed_unknown;      /* a mark failed for memory: every chunk counts */
	/* counters */
	uint64_t reads, writes, read_bytes, write_bytes, errors, reconnects;
	uint64_t tx_bytes, rx_bytes, map_updates;
};

struct unflushed_record {
	uint16_t id;                 /* the member that may have lost them */
	uint64_t addr;               /* bytes, chunk aligned */
	uint32_t len;
	uint64_t boot;               /* its host's boot when it acknowledged them (0: unknown) */
};

struct rmr_client {
	struct rmr_client_opts opts;
	struct rmr_client_ops ops;
	char name[RMR_NAME_MAX + 1];
	bool keyed;                  /* sessions prove @key both ways (auth.h) */
	uint8_t key[RMR_KEY_LEN];
	uint64_t auth_refused;       /* sessions that failed authentication */
	const struct rmr_transport_ops *tops;
	void *tp;
	struct loop *loop;
	uint64_t incarnation;

	/* learnt from the members' hellos; all must agree */
	bool geometry_known;
	rmr_uuid uuid;
	uint64_t pool_size;
	uint32_t chunk_size;
	uint64_t members_ids;        /* every member id of the pool */
	uint32_t max_io_size;
	struct rmr_membership membership; /* the newest the members told, or the client made */
	struct mchange mc;           /* a membership change in progress: writes are held */
	uint64_t mc_version_used;    /* highest membership version ever proposed */
	pthread_mutex_t mc_call_lock; /* one membership call at a time (rmr_client_add_member...) */

	uint64_t map_ver;
	/*
	 * Member ids known to have missed writes: those this client saw miss
	 * one (@missed_live), and those any member's record names (its
	 * @reported_missed, from its hello and every heartbeat): a record
	 * emptied by the member's copies no longer holds it out.
	 */
	uint64_t missed_ids;
	uint64_t missed_live;        /* acknowledged writes missed them (until they take the maps) */
	uint16_t missed_inflight[RMR_MAX_MEMBER_ID + 1]; /* writes in flight that miss them */
	/*
	 * Open: members that hold a crashed writer's activity log converge on
	 * one source before any I/O (see open_reconcile). Set once done or
	 * not needed.
	 */
	bool reconciled;
	/*
	 * Open: the members heard from can show they hold every acknowledged
	 * write (open_proven). Until then nobody is admitted, nothing is
	 * reconciled; set once, for the client's life.
	 */
	bool proven;
	uint64_t heard_ids;          /* members whose hello this client accepted */
	bool open_admitted;          /* the open admitted members and waits for one to be NORMAL */
	/*
	 * Members that may hold writes of ours that no map records: every copy
	 * of such a write failed, or nobody was left to record who missed it
	 * (client_note_unsettled). Before they serve again they converge on one
	 * member (member_admit): the first back marks its activity log dirty for
	 * the others (RMR_RECONCILE_OWN); later ones mark their own log dirty
	 * when they take the maps (RMR_MAP_PULL_ABSORB).
	 */
	uint64_t unsettled_ids;
	bool settling;               /* that RECONCILE runs: admissions wait for it */
	/*
	 * No member current and each missed writes: @gatherer takes the maps
	 * of every other member (indexes in @gather_from still to go) before
	 * it serves; see gather_start.
	 */
	struct member *gatherer;
	uint64_t gather_from;
	uint64_t writer_epoch;       /* highest the members granted */
	bool fenced;                 /* a newer writer took the pool: every request fails */
	unsigned nmembers;
	struct member members[RMR_MAX_MEMBERS];
	unsigned rr_next;            /* round-robin cursor for reads */

	/* request slots */
	struct slot_pool slot_pool;
	struct slot *slots;
	uint32_t qd;

	/* submission queue, filled from any thread */
	pthread_mutex_t sub_lock;
	struct slot *sub_head, *sub_tail;

	/* writes not yet finished, in submission order (for overlap ordering) */
	struct slot *writes_head, *writes_tail;
	/*
	 * While a returning member takes the dirty maps, no write may be in
	 * flight: one that misses it could be marked after its map was copied.
	 * Writes ready to go wait here, in order.
	 */
	bool frozen;
	struct slot *held_head, *held_tail;

	/* open/close handshake with the caller's thread */
	pthread_mutex_t state_lock;
	pthread_cond_t state_cond;
	bool opening;
	bool open_done;
	int open_status;
	bool closing;
	bool said_goodbye;           /* close: sessions end, members leave without a departure */
	struct rmr_close_record *close_record; /* rmr_client_close_and_record: fill at the goodbye */
	bool has_last_close;         /* opts.last_close, kept in @last_close */
	struct rmr_close_record last_close;
	uint32_t inflight;           /* slots between submit and release */
	struct poll_policy poll;     /* when the loop polls for answers and requests (loop thread) */
	uint64_t open_deadline;

	/*
	 * volatile_writes: ranges of chunks that members left NORMAL with
	 * unflushed, to record on the others as missed by them (MAP_ADD), and
	 * the flushes that wait until that is done (client_unflushed.c).
	 */
	struct unflushed_record *records;
	unsigned nrecords, records_cap, records_inflight;
	bool records_sending;        /* unflushed_send_records runs */
	bool record_failed_at_once;  /* ... and the record it sent failed before it returned */
	bool records_held;           /* queued records count in @inflight (close waits) */
	struct unflushed_record record_out; /* the one in flight (the record slot's) */
	struct rmr_wire_record record_wire; /* ... its MAP_ADD's payload */
	uint32_t record_slot;        /* the slot records go in, outside the pool (UINT32_MAX: none) */
	struct slot *flush_wait_head, *flush_wait_tail;
};


/* client.c */
void member_fail(struct member *m, const char *reason);
void member_set_state(struct member *m, enum rmr_member_state to, const char *reason);
void member_connect(struct member *m);
void member_drop_conn(struct member *m);
void member_admit(struct member *m);
/* Writes of unknown outcome may be on members @ids, recorded nowhere. */
void client_note_unsettled(struct rmr_client *c, uint64_t ids);
/*
 * Write @s misses members @ids: they count as having missed writes while it
 * is in flight, and for good once some member applied it (acknowledged, or
 * failed because fewer than min_legs did: client_write_missed_done with
 * @applied): the members that applied it recorded them. A write that no
 * member is known to have applied leaves them as they were: its bytes are
 * undefined, and the members it reached converge through
 * client_note_unsettled.
 */
void client_write_missed(struct rmr_client *c, struct slot *s, uint64_t ids);
void client_write_missed_done(struct rmr_client *c, struct slot *s, bool applied);
/* Member @m's record names @ids as having missed writes (HELLO_RSP, HEARTBEAT...). */
void client_note_reported(struct member *m, uint64_t ids);
/* Member id @id took the maps: nobody's record holds it out any more. */
void client_forget_missed(struct rmr_client *c, unsigned id);
void client_missed_recompute(struct rmr_client *c);
int member_send_ctrl(struct member *m, struct ctrl_msg *cm, size_t body_len);
/* Writes are held (a map pull or a membership change waits for them to drain). */
static inline bool client_writes_held(const struct rmr_client *c)
{
	return c->frozen || c->mc.phase != MC_IDLE;
}
int member_send(struct member *m, const struct iovec *iov, int iovcnt, void *op_ctx);
unsigned client_normal_count(struct rmr_client *c);
/* Add @ids to the members recorded as having missed writes (and tell the consumer). */
void client_note_missed(struct rmr_client *c, uint64_t ids);
/* A member said another writer took the pool over: stop for good. */
void client_fence(struct rmr_client *c, const char *why);
/* Writes are frozen and may have drained: send the map pulls that wait. */
void client_try_pulls(struct rmr_client *c);

/* client_membership.c */
/*
 * A member answered its hello with membership @ms: take it if it is newer
 * (members join, leave or detach here), or note that the member must be
 * brought up to date before it is admitted. Returns false if the member is
 * not (or no longer) part of the pool: it was failed and will not be
 * dialed again.
 */
bool client_membership_hello(struct member *m, const struct rmr_membership *ms);
/* Bring @m's membership up to date before admission: true while that is under way. */
bool client_membership_push(struct member *m);
void client_membership_on_rsp(struct member *m, const struct rmr_msg *msg);
/* @m failed: an answer it owed is counted as a refusal. */
void client_membership_member_lost(struct member *m);
/* Periodic, and when writes drain: move a change along. */
void client_membership_step(struct rmr_client *c, uint64_t now);
/* The client closes: a change still running ends with -ESHUTDOWN. */
void client_membership_abort(struct rmr_client *c);

/* client_io.c */
void client_io_drain_submissions(struct rmr_client *c);
void client_io_on_response(struct rmr_client *c, struct member *m, const struct rmr_msg *msg);
void client_io_on_send_done(struct rmr_client *c, struct member *m, struct leg *leg, int status);
void client_io_member_lost(struct rmr_client *c, struct member *m);
void client_io_check_deadlines(struct rmr_client *c, uint64_t now);
int client_io_submit(struct rmr_client *c, const struct rmr_io *io, unsigned flags);
/* Is any write sent and not finished? */
bool client_io_writes_in_flight(const struct rmr_client *c);
/* End a freeze: send the writes held back, in order. */
void client_io_thaw(struct rmr_client *c);
/*
 * Have the NORMAL members record @r (MAP_ADD) in the record slot, whose end
 * calls unflushed_record_done(). -EAGAIN while the slot is busy.
 */
int client_io_send_record(struct rmr_client *c, const struct unflushed_record *r);
/* Count (or no longer) a request of the client's own in the ones close waits for. */
void client_io_hold(struct rmr_client *c);
bool client_io_unhold(struct rmr_client *c); /* @return: nothing is in flight */
/* Send a write again that waited (a flush behind records). */
void client_io_redispatch(struct rmr_client *c, struct slot *s);
/* Complete a flush whose end waited for records (s->flush_status). */
void client_io_end_flush(struct rmr_client *c, struct slot *s);

/* client_unflushed.c: what a member with a volatile store may lose to a power loss */
/* @m acknowledged a write of [@addr, @addr + @len). */
void unflushed_note_ack(struct member *m, uint64_t addr, uint32_t len);
/* Flush @s went out to @m / came back from it (@ok: it succeeded there). */
void unflushed_flush_sent(struct member *m, const struct slot *s);
void unflushed_flush_answered(struct member *m, const struct slot *s, bool ok);
/* @m left NORMAL for @to: queue its unflushed chunks as missed by it. */
void unflushed_member_left(struct member *m, enum rmr_member_state to);
/* Send the queued records while slots last (tick, and as records end). */
void unflushed_send_records(struct rmr_client *c);
/* A record's MAP_ADD finished: @status < 0, not every member took it. */
void unflushed_record_done(struct rmr_client *c, int status);
/* Records wait and some member is up to take them (a map pull waits for them). */
bool unflushed_records_sendable(const struct rmr_client *c);
/*
 * Flush @s must wait, to go out or (s->flush_ended) to complete: records
 * are queued or in flight. Takes it if so.
 */
bool unflushed_hold_flush(struct rmr_client *c, struct slot *s);
void unflushed_free(struct rmr_client *c);
/*
 * @m's queued records go back into what it holds unflushed: it came back
 * without losing its page cache, or it is what the others converge on.
 * Not lost, but at risk until its next flush. @return whether there were
 * any.
 */
bool unflushed_kept(struct member *m);
/* Records of member @id are queued or in flight: it may have lost writes. */
bool unflushed_pending(const struct rmr_client *c, uint16_t id);
/* For the status: chunks @m holds unflushed, and chunks queued to record about it. */
uint64_t unflushed_chunks(const struct member *m);
uint64_t unflushed_queued_chunks(const struct rmr_client *c, uint16_t id);
/* @m holds no write it acknowledged that no flush covered. */
bool unflushed_none(const struct member *m);

#endif
