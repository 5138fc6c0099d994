/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The librmr wire protocol: the one place that defines raw bytes.
 *
 * Every message is a 80-byte header followed by @c payload_len bytes. All
 * integers are little-endian, wrapped in types that do not convert silently;
 * every structure has explicit padding and a static size check. Opcodes are
 * never reused: a retired message type keeps its number.
 *
 * Versioning: @c version is RMR_WIRE_VERSION. A peer that receives another
 * version refuses the session (HELLO_RSP with -EPROTONOSUPPORT). Reserved
 * fields are sent as zero and refused when non-zero, so they can be given a
 * meaning later together with a version bump.
 *
 * Decoding (rmr_wire_decode) checks every field before the core sees it; the
 * core then works with struct rmr_msg in host order.
 */
#ifndef RMR_PROTO_WIRE_H
#define RMR_PROTO_WIRE_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rmr/rmr.h>

#define RMR_WIRE_MAGIC 0x31524d52u /* "RMR1" */
#define RMR_WIRE_VERSION 10
/* Largest payload of any message; the session's max_io_size is smaller. */
#define RMR_WIRE_MAX_PAYLOAD (4u << 20)

typedef struct { uint16_t v; } rmr_le16;
typedef struct { uint32_t v; } rmr_le32;
typedef struct { uint64_t v; } rmr_le64;

static inline rmr_le16 cpu_to_le16(uint16_t x) { return (rmr_le16){ htole16(x) }; }
static inline rmr_le32 cpu_to_le32(uint32_t x) { return (rmr_le32){ htole32(x) }; }
static inline rmr_le64 cpu_to_le64(uint64_t x) { return (rmr_le64){ htole64(x) }; }
static inline uint16_t le16_to_cpu(rmr_le16 x) { return le16toh(x.v); }
static inline uint32_t le32_to_cpu(rmr_le32 x) { return le32toh(x.v); }
static inline uint64_t le64_to_cpu(rmr_le64 x) { return le64toh(x.v); }

/* Message types. Numbers are never reused. */
#define RMR_MSG_TYPES(X)                                                         \
	X(HELLO, 1)         /* open a session: payload rmr_wire_hello */           \
	X(HELLO_RSP, 2)     /* payload rmr_wire_hello_rsp; status < 0 = refused */ \
	X(HEARTBEAT, 3)     /* no payload; any message proves liveness */         \
	X(READ, 4)          /* read-like request: addr, len; payload = argument */ \
	X(READ_RSP, 5)      /* status; payload <= len bytes if status == 0 */      \
	X(WRITE, 6)         /* write-like request: payload 0 or len bytes */       \
	X(WRITE_RSP, 7)     /* status */                                           \
	X(MAP_ADD, 8)       /* record members in @missed as having missed writes; */ \
	                    /* flags RMR_WIRE_MAP_ADD_RECORD: as maybe lost */      \
	X(MAP_ADD_RSP, 9)   /* status */                                           \
	X(GOODBYE, 10)      /* orderly close; status = reason */                  \
	X(MAP_PULL, 11)     /* client -> member: take the dirty maps from member @op */ \
	X(MAP_PULL_RSP, 12) /* status; map_ver = the member's map version after */ \
	X(MAP_GET, 13)      /* member -> member: maps from cursor (@op id, @addr chunk) */ \
	X(MAP_GET_RSP, 14)  /* payload rmr_wire_map_range[]; @op/@addr next cursor; */ \
	                    /* op_flags RMR_MAP_GET_LAST on the last page */        \
	X(SYNC_READ, 15)    /* member -> member: bytes of a chunk, for resync; */    \
	                    /* op RMR_SYNC_READ_LAST_RESORT */                        \
	X(SYNC_READ_RSP, 16) /* status; payload = len bytes if status == 0 */      \
	X(MAP_CLEAR, 17)    /* member -> member: sender holds [addr, addr+len) again */ \
	X(MAP_CLEAR_RSP, 18) /* status */                                        \
	X(RECONCILE, 19)    /* client -> member: the last writer exited uncleanly; */ \
	                    /* mark the activity log dirty for every other member */ \
	X(RECONCILE_RSP, 20) /* status; map_ver, missed = the member's after */ \
	X(CHUNK_SUM, 21)    /* member -> member: checksums of chunks [addr, addr+len) */ \
	X(CHUNK_SUM_RSP, 22) /* status; payload rmr_wire_chunk_sum[len] */        \
	X(MAP_MARK, 23)     /* member -> member: chunks [addr, addr+len) are dirty */ \
	                    /* for every member in @missed, the receiver too */   \
	X(MAP_MARK_RSP, 24) /* status */                                         \
	X(MEMBERSHIP, 25)   /* client -> member: the pool's membership, payload  */ \
	                    /* rmr_wire_members; op_flags RMR_MEMBERSHIP_CHECK    */ \
	X(MEMBERSHIP_RSP, 26) /* status */                                      \
	X(CHALLENGE, 27)    /* member -> initiator of a keyed pool: payload        */ \
	                    /* rmr_wire_auth (its nonce and proof of the key)      */ \
	X(AUTH, 28)         /* initiator -> member: payload rmr_wire_auth (proof)  */

enum rmr_msg_type {
#define RMR_X_MSG(name, num) RMR_MSG_##name = num,
	RMR_MSG_TYPES(RMR_X_MSG)
#undef RMR_X_MSG
};

const char *rmr_msg_type_name(unsigned type);

/* The header of every message. */
struct rmr_wire_hdr {
	rmr_le32 magic;         /* RMR_WIRE_MAGIC */
	rmr_le16 version;       /* RMR_WIRE_VERSION */
	rmr_le16 type;          /* enum rmr_msg_type */
	uint8_t pool_uuid[16];  /* pool the message is about (zero in a HELLO by name) */
	rmr_le16 sender_id;     /* member id of the sender, 0 for a client */
	rmr_le16 op;            /* consumer opcode (READ, WRITE) */
	rmr_le32 op_flags;      /* consumer flags (READ, WRITE) */
	rmr_le32 slot;          /* request slot (mem_id), echoed in the response */
	rmr_le32 seq;           /* slot generation, echoed in the response */
	rmr_le64 map_ver;       /* sender's map version */
	rmr_le64 addr;          /* first byte of the range */
	rmr_le32 len;           /* bytes in the range */
	rmr_le32 payload_len;   /* bytes after the header */
	rmr_le64 missed;        /* member ids (bit n = id n) that miss this write */
	rmr_le32 status;        /* responses: 0 or a negative errno; requests: 0 */
	rmr_le32 flags;         /* WRITE: RMR_WIRE_WRITE_*; MAP_ADD: RMR_WIRE_MAP_ADD_*; else zero */
};
_Static_assert(sizeof(struct rmr_wire_hdr) == 80, "wire header size");
_Static_assert(offsetof(struct rmr_wire_hdr, map_ver) == 40, "wire header layout");
_Static_assert(offsetof(struct rmr_wire_hdr, missed) == 64, "wire header layout");

#define RMR_ROLE_CLIENT 1
#define RMR_ROLE_PEER 2

/* WRITE flags: rmr_io.flags on the wire. */
#define RMR_WIRE_WRITE_PATCH 1u      /* RMR_IO_PATCH: payload 1..max io, any range length */
#define RMR_WIRE_WRITE_FLAGS RMR_WIRE_WRITE_PATCH

/*
 * MAP_ADD flags. RMR_WIRE_MAP_ADD_RECORD: the members in @missed did not
 * miss these writes, but acknowledged them with no flush covering them
 * since: they may have lost them to a power loss of their host. Kept as
 * records (RECORD_BIT), not as misses: such a member copies the chunks in
 * when it is back, and is the holder of last resort until then.
 */
#define RMR_WIRE_MAP_ADD_RECORD 1u
#define RMR_WIRE_MAP_ADD_FLAGS RMR_WIRE_MAP_ADD_RECORD

/*
 * The payload of a MAP_ADD with RMR_WIRE_MAP_ADD_RECORD: the boot of the
 * recorded members' host when they acknowledged those writes
 * (rmr_pool_params.boot_id, as their HELLO_RSP said; 0: unknown). While a
 * member runs in that boot still, its page cache kept them: the record is
 * void (it holds those chunks for sure).
 */
struct rmr_wire_record {
	rmr_le64 boot;
};
_Static_assert(sizeof(struct rmr_wire_record) == 8, "record payload size");

/*
 * SYNC_READ op: the copier found no member that holds the chunk for sure,
 * and asks one that holds it unless it lost it to a power loss (a record):
 * serve the chunk even if it is dirty here only because of such a record.
 */
#define RMR_SYNC_READ_LAST_RESORT 1u

/* HELLO flags. */
#define RMR_HELLO_TAKEOVER 1u        /* client: fence the current writer, take the pool */
#define RMR_HELLO_AUTH 2u            /* the sender holds a pool key: nonce is set */
#define RMR_HELLO_FLAGS (RMR_HELLO_TAKEOVER | RMR_HELLO_AUTH)

/* Bytes of a session nonce and of a proof of the pool key (HMAC-SHA-256). */
#define RMR_NONCE_LEN 32
#define RMR_PROOF_LEN 32

/* HELLO payload: who is connecting and what it asks for. */
struct rmr_wire_hello {
	rmr_le32 role;               /* RMR_ROLE_CLIENT or RMR_ROLE_PEER */
	rmr_le32 queue_depth;        /* slots the sender will use */
	rmr_le32 max_io_size;        /* largest request the sender will send */
	rmr_le32 heartbeat_ms;       /* sender's heartbeat interval */
	rmr_le64 incarnation;        /* random per process: a restart changes it */
	char pool_name[RMR_NAME_MAX + 1]; /* NUL-terminated, NUL-padded */
	rmr_le32 flags;              /* RMR_HELLO_* */
	rmr_le32 reserved;           /* zero */
	rmr_le64 writer_epoch;       /* client: epoch it holds, 0 when it opens; peer: 0 */
	uint8_t nonce[RMR_NONCE_LEN]; /* RMR_HELLO_AUTH: fresh random, not all zero; else zero */
};
_Static_assert(sizeof(struct rmr_wire_hello) == 136, "hello size");

/*
 * CHALLENGE and AUTH payload. CHALLENGE (member -> initiator): the member's
 * fresh nonce and its proof of the pool key; AUTH (initiator -> member): the
 * initiator's proof, nonce zero. See rmr_auth_proof() in auth.h.
 */
struct rmr_wire_auth {
	uint8_t nonce[RMR_NONCE_LEN];  /* CHALLENGE: not all zero; AUTH: zero */
	uint8_t proof[RMR_PROOF_LEN];
};
_Static_assert(sizeof(struct rmr_wire_auth) == 64, "auth size");

/* HELLO_RSP flags. */
#define RMR_HELLO_RSP_STALE_AL 1u    /* activity log of another writer: reconcile first */
#define RMR_HELLO_RSP_FLAGS RMR_HELLO_RSP_STALE_AL

/* HELLO_RSP payload: the member's identity and view of the pool. */
struct rmr_wire_hello_rsp {
	rmr_le16 member_id;          /* 1..RMR_MAX_MEMBER_ID */
	rmr_le16 flags;              /* RMR_HELLO_RSP_* */
	rmr_le32 chunk_size;         /* power of two */
	rmr_le64 pool_size;          /* bytes */
	rmr_le64 map_ver;            /* member's map version */
	rmr_le64 missed;             /* members the member knows missed writes */
	rmr_le64 members;            /* every member id of the pool (bit n = id n) */
	rmr_le32 queue_depth;        /* slots granted (<= asked) */
	rmr_le32 max_io_size;        /* largest request accepted (<= asked) */
	rmr_le64 incarnation;        /* member process incarnation */
	char pool_name[RMR_NAME_MAX + 1];
	rmr_le64 writer_epoch;       /* client session: the writer epoch granted */
	rmr_le64 boot_id;            /* the member host's boot (0: unknown); version 9 */
};
_Static_assert(sizeof(struct rmr_wire_hello_rsp) == 136, "hello_rsp size");

/* MAP_GET_RSP: this page ends the transfer. */
#define RMR_MAP_GET_LAST 1u

/*
 * MAP_GET_RSP payload entry: member @member_id misses chunks
 * [first, first + count). Entries come ordered by member id, then chunk.
 */
struct rmr_wire_map_range {
	rmr_le16 member_id;          /* 1..RMR_MAX_MEMBER_ID */
	rmr_le16 flags;              /* RMR_MAP_RANGE_* */
	rmr_le32 count;              /* >= 1 (0 with a version) */
	rmr_le64 first;              /* first chunk (the value with RMR_MAP_RANGE_VALUES) */
};
_Static_assert(sizeof(struct rmr_wire_map_range) == 16, "map range size");

/*
 * MAP_GET_RSP entry flags. RMR_MAP_RANGE_MARK_VER: not a range but the map
 * version of the newest mark the sender holds for @member_id (in @first),
 * sent before that member's ranges: the taker may accept that member's
 * MAP_CLEARs from that version on.
 */
#define RMR_MAP_RANGE_MARK_VER 1u
/*
 * ... RMR_MAP_RANGE_PULLED_VER: not a range; sent with the sender's own map,
 * after its mark version: every mark made for the sender up to this map
 * version (in @first) is in its own map (its last map pull, or the version
 * at which it became the source of writes of unknown outcome).
 */
#define RMR_MAP_RANGE_PULLED_VER 2u
/*
 * ... RMR_MAP_RANGE_RECORD: a range of records, not of misses: @member_id
 * may have lost these chunks to a power loss of its host (MAP_ADD's
 * RMR_WIRE_MAP_ADD_RECORD).
 */
#define RMR_MAP_RANGE_RECORD 4u
/*
 * ... RMR_MAP_RANGE_RECORD_BOOT: not a range; the boot every record the
 * sender holds of @member_id was made in (in @first; rmr_wire_record),
 * sent after the mark version when that member has records and they
 * share one. Without it they count whatever boot the member runs in.
 */
#define RMR_MAP_RANGE_RECORD_BOOT 8u
/*
 * ... RMR_MAP_RANGE_RECORD_OLD, with RMR_MAP_RANGE_RECORD only: records made
 * in another boot than the one the RMR_MAP_RANGE_RECORD_BOOT entry names
 * (an older one): they count whatever boot the member runs in.
 */
#define RMR_MAP_RANGE_RECORD_OLD 16u
/* Entries that carry a value in @first, not a range. */
#define RMR_MAP_RANGE_VALUES \
	(RMR_MAP_RANGE_MARK_VER | RMR_MAP_RANGE_PULLED_VER | RMR_MAP_RANGE_RECORD_BOOT)
#define RMR_MAP_RANGE_FLAGS (RMR_MAP_RANGE_VALUES | RMR_MAP_RANGE_RECORD | RMR_MAP_RANGE_RECORD_OLD)

/* A decoded map range. */
struct rmr_map_range {
	uint16_t member_id;
	uint16_t flags;
	uint32_t count;
	uint64_t first;
};

/* CHUNK_SUM_RSP entry flags. */
#define RMR_SUM_DIRTY 1u             /* the answering member misses this chunk: no checksum */
#define RMR_SUM_FLAGS RMR_SUM_DIRTY

/* One entry of a CHUNK_SUM_RSP: a chunk's CRC-32C as the answering member holds it. */
struct rmr_wire_chunk_sum {
	rmr_le32 crc;
	rmr_le32 flags;              /* RMR_SUM_* */
};
_Static_assert(sizeof(struct rmr_wire_chunk_sum) == 8, "chunk sum size");

/*
 * A pool's membership: every member id with its address, versioned. It
 * follows the HELLO_RSP payload and is the MEMBERSHIP payload: a
 * rmr_wire_members header, then @count rmr_wire_member entries.
 */
#define RMR_WIRE_MEMBER_DETACHED 1u      /* out of the pool's I/O; the others track what it misses */
#define RMR_WIRE_MEMBER_FLAGS RMR_WIRE_MEMBER_DETACHED
/* MEMBERSHIP op_flags: only check that the change may be made (-EBUSY if not). */
#define RMR_MEMBERSHIP_CHECK 1u
/*
 * RECONCILE op_flags: the client's own writes may have reached some members
 * only (every copy of a write failed with its outcome unknown): mark the
 * ranges of the log of the writer asking, not only those of a stale one.
 */
#define RMR_RECONCILE_OWN 1u
/* MAP_PULL op_flags: the same; this member marks its own log's ranges dirty too. */
#define RMR_MAP_PULL_ABSORB 1u
/*
 * MAP_PULL op_flags: no member is current, and each missed writes. The
 * maps are taken from every other member in turn (`op` is 0) and added to
 * what this member has on record rather than replacing it: it then knows
 * all that any of them knows (client.c, gather_start).
 */
#define RMR_MAP_PULL_ALL 2u
#define RMR_MAP_PULL_FLAGS (RMR_MAP_PULL_ABSORB | RMR_MAP_PULL_ALL)

struct rmr_wire_members {
	rmr_le64 version;            /* 0: as the stores were formatted */
	rmr_le32 count;              /* 1..RMR_MAX_MEMBERS entries follow */
	rmr_le32 reserved;           /* zero */
};
_Static_assert(sizeof(struct rmr_wire_members) == 16, "members header size");

struct rmr_wire_member {
	rmr_le16 id;                 /* 1..RMR_MAX_MEMBER_ID, unique */
	rmr_le16 flags;              /* RMR_WIRE_MEMBER_* */
	rmr_le32 reserved;           /* zero */
	char addr[RMR_ADDR_MAX + 1]; /* where its server listens; NUL-padded, not empty */
	rmr_le32 reserved2;          /* zero */
};
_Static_assert(sizeof(struct rmr_wire_member) == 120, "member entry size");

#define RMR_WIRE_MEMBERS_MAX \
	(sizeof(struct rmr_wire_members) + RMR_MAX_MEMBERS * sizeof(struct rmr_wire_member))

/* The address of a member that this member was not told where to reach. */
#define RMR_ADDR_UNKNOWN "?"
static inline bool rmr_addr_known(const char *addr)
{
	return addr[0] && strcmp(addr, RMR_ADDR_UNKNOWN) != 0;
}

/* A decoded membership. */
struct rmr_member_entry {
	uint16_t id;
	bool detached;
	char addr[RMR_ADDR_MAX + 1];
};
struct rmr_membership {
	uint64_t version;
	unsigned n;
	struct rmr_member_entry m[RMR_MAX_MEMBERS];
};

/* A decoded message, in host order. */
struct rmr_msg {
	unsigned type;
	rmr_uuid pool_uuid;
	uint16_t sender_id;
	uint16_t op;
	uint32_t op_flags;
	uint32_t slot;
	uint32_t seq;
	uint64_t map_ver;
	uint64_t addr;
	uint32_t len;
	uint32_t payload_len;
	uint64_t missed;
	int32_t status;
	uint32_t flags;      /* WRITE: RMR_WIRE_WRITE_* */
	const void *payload; /* points into the received buffer */
};

/* Decoded HELLO / HELLO_RSP / CHALLENGE / AUTH payloads. */
struct rmr_hello {
	uint32_t role, queue_depth, max_io_size, heartbeat_ms, flags;
	uint64_t incarnation, writer_epoch;
	char pool_name[RMR_NAME_MAX + 1];
	uint8_t nonce[RMR_NONCE_LEN];
};
struct rmr_auth {
	uint8_t nonce[RMR_NONCE_LEN];
	uint8_t proof[RMR_PROOF_LEN];
};
struct rmr_hello_rsp {
	uint16_t member_id, flags;
	uint64_t writer_epoch;
	uint32_t chunk_size;
	uint64_t pool_size, map_ver, missed, members;
	uint32_t queue_depth, max_io_size;
	uint64_t incarnation;
	uint64_t boot_id;                 /* rmr_pool_params.boot_id */
	char pool_name[RMR_NAME_MAX + 1];
	struct rmr_membership membership; /* the member's view of the pool's members */
};

/*
 * Check and decode a received message. On failure returns -EBADMSG (or
 * -EPROTONOSUPPORT for another protocol version) and writes a one-line
 * reason to @why.
 */
int rmr_wire_decode(const void *buf, size_t len, struct rmr_msg *m, char *why, size_t whylen);

/* Encode @m's header (payload_len included) into @hdr. */
void rmr_wire_encode(struct rmr_wire_hdr *hdr, const struct rmr_msg *m);

/* Payload codecs: decode returns 0 or -EBADMSG with a reason. */
void rmr_wire_encode_map_range(struct rmr_wire_map_range *w, const struct rmr_map_range *r);
/* Decode entry @i of a MAP_GET_RSP (i < payload_len / 16). */
int rmr_wire_decode_map_range(const struct rmr_msg *m, size_t i, struct rmr_map_range *r,
			      char *why, size_t whylen);
/* Entry @i of a CHUNK_SUM_RSP (i < len): 0, or -EBADMSG for unknown flags. */
int rmr_wire_decode_chunk_sum(const struct rmr_msg *m, size_t i, uint32_t *crc,
			      uint32_t *flags, char *why, size_t whylen);
void rmr_wire_encode_chunk_sum(struct rmr_wire_chunk_sum *w, uint32_t crc, uint32_t flags);
/* Encode @ms into @buf (RMR_WIRE_MEMBERS_MAX bytes); returns the bytes used. */
size_t rmr_wire_encode_members(void *buf, const struct rmr_membership *ms);
/* Decode exactly @len bytes of membership: 0, or -EBADMSG with a reason. */
int rmr_wire_decode_members(const void *buf, size_t len, struct rmr_membership *ms, char *why,
			    size_t whylen);
/* The entry of member @id in @ms, or NULL. */
const struct rmr_member_entry *rmr_membership_find(const struct rmr_membership *ms,
						   uint16_t id);
/* Every member id of @ms (bit n = id n), detached ones included. */
uint64_t rmr_membership_ids(const struct rmr_membership *ms);
void rmr_wire_encode_hello(struct rmr_wire_hello *w, const struct rmr_hello *h);
int rmr_wire_decode_hello(const struct rmr_msg *m, struct rmr_hello *h, char *why, size_t whylen);
/* Encode @h and its membership into @buf; returns the payload bytes. */
size_t rmr_wire_encode_hello_rsp(void *buf, const struct rmr_hello_rsp *h);
int rmr_wire_decode_hello_rsp(const struct rmr_msg *m, struct rmr_hello_rsp *h, char *why,
			      size_t whylen);
void rmr_wire_encode_auth(struct rmr_wire_auth *w, const struct rmr_auth *a);
/* A CHALLENGE (nonce not all zero) or an AUTH (nonce zero). */
/* The boot a record MAP_ADD (checked by rmr_wire_decode) carries; 0 for any other message. */
uint64_t rmr_wire_decode_record(const struct rmr_msg *m);
int rmr_wire_decode_auth(const struct rmr_msg *m, struct rmr_auth *a, char *why, size_t whylen);

#endif
