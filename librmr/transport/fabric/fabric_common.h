/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Internals of the libfabric transport, shared by its three files:
 *
 *   fabric.c      instance, domains, connect/listen/close, progress, waiting
 *   fabric_conn.c connections: buffers, send/receive, completions, failure
 *   fabric_msg.c  FI_EP_MSG providers (tcp, verbs): fi_listen/fi_accept/fi_connect
 *   fabric_shm.c  FI_EP_RDM provider shm, with connections emulated by a small
 *                 handshake carried in CQ-data control messages
 *   fabric_bundle.c tcp: the small messages of one loop turn to one peer go
 *                 as one provider message (a bundle)
 *
 * Design, from shared/reference/libfabric-nbd.md:
 * - Every connection owns its endpoint, CQ and EQ (MSG) or AV (shm). Closing a
 *   connection closes all of them, so no completion or event can ever point at
 *   a freed connection, and an shm peer that restarts always meets a freshly
 *   created endpoint (shm 1.17 crashes on av_remove/av_insert of a restarted
 *   peer; close+recreate is the recipe that works).
 * - Data progress is manual: nothing moves unless progress() reads the CQs and
 *   EQs. tcp and verbs give one wait fd per CQ/EQ; we gather them in one epoll
 *   fd. shm has no wait fd, so wait_fd() is -1 and the loop polls.
 * - Per connection, rx_depth receive buffers of max_msg bytes and tx_depth send
 *   slots are allocated at setup; the data path never allocates.
 * - Only this folder includes <rdma/...>.
 */
#ifndef RMR_TRANSPORT_FABRIC_COMMON_H
#define RMR_TRANSPORT_FABRIC_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <rmr/transport.h>

#include "transport/transports.h"

struct fab_conn;
/* Watch the peer process @pid (shm); see fab_conn.peer_pidfd. */
void fab_conn_watch_peer(struct fab_conn *c, pid_t pid);
/* True if the watched peer process has exited. */
bool fab_conn_peer_dead(const struct fab_conn *c);

#define FAB_FI_VERSION FI_VERSION(1, 17)
#define FAB_MAX_IOV 4        /* pieces per message, see transport.h */
#define FAB_ADDR_MAX 256     /* longest address string we accept */
#define FAB_SHM_NAME_MAX 64  /* longest shm address (a plain name) */
#define FAB_CQ_BATCH 16      /* completions read per fi_cq_read */
#define FAB_CQ_BUDGET 256    /* completions handled per connection per progress */
#define FAB_EQ_POLL_NS 1000000ull /* a busy loop reads settled EQs this often (fab_eq_turn) */
#define FAB_BUNDLE_BYTES (64u * 1024) /* largest bundle */
#define FAB_BUNDLE_MSG_MAX (16u * 1024) /* largest message that goes in one */
#define FAB_BUNDLES 4        /* bundles in flight per connection */
#define FAB_BUNDLE_DATA 0x524d5242u /* CQ data that marks a bundle ("RMRB") */

enum fab_kind {
	FAB_KIND_MSG, /* tcp, verbs: provider connections */
	FAB_KIND_SHM, /* shm: RDM, connections emulated here */
};

/* One opened fabric + domain, shared by every endpoint that lives on it. */
struct fab_domain {
	struct fab_domain *next;
	char *prov_name;
	char *fabric_name;
	char *domain_name;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	uint64_t mr_mode;   /* what the provider left set of what we asked */
	uint64_t next_key;  /* MR keys when the provider does not choose them */
	unsigned refs;
};

/*
 * Connection states. The failure path goes through FAILED (reason noted,
 * upcall still owed, made by progress) to DEAD (upcall made, waiting for the
 * core's close()).
 */
#define FAB_CONN_STATES(X)                                                    \
	X(CONNECTING) /* connect() issued, waiting for the peer */            \
	X(ACCEPTING)  /* accepted() upcall made, provider not yet connected */ \
	X(UP)                                                                 \
	X(FAILED)     /* error seen; connected(err) or closed(err) owed */     \
	X(DEAD)       /* that upcall made; waiting for close() */             \
	X(CLOSED)     /* close() called; memory freed after progress returns */

enum fab_conn_state {
#define FAB_X(s) FAB_CONN_##s,
	FAB_CONN_STATES(FAB_X)
#undef FAB_X
};

enum fab_op_kind { FAB_OP_RX, FAB_OP_TX, FAB_OP_BUNDLE };

/* Head of every operation we hand to libfabric. */
struct fab_op {
	struct fi_context2 ctx; /* first: the provider's scratch space */
	struct fab_conn *conn;  /* NULL for listener receives */
	enum fab_op_kind kind;
};

enum fab_rx_state {
	FAB_RX_IDLE,   /* not posted (connection dead or waiting to repost) */
	FAB_RX_POSTED, /* owned by the provider */
	FAB_RX_HELD,   /* arrived before the connection was announced up */
	FAB_RX_LENT,   /* owned by the core until recv_release */
	FAB_RX_SPLIT,  /* a bundle whose messages are being lent out */
};

struct fab_rx {
	struct fab_op op;
	void *buf;
	size_t len;           /* received length while HELD */
	enum fab_rx_state state;
	bool repost;          /* released but fi_recv said EAGAIN: retry */
	bool bundle;          /* HELD: it is a bundle */
	bool spare;           /* a copy of a bundle's message, never posted */
	struct fab_rx *next;  /* held list, free spares */
};

enum fab_tx_state {
	FAB_TX_FREE,
	FAB_TX_QUEUED,    /* waiting in the pending queue */
	FAB_TX_POSTED,    /* owned by the provider */
	FAB_TX_ABANDONED, /* failed towards the core while the provider may
			   * still own it: kept until the endpoint is closed */
	FAB_TX_DEFERRED,  /* small, waiting for the end of the turn (bundles) */
	FAB_TX_BUNDLED,   /* copied into a bundle the provider owns */
};

struct fab_tx {
	struct fab_op op;
	struct fab_tx *next; /* free list or pending queue */
	enum fab_tx_state state;
	void *op_ctx;
	struct iovec iov[FAB_MAX_IOV];
	void *desc[FAB_MAX_IOV];
	int iovcnt;
	void *bounce;        /* registered copy of the message (FI_MR_LOCAL) */
	bool bounced;        /* this message was copied into it */
};

/* Several small messages sent as one (fabric_bundle.c). */
struct fab_bundle {
	struct fab_op op;
	struct fab_bundle *next;   /* free list */
	char *buf;                 /* FAB_BUNDLE_BYTES, allocated at first use */
	size_t len;
	struct fab_tx *head;       /* its messages, in order (linked by tx->next) */
};

struct fab_tp;

struct fab_conn {
	struct fab_tp *tp;
	struct fab_conn *next;       /* tp->conns */
	unsigned id;                 /* for log lines */
	char peer[FAB_ADDR_MAX];     /* for log lines */
	enum fab_conn_state state;
	bool outgoing;               /* made by connect(): owes connected() */
	int fail_reason;             /* negative errno while FAILED/DEAD */
	bool announce_closed;        /* the failure upcall is closed(), not connected() */
	bool peer_gone;              /* shm: the peer said goodbye */
	void *ctx;                   /* the core's conn_ctx */

	struct fab_domain *dom;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_eq *eq;           /* MSG only */
	struct fid_av *av;           /* shm only */
	fi_addr_t peer_addr;         /* shm: where data goes; MSG: unused */
	fi_addr_t listen_addr;       /* shm connect: the listener, for the handshake */
	size_t tx_iov_limit;         /* pieces the provider takes per send */
	int cq_fd;                   /* registered in tp->epfd, or -1 */
	int eq_fd;

	/* Preallocated buffers and slots. */
	char *rx_mem;
	struct fid_mr *rx_mr;
	void *rx_desc;
	struct fab_rx *rx;
	char *tx_mem;                /* bounce buffers, NULL if not needed */
	struct fid_mr *tx_mr;
	void *tx_desc;
	struct fab_tx *tx;
	struct fab_tx *tx_free;
	struct fab_tx *pend_head;    /* FIFO of sends not yet accepted */
	struct fab_tx *pend_tail;
	struct fab_rx *held_head;    /* FIFO of receives before UP */
	struct fab_rx *held_tail;
	unsigned tx_posted;
	bool rx_repost_owed;

	/* Bundles (tcp, when the peer said it reads them: fab_hello). */
	size_t bundle_max;           /* largest bundle to send, 0 = none */
	struct fab_tx *defer_head;   /* small sends of this turn, in order */
	struct fab_tx *defer_tail;
	unsigned ndefer;
	size_t defer_bytes;          /* their size as a bundle */
	struct fab_bundle bundles[FAB_BUNDLES];
	struct fab_bundle *bundle_free;
	struct fab_rx *split;        /* a received bundle being lent out */
	size_t split_off, split_len;
	struct fab_rx *spares;       /* rx_depth of them; buffers allocated at first use */
	unsigned nspares;            /* used so far */
	unsigned spares_lent;
	unsigned rx_lent;            /* posted buffers lent to the core */
	bool spare_nomem;            /* a spare's allocation failed: wait for a release */
	struct fab_rx *spare_free;

	/* shm handshake */
	uint64_t cookie;
	unsigned ctl_owed;           /* control message type still to send, 0 none */
	struct timespec deadline;    /* CONNECTING: give up after this */
	char listen_region[FAB_SHM_NAME_MAX + 16]; /* the listener's region (connect) */
	char peer_region[128];       /* the peer endpoint's region */
	/*
	 * The peer's process. shm 1.17 sends by taking the receiver's region
	 * spinlock; a receiver killed while holding it leaves it held, and the
	 * next fi_sendmsg to it spins forever (seen: a member SIGKILLed under
	 * load hung the client's event loop). So no send goes to a peer whose
	 * process is gone; that leaves only a microsecond-wide race. A pidfd
	 * tells, also for a dead peer that nobody reaped yet (a zombie, which
	 * kill(pid, 0) still finds).
	 */
	int peer_pidfd;
	/*
	 * shm 1.17 sends a connection request with the first message to a new
	 * peer and answers -FI_EAGAIN until the peer processed it; the peer
	 * crashes if our region is gone by then. While one may be pending
	 * (tried, never reached), the endpoint must outlive close(): it lingers,
	 * CLOSED to the core, until a message gets through or the peer's region
	 * is gone.
	 */
	bool listen_tried, listen_reached;
	bool peer_tried, peer_reached;
};

struct fab_listener {
	struct fab_listener *next;
	char addr[FAB_ADDR_MAX];
	struct fab_domain *dom;
	int fd;                       /* registered in tp->epfd, or -1 */
	/* MSG */
	struct fid_pep *pep;
	struct fid_eq *eq;
	/* shm: an endpoint that only receives connect requests */
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fab_rx *rx;
	char *rx_mem;
	unsigned nrx;
};

struct fab_tp {
	struct rmr_transport_params params;
	struct rmr_transport_events ev;
	void *ev_ctx;
	char name[64];                /* for log lines */
	enum fab_kind kind;
	const char *prov;             /* "tcp", "verbs", "shm" */
	struct fi_info *hints;
	struct fi_info *shm_info;     /* shm: the provider's answer, endpoint template */
	int epfd;                     /* -1 for shm */
	struct fab_domain *domains;
	struct fab_conn *conns;
	struct fab_listener *listeners;
	unsigned next_conn_id;
	bool in_progress;             /* inside progress(): defer frees */
	bool reap_owed;               /* closed connections to free */
	bool work_owed;               /* failures/reposts/handshakes to finish */
	bool defer_owed;              /* a connection has small sends waiting */
	struct rmr_fabric_stats stats;
	int events;                   /* counted by the current progress call */
	uint64_t eq_due_ns;           /* MSG: read the EQs of listeners and live connections from then */
};

static inline struct fab_conn *fab_conn_of(struct rmr_conn *c)
{
	return (struct fab_conn *)c;
}

static inline struct rmr_conn *fab_rmr_conn(struct fab_conn *c)
{
	return (struct rmr_conn *)c;
}

/* fabric.c and fabric_conn.c */
int fab_errno(int fi_ret);
const char *fab_strerror(int fi_ret);
const char *fab_conn_state_name(enum fab_conn_state s);
void fab_conn_set_state(struct fab_conn *c, enum fab_conn_state to, const char *why);
struct fi_info *fab_hints_dup(struct fab_tp *tp);
int fab_domain_get(struct fab_tp *tp, struct fi_info *info, struct fab_domain **out);
void fab_domain_put(struct fab_tp *tp, struct fab_domain *dom);
struct fab_conn *fab_conn_alloc(struct fab_tp *tp, struct fab_domain *dom, const char *peer,
				bool outgoing);
int fab_conn_setup_buffers(struct fab_conn *c);
int fab_conn_post_receives(struct fab_conn *c);
void fab_conn_link(struct fab_conn *c);
void fab_conn_destroy(struct fab_conn *c);
void fab_conn_discard(struct fab_conn *c);
void fab_conn_teardown(struct fab_conn *c);
void fab_conn_fail(struct fab_conn *c, int reason, const char *why);
void fab_conn_up(struct fab_conn *c);
void fab_conn_resume_rx(struct fab_conn *c);
bool fab_conn_may_lend(const struct fab_conn *c);
void fab_conn_handle_cq(struct fab_conn *c, bool all);
void fab_conn_free(struct fab_conn *c);
void fab_conn_unlink(struct fab_conn *c);
bool fab_conn_finish_failure(struct fab_conn *c);
void fab_conn_flush_pending(struct fab_conn *c);
void fab_conn_repost(struct fab_conn *c);
int fab_send(void *tp, struct rmr_conn *conn, const struct iovec *iov, int iovcnt, void *op_ctx);
void fab_recv_release(void *tp, struct rmr_conn *conn, void *rx);
int fab_epoll_add(struct fab_tp *tp, struct fid *fid, int *fd_out);
void fab_epoll_del(struct fab_tp *tp, int *fd);
int fab_rx_post(struct fab_conn *c, struct fab_rx *rx);
int fab_deadline_passed(const struct timespec *deadline);
void fab_deadline_set(struct timespec *deadline, unsigned ms);
void fab_close_fid(struct fab_tp *tp, struct fid *fid, const char *what);

/* fabric_bundle.c */
/* Connection data: what this end tells the peer when connecting or accepting. */
#define FAB_HELLO_LEN 12
void fab_hello_encode(const struct fab_tp *tp, uint8_t out[FAB_HELLO_LEN]);
/* What the peer told: bundles to it are on from now if it reads them. */
void fab_hello_apply(struct fab_conn *c, const void *data, size_t len);
/* @p tx (@p len bytes) may wait for the end of the turn: true if it does. */
bool fab_bundle_defer(struct fab_conn *c, struct fab_tx *tx, size_t len);
/* Send @p c's waiting small sends: as one bundle if more than one. */
void fab_bundle_flush(struct fab_conn *c);
/* Every connection's (end of a progress call, before a sleep). */
void fab_bundle_flush_all(struct fab_tp *tp);
void fab_bundle_done(struct fab_conn *c, struct fab_bundle *b, int status);
/* Lend the messages of the bundle in @p rx, as far as spares allow. */
void fab_bundle_split(struct fab_conn *c, struct fab_rx *rx, size_t len);
void fab_bundle_split_resume(struct fab_conn *c);
bool fab_bundle_split_owed(const struct fab_conn *c);
void fab_bundle_spare_release(struct fab_conn *c, struct fab_rx *rx);
/* A sent or queued send of @p c, as if fab_send had just taken it. */
void fab_conn_post_or_queue(struct fab_conn *c, struct fab_tx *tx);
void fab_rx_done(struct fab_conn *c, struct fab_rx *rx);
void fab_bundle_free(struct fab_conn *c);

/* fabric_msg.c */
int fab_msg_listen(struct fab_tp *tp, const char *addr);
int fab_msg_connect(struct fab_tp *tp, const char *addr, void *conn_ctx, struct fab_conn **out);
void fab_msg_listener_progress(struct fab_tp *tp, struct fab_listener *l);
void fab_msg_conn_progress_eq(struct fab_conn *c);
void fab_msg_conn_shutdown(struct fab_conn *c);
void fab_msg_listener_close(struct fab_tp *tp, struct fab_listener *l);

/* fabric_shm.c */
int fab_shm_listen(struct fab_tp *tp, const char *addr);
int fab_shm_connect(struct fab_tp *tp, const char *addr, void *conn_ctx, struct fab_conn **out);
void fab_shm_listener_progress(struct fab_tp *tp, struct fab_listener *l);
void fab_shm_handle_ctl(struct fab_conn *c, struct fab_rx *rx, size_t len, uint64_t data);
void fab_shm_conn_progress(struct fab_conn *c);
bool fab_shm_conn_close(struct fab_conn *c);
void fab_shm_linger_progress(struct fab_conn *c);
void fab_shm_listener_close(struct fab_tp *tp, struct fab_listener *l);

#endif
