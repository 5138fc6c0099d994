/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Encoding and validation of wire messages; see wire.h. */
#include "wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *rmr_msg_type_name(unsigned type)
{
	switch (type) {
#define RMR_X_NAME(name, num) case num: return #name;
	RMR_MSG_TYPES(RMR_X_NAME)
#undef RMR_X_NAME
	}
	return "UNKNOWN";
}

__attribute__((format(printf, 3, 4)))
static int reject(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

static bool is_request(unsigned type)
{
	return type == RMR_MSG_HELLO || type == RMR_MSG_READ || type == RMR_MSG_WRITE ||
	       type == RMR_MSG_MAP_ADD || type == RMR_MSG_HEARTBEAT || type == RMR_MSG_MAP_PULL ||
	       type == RMR_MSG_MAP_GET || type == RMR_MSG_SYNC_READ || type == RMR_MSG_MAP_CLEAR ||
	       type == RMR_MSG_RECONCILE || type == RMR_MSG_CHUNK_SUM || type == RMR_MSG_MAP_MARK ||
	       type == RMR_MSG_MEMBERSHIP || type == RMR_MSG_AUTH;
}

static bool is_response(unsigned type)
{
	return type == RMR_MSG_HELLO_RSP || type == RMR_MSG_READ_RSP ||
	       type == RMR_MSG_WRITE_RSP || type == RMR_MSG_MAP_ADD_RSP ||
	       type == RMR_MSG_MAP_PULL_RSP || type == RMR_MSG_MAP_GET_RSP ||
	       type == RMR_MSG_SYNC_READ_RSP || type == RMR_MSG_MAP_CLEAR_RSP ||
	       type == RMR_MSG_RECONCILE_RSP || type == RMR_MSG_CHUNK_SUM_RSP ||
	       type == RMR_MSG_MAP_MARK_RSP || type == RMR_MSG_MEMBERSHIP_RSP ||
	       type == RMR_MSG_CHALLENGE;
}

static bool all_zero(const uint8_t *b, size_t n)
{
	uint8_t acc = 0;

	for (size_t i = 0; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

/* Member-id masks may only name ids 1..RMR_MAX_MEMBER_ID. */
static bool mask_valid(uint64_t mask)
{
	return (mask & 1) == 0;
}

int rmr_wire_decode(const void *buf, size_t len, struct rmr_msg *m, char *why, size_t whylen)
{
	struct rmr_wire_hdr h;

	if (len < sizeof(h))
		return reject(why, whylen, "message of %zu bytes is shorter than a header", len);
	memcpy(&h, buf, sizeof(h));

	if (le32_to_cpu(h.magic) != RMR_WIRE_MAGIC)
		return reject(why, whylen, "bad magic 0x%08x", le32_to_cpu(h.magic));
	if (le16_to_cpu(h.version) != RMR_WIRE_VERSION) {
		reject(why, whylen, "protocol version %u, expected %u", le16_to_cpu(h.version),
		       RMR_WIRE_VERSION);
		return -EPROTONOSUPPORT;
	}

	memset(m, 0, sizeof(*m));
	m->type = le16_to_cpu(h.type);
	memcpy(m->pool_uuid.b, h.pool_uuid, sizeof(m->pool_uuid.b));
	m->sender_id = le16_to_cpu(h.sender_id);
	m->op = le16_to_cpu(h.op);
	m->op_flags = le32_to_cpu(h.op_flags);
	m->slot = le32_to_cpu(h.slot);
	m->seq = le32_to_cpu(h.seq);
	m->map_ver = le64_to_cpu(h.map_ver);
	m->addr = le64_to_cpu(h.addr);
	m->len = le32_to_cpu(h.len);
	m->payload_len = le32_to_cpu(h.payload_len);
	m->missed = le64_to_cpu(h.missed);
	m->status = (int32_t)le32_to_cpu(h.status);
	m->flags = le32_to_cpu(h.flags);
	m->payload = (const char *)buf + sizeof(h);

	if (!is_request(m->type) && !is_response(m->type) && m->type != RMR_MSG_GOODBYE)
		return reject(why, whylen, "unknown message type %u", m->type);
	if (m->flags && m->type != RMR_MSG_WRITE && m->type != RMR_MSG_MAP_ADD)
		return reject(why, whylen, "%s: flags 0x%x in a message that has none",
			      rmr_msg_type_name(m->type), m->flags);
	if (m->sender_id > RMR_MAX_MEMBER_ID)
		return reject(why, whylen, "%s: sender id %u out of range",
			      rmr_msg_type_name(m->type), m->sender_id);
	if (m->payload_len != len - sizeof(h))
		return reject(why, whylen, "%s: payload_len %u but %zu bytes follow the header",
			      rmr_msg_type_name(m->type), m->payload_len, len - sizeof(h));
	if (m->payload_len > RMR_WIRE_MAX_PAYLOAD)
		return reject(why, whylen, "%s: payload of %u bytes is too large",
			      rmr_msg_type_name(m->type), m->payload_len);
	/*
	 * Writes without data (trim) or with a patch, their MAP_ADD, the answers
	 * that echo their range, and MAP_CLEAR may cover large ranges.
	 */
	if (m->len > RMR_WIRE_MAX_PAYLOAD && m->type != RMR_MSG_WRITE &&
	    m->type != RMR_MSG_WRITE_RSP && m->type != RMR_MSG_MAP_ADD_RSP &&
	    m->type != RMR_MSG_MAP_ADD && m->type != RMR_MSG_MAP_CLEAR &&
	    m->type != RMR_MSG_MAP_CLEAR_RSP && m->type != RMR_MSG_MAP_MARK &&
	    m->type != RMR_MSG_MAP_MARK_RSP && m->type != RMR_MSG_CHUNK_SUM &&
	    m->type != RMR_MSG_CHUNK_SUM_RSP)
		return reject(why, whylen, "%s: length %u is too large", rmr_msg_type_name(m->type),
			      m->len);
	if (m->addr + m->len < m->addr)
		return reject(why, whylen, "%s: range wraps around", rmr_msg_type_name(m->type));
	if (!mask_valid(m->missed))
		return reject(why, whylen, "%s: missed-member mask names id 0",
			      rmr_msg_type_name(m->type));
	/* Only an AUTH may carry one: -EACCES, the initiator refused the CHALLENGE's proof. */
	if (is_request(m->type) && m->status != 0 &&
	    !(m->type == RMR_MSG_AUTH && m->status == -EACCES))
		return reject(why, whylen, "%s: status %d in a request", rmr_msg_type_name(m->type),
			      m->status);
	if ((is_response(m->type) || m->type == RMR_MSG_GOODBYE) &&
	    (m->status > 0 || m->status < -4095))
		return reject(why, whylen, "%s: status %d is not an errno", rmr_msg_type_name(m->type),
			      m->status);
	if (m->missed && m->type != RMR_MSG_WRITE && m->type != RMR_MSG_MAP_ADD &&
	    m->type != RMR_MSG_MAP_PULL && m->type != RMR_MSG_HELLO_RSP && m->type != RMR_MSG_RECONCILE_RSP &&
	    m->type != RMR_MSG_MAP_MARK && m->type != RMR_MSG_HEARTBEAT)
		return reject(why, whylen, "%s: unexpected missed-member mask",
			      rmr_msg_type_name(m->type));

	switch ((enum rmr_msg_type)m->type) {
	case RMR_MSG_HELLO:
		if (m->payload_len != sizeof(struct rmr_wire_hello))
			return reject(why, whylen, "HELLO: payload of %u bytes, expected %zu",
				      m->payload_len, sizeof(struct rmr_wire_hello));
		break;
	case RMR_MSG_HELLO_RSP:
		/* The answer, then the member's membership (checked by its decoder). */
		if (m->status == 0 && m->payload_len < sizeof(struct rmr_wire_hello_rsp) +
							   sizeof(struct rmr_wire_members))
			return reject(why, whylen, "HELLO_RSP: payload of %u bytes, expected at least %zu",
				      m->payload_len,
				      sizeof(struct rmr_wire_hello_rsp) + sizeof(struct rmr_wire_members));
		if (m->status != 0 && m->payload_len != 0)
			return reject(why, whylen, "HELLO_RSP: refusal carries a payload");
		break;
	case RMR_MSG_READ:
		/* A payload is the request's argument (a key, say); the session bounds both. */
		if (m->len == 0)
			return reject(why, whylen, "READ: zero length");
		break;
	case RMR_MSG_READ_RSP:
		/* The store may return fewer bytes than asked for (a value shorter than the buffer). */
		if (m->status == 0 && m->payload_len > m->len)
			return reject(why, whylen, "READ_RSP: payload %u for length %u",
				      m->payload_len, m->len);
		if (m->status != 0 && m->payload_len != 0)
			return reject(why, whylen, "READ_RSP: error carries a payload");
		break;
	case RMR_MSG_WRITE:
		if (m->flags & ~RMR_WIRE_WRITE_FLAGS)
			return reject(why, whylen, "WRITE: unknown flags 0x%x", m->flags);
		if (m->flags & RMR_WIRE_WRITE_PATCH) {
			/* A change to make inside the range: any length of either, none empty. */
			if (m->payload_len == 0 || m->len == 0)
				return reject(why, whylen, "WRITE: patch of %u bytes for length %u",
					      m->payload_len, m->len);
		} else if (m->payload_len != 0 && m->payload_len != m->len) {
			return reject(why, whylen, "WRITE: payload %u for length %u",
				      m->payload_len, m->len);
		}
		break;
	case RMR_MSG_SYNC_READ:
		if (m->payload_len != 0)
			return reject(why, whylen, "SYNC_READ: carries a payload");
		if (m->op & ~RMR_SYNC_READ_LAST_RESORT)
			return reject(why, whylen, "SYNC_READ: unknown op 0x%x", m->op);
		if (m->len == 0)
			return reject(why, whylen, "SYNC_READ: zero length");
		break;
	case RMR_MSG_SYNC_READ_RSP:
		if (m->status == 0 && m->payload_len != m->len)
			return reject(why, whylen, "SYNC_READ_RSP: payload %u for length %u",
				      m->payload_len, m->len);
		if (m->status != 0 && m->payload_len != 0)
			return reject(why, whylen, "SYNC_READ_RSP: error carries a payload");
		break;
	case RMR_MSG_MAP_PULL:
		if ((m->op_flags & RMR_MAP_PULL_ALL) ? m->op != 0
						      : m->op == 0 || m->op > RMR_MAX_MEMBER_ID)
			return reject(why, whylen, "MAP_PULL: source member %u out of range", m->op);
		if (m->payload_len != 0)
			return reject(why, whylen, "MAP_PULL: a payload");
		if (m->op_flags & ~RMR_MAP_PULL_FLAGS)
			return reject(why, whylen, "MAP_PULL: unknown flags 0x%x", m->op_flags);
		break;
	case RMR_MSG_RECONCILE:
		if (m->payload_len != 0 || (m->op_flags & ~RMR_RECONCILE_OWN))
			return reject(why, whylen, "RECONCILE: a payload or unknown flags 0x%x",
				      m->op_flags);
		break;
	case RMR_MSG_MAP_GET_RSP:
		if (m->payload_len % sizeof(struct rmr_wire_map_range))
			return reject(why, whylen, "MAP_GET_RSP: payload of %u bytes is not whole ranges",
				      m->payload_len);
		if (m->status != 0 && m->payload_len != 0)
			return reject(why, whylen, "MAP_GET_RSP: error carries a payload");
		if (m->op_flags & ~RMR_MAP_GET_LAST)
			return reject(why, whylen, "MAP_GET_RSP: unknown flags 0x%x", m->op_flags);
		break;
	case RMR_MSG_CHUNK_SUM:
		/* A range of chunks (addr = first, len = count); the session bounds the answer. */
		if (m->payload_len != 0 || m->len == 0)
			return reject(why, whylen, "CHUNK_SUM: a payload or no chunks");
		break;
	case RMR_MSG_CHUNK_SUM_RSP:
		if (m->status == 0 &&
		    (uint64_t)m->payload_len != (uint64_t)m->len * sizeof(struct rmr_wire_chunk_sum))
			return reject(why, whylen, "CHUNK_SUM_RSP: payload %u for %u chunks",
				      m->payload_len, m->len);
		if (m->status != 0 && m->payload_len != 0)
			return reject(why, whylen, "CHUNK_SUM_RSP: error carries a payload");
		break;
	case RMR_MSG_MAP_MARK:
		if (m->payload_len != 0 || m->len == 0 || !m->missed)
			return reject(why, whylen, "MAP_MARK: a payload, no chunks or no members");
		break;
	case RMR_MSG_MEMBERSHIP:
		if (m->payload_len < sizeof(struct rmr_wire_members) ||
		    (m->op_flags & ~RMR_MEMBERSHIP_CHECK))
			return reject(why, whylen, "MEMBERSHIP: no members or unknown flags 0x%x",
				      m->op_flags);
		break;
	case RMR_MSG_CHALLENGE:
		/* A refusal is a HELLO_RSP: a challenge is never an error. */
		if (m->status != 0)
			return reject(why, whylen, "CHALLENGE: status %d", m->status);
		/* fall through */
	case RMR_MSG_AUTH:
		if (m->payload_len != sizeof(struct rmr_wire_auth) || m->len || m->addr || m->op ||
		    m->op_flags || m->slot || m->seq)
			return reject(why, whylen, "%s: payload of %u bytes, expected %zu, or a range, "
				      "op or slot set", rmr_msg_type_name(m->type), m->payload_len,
				      sizeof(struct rmr_wire_auth));
		break;
	case RMR_MSG_HEARTBEAT:
		/* A member's, to a client: `addr` = the members it is in session with. */
		if (!mask_valid(m->addr))
			return reject(why, whylen, "HEARTBEAT: member mask names id 0");
		if (m->payload_len != 0)
			return reject(why, whylen, "HEARTBEAT: carries a payload");
		break;
	case RMR_MSG_MAP_ADD:
		if (m->flags & ~RMR_WIRE_MAP_ADD_FLAGS)
			return reject(why, whylen, "MAP_ADD: unknown flags 0x%x", m->flags);
		/* A record says in which boot its members acknowledged those writes. */
		if ((m->flags & RMR_WIRE_MAP_ADD_RECORD) &&
		    m->payload_len != sizeof(struct rmr_wire_record))
			return reject(why, whylen, "MAP_ADD: record with a payload of %u bytes, expected %zu",
				      m->payload_len, sizeof(struct rmr_wire_record));
		if (!(m->flags & RMR_WIRE_MAP_ADD_RECORD) && m->payload_len != 0)
			return reject(why, whylen, "MAP_ADD: carries a payload");
		break;
	case RMR_MSG_MAP_GET:
	case RMR_MSG_MAP_CLEAR:
	case RMR_MSG_MAP_MARK_RSP:
	case RMR_MSG_MEMBERSHIP_RSP:
	case RMR_MSG_MAP_PULL_RSP:
	case RMR_MSG_MAP_CLEAR_RSP:
	case RMR_MSG_WRITE_RSP:
	case RMR_MSG_MAP_ADD_RSP:
	case RMR_MSG_GOODBYE:
	case RMR_MSG_RECONCILE_RSP:
		if (m->payload_len != 0)
			return reject(why, whylen, "%s: carries a payload", rmr_msg_type_name(m->type));
		break;
	}
	return 0;
}

void rmr_wire_encode(struct rmr_wire_hdr *hdr, const struct rmr_msg *m)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = cpu_to_le32(RMR_WIRE_MAGIC);
	hdr->version = cpu_to_le16(RMR_WIRE_VERSION);
	hdr->type = cpu_to_le16((uint16_t)m->type);
	memcpy(hdr->pool_uuid, m->pool_uuid.b, sizeof(hdr->pool_uuid));
	hdr->sender_id = cpu_to_le16(m->sender_id);
	hdr->op = cpu_to_le16(m->op);
	hdr->op_flags = cpu_to_le32(m->op_flags);
	hdr->slot = cpu_to_le32(m->slot);
	hdr->seq = cpu_to_le32(m->seq);
	hdr->map_ver = cpu_to_le64(m->map_ver);
	hdr->addr = cpu_to_le64(m->addr);
	hdr->len = cpu_to_le32(m->len);
	hdr->payload_len = cpu_to_le32(m->payload_len);
	hdr->missed = cpu_to_le64(m->missed);
	hdr->status = cpu_to_le32((uint32_t)m->status);
	hdr->flags = cpu_to_le32(m->flags);
}

/* A fixed-size name field must hold a NUL-terminated, NUL-padded string. */
static bool name_field_valid(const char *f, size_t size)
{
	size_t n = strnlen(f, size);

	if (n == size)
		return false;
	for (size_t i = n; i < size; i++)
		if (f[i])
			return false;
	return true;
}

/* Copy a name into a NUL-padded field (the field is already zeroed). */
static void copy_name(char *field, size_t size, const char *name)
{
	memcpy(field, name, strnlen(name, size - 1));
}

void rmr_wire_encode_hello(struct rmr_wire_hello *w, const struct rmr_hello *h)
{
	memset(w, 0, sizeof(*w));
	w->role = cpu_to_le32(h->role);
	w->queue_depth = cpu_to_le32(h->queue_depth);
	w->max_io_size = cpu_to_le32(h->max_io_size);
	w->heartbeat_ms = cpu_to_le32(h->heartbeat_ms);
	w->incarnation = cpu_to_le64(h->incarnation);
	copy_name(w->pool_name, sizeof(w->pool_name), h->pool_name);
	w->flags = cpu_to_le32(h->flags);
	w->writer_epoch = cpu_to_le64(h->writer_epoch);
	memcpy(w->nonce, h->nonce, sizeof(w->nonce));
}

int rmr_wire_decode_hello(const struct rmr_msg *m, struct rmr_hello *h, char *why, size_t whylen)
{
	struct rmr_wire_hello w;

	if (m->type != RMR_MSG_HELLO || m->payload_len != sizeof(w))
		return reject(why, whylen, "not a HELLO");
	memcpy(&w, m->payload, sizeof(w));
	h->role = le32_to_cpu(w.role);
	h->queue_depth = le32_to_cpu(w.queue_depth);
	h->max_io_size = le32_to_cpu(w.max_io_size);
	h->heartbeat_ms = le32_to_cpu(w.heartbeat_ms);
	h->incarnation = le64_to_cpu(w.incarnation);
	h->flags = le32_to_cpu(w.flags);
	h->writer_epoch = le64_to_cpu(w.writer_epoch);
	if (h->role != RMR_ROLE_CLIENT && h->role != RMR_ROLE_PEER)
		return reject(why, whylen, "HELLO: unknown role %u", h->role);
	if ((h->flags & ~RMR_HELLO_FLAGS) || le32_to_cpu(w.reserved))
		return reject(why, whylen, "HELLO: unknown flags 0x%x or reserved field set", h->flags);
	if (h->role == RMR_ROLE_PEER && ((h->flags & RMR_HELLO_TAKEOVER) || h->writer_epoch))
		return reject(why, whylen, "HELLO: a member's hello carries writer fields");
	memcpy(h->nonce, w.nonce, sizeof(h->nonce));
	if (!!(h->flags & RMR_HELLO_AUTH) == all_zero(h->nonce, sizeof(h->nonce)))
		return reject(why, whylen, "HELLO: nonce %s", (h->flags & RMR_HELLO_AUTH)
			      ? "missing (all zero) with a key" : "set without a key");
	if (h->queue_depth == 0 || h->max_io_size == 0 || h->max_io_size > RMR_WIRE_MAX_PAYLOAD)
		return reject(why, whylen, "HELLO: queue depth %u / max io %u out of range",
			      h->queue_depth, h->max_io_size);
	if (h->heartbeat_ms == 0)
		return reject(why, whylen, "HELLO: heartbeat interval 0");
	if (!name_field_valid(w.pool_name, sizeof(w.pool_name)) || !w.pool_name[0])
		return reject(why, whylen, "HELLO: pool name is not a padded string");
	memcpy(h->pool_name, w.pool_name, sizeof(h->pool_name));
	return 0;
}

size_t rmr_wire_encode_members(void *buf, const struct rmr_membership *ms)
{
	struct rmr_wire_members hdr = {
		.version = cpu_to_le64(ms->version),
		.count = cpu_to_le32(ms->n),
	};
	char *p = buf;

	memcpy(p, &hdr, sizeof(hdr));
	p += sizeof(hdr);
	for (unsigned i = 0; i < ms->n && i < RMR_MAX_MEMBERS; i++) {
		struct rmr_wire_member e;

		memset(&e, 0, sizeof(e));
		e.id = cpu_to_le16(ms->m[i].id);
		e.flags = cpu_to_le16(ms->m[i].detached ? RMR_WIRE_MEMBER_DETACHED : 0);
		copy_name(e.addr, sizeof(e.addr), ms->m[i].addr);
		memcpy(p, &e, sizeof(e));
		p += sizeof(e);
	}
	return (size_t)(p - (char *)buf);
}

int rmr_wire_decode_members(const void *buf, size_t len, struct rmr_membership *ms, char *why,
			    size_t whylen)
{
	struct rmr_wire_members hdr;
	const char *p = buf;
	uint64_t seen = 0;
	uint32_t n;

	if (len < sizeof(hdr))
		return reject(why, whylen, "membership: %zu bytes, shorter than its header", len);
	memcpy(&hdr, p, sizeof(hdr));
	n = le32_to_cpu(hdr.count);
	if (n == 0 || n > RMR_MAX_MEMBERS || le32_to_cpu(hdr.reserved))
		return reject(why, whylen, "membership: %u members (1..%u) or reserved set", n,
			      RMR_MAX_MEMBERS);
	if (len != sizeof(hdr) + (size_t)n * sizeof(struct rmr_wire_member))
		return reject(why, whylen, "membership: %zu bytes for %u members", len, n);
	memset(ms, 0, sizeof(*ms));
	ms->version = le64_to_cpu(hdr.version);
	ms->n = n;
	p += sizeof(hdr);
	for (uint32_t i = 0; i < n; i++, p += sizeof(struct rmr_wire_member)) {
		struct rmr_wire_member e;
		uint16_t id, flags;

		memcpy(&e, p, sizeof(e));
		id = le16_to_cpu(e.id);
		flags = le16_to_cpu(e.flags);
		if (id == 0 || id > RMR_MAX_MEMBER_ID || (seen & (1ull << id)))
			return reject(why, whylen, "membership: member id %u out of range or twice", id);
		if ((flags & ~RMR_WIRE_MEMBER_FLAGS) || le32_to_cpu(e.reserved) ||
		    le32_to_cpu(e.reserved2))
			return reject(why, whylen, "membership: member %u has unknown flags 0x%x or reserved set",
				      id, flags);
		if (!name_field_valid(e.addr, sizeof(e.addr)) || !e.addr[0])
			return reject(why, whylen, "membership: member %u's address is not a padded string",
				      id);
		seen |= 1ull << id;
		ms->m[i].id = id;
		ms->m[i].detached = flags & RMR_WIRE_MEMBER_DETACHED;
		memcpy(ms->m[i].addr, e.addr, sizeof(ms->m[i].addr));
	}
	return 0;
}

const struct rmr_member_entry *rmr_membership_find(const struct rmr_membership *ms, uint16_t id)
{
	for (unsigned i = 0; i < ms->n && i < RMR_MAX_MEMBERS; i++)
		if (ms->m[i].id == id)
			return &ms->m[i];
	return NULL;
}

uint64_t rmr_membership_ids(const struct rmr_membership *ms)
{
	uint64_t ids = 0;

	for (unsigned i = 0; i < ms->n && i < RMR_MAX_MEMBERS; i++)
		ids |= 1ull << ms->m[i].id;
	return ids;
}

size_t rmr_wire_encode_hello_rsp(void *buf, const struct rmr_hello_rsp *h)
{
	struct rmr_wire_hello_rsp wb, *w = &wb;

	memset(w, 0, sizeof(*w));
	w->member_id = cpu_to_le16(h->member_id);
	w->chunk_size = cpu_to_le32(h->chunk_size);
	w->pool_size = cpu_to_le64(h->pool_size);
	w->map_ver = cpu_to_le64(h->map_ver);
	w->missed = cpu_to_le64(h->missed);
	w->members = cpu_to_le64(h->members);
	w->queue_depth = cpu_to_le32(h->queue_depth);
	w->max_io_size = cpu_to_le32(h->max_io_size);
	w->incarnation = cpu_to_le64(h->incarnation);
	copy_name(w->pool_name, sizeof(w->pool_name), h->pool_name);
	w->flags = cpu_to_le16(h->flags);
	w->writer_epoch = cpu_to_le64(h->writer_epoch);
	w->boot_id = cpu_to_le64(h->boot_id);
	memcpy(buf, w, sizeof(*w));
	return sizeof(*w) + rmr_wire_encode_members((char *)buf + sizeof(*w), &h->membership);
}

int rmr_wire_decode_hello_rsp(const struct rmr_msg *m, struct rmr_hello_rsp *h, char *why,
			      size_t whylen)
{
	struct rmr_wire_hello_rsp w;

	if (m->type != RMR_MSG_HELLO_RSP || m->payload_len < sizeof(w))
		return reject(why, whylen, "not a HELLO_RSP");
	memcpy(&w, m->payload, sizeof(w));
	h->flags = le16_to_cpu(w.flags);
	if (h->flags & ~RMR_HELLO_RSP_FLAGS)
		return reject(why, whylen, "HELLO_RSP: unknown flags 0x%x", h->flags);
	h->writer_epoch = le64_to_cpu(w.writer_epoch);
	h->member_id = le16_to_cpu(w.member_id);
	h->chunk_size = le32_to_cpu(w.chunk_size);
	h->pool_size = le64_to_cpu(w.pool_size);
	h->map_ver = le64_to_cpu(w.map_ver);
	h->missed = le64_to_cpu(w.missed);
	h->members = le64_to_cpu(w.members);
	h->queue_depth = le32_to_cpu(w.queue_depth);
	h->max_io_size = le32_to_cpu(w.max_io_size);
	h->incarnation = le64_to_cpu(w.incarnation);
	h->boot_id = le64_to_cpu(w.boot_id);
	if (h->member_id == 0 || h->member_id > RMR_MAX_MEMBER_ID)
		return reject(why, whylen, "HELLO_RSP: member id %u out of range", h->member_id);
	if (h->chunk_size < 4096 || (h->chunk_size & (h->chunk_size - 1)))
		return reject(why, whylen, "HELLO_RSP: chunk size %u is not a power of two >= 4096",
			      h->chunk_size);
	if (h->pool_size == 0)
		return reject(why, whylen, "HELLO_RSP: pool size 0");
	if (!mask_valid(h->missed) || !mask_valid(h->members))
		return reject(why, whylen, "HELLO_RSP: member mask names id 0");
	if (!(h->members & (1ull << h->member_id)))
		return reject(why, whylen, "HELLO_RSP: member %u is not in its own member list",
			      h->member_id);
	if (h->queue_depth == 0 || h->max_io_size == 0 || h->max_io_size > RMR_WIRE_MAX_PAYLOAD)
		return reject(why, whylen, "HELLO_RSP: queue depth %u / max io %u out of range",
			      h->queue_depth, h->max_io_size);
	if (!name_field_valid(w.pool_name, sizeof(w.pool_name)) || !w.pool_name[0])
		return reject(why, whylen, "HELLO_RSP: pool name is not a padded string");
	memcpy(h->pool_name, w.pool_name, sizeof(h->pool_name));
	if (rmr_wire_decode_members((const char *)m->payload + sizeof(w), m->payload_len - sizeof(w),
				    &h->membership, why, whylen) < 0)
		return -EBADMSG;
	if (rmr_membership_ids(&h->membership) != h->members)
		return reject(why, whylen, "HELLO_RSP: membership and member mask disagree");
	return 0;
}

void rmr_wire_encode_auth(struct rmr_wire_auth *w, const struct rmr_auth *a)
{
	memcpy(w->nonce, a->nonce, sizeof(w->nonce));
	memcpy(w->proof, a->proof, sizeof(w->proof));
}

int rmr_wire_decode_auth(const struct rmr_msg *m, struct rmr_auth *a, char *why, size_t whylen)
{
	struct rmr_wire_auth w;

	if ((m->type != RMR_MSG_CHALLENGE && m->type != RMR_MSG_AUTH) ||
	    m->payload_len != sizeof(w))
		return reject(why, whylen, "not a CHALLENGE or AUTH");
	memcpy(&w, m->payload, sizeof(w));
	memcpy(a->nonce, w.nonce, sizeof(a->nonce));
	memcpy(a->proof, w.proof, sizeof(a->proof));
	if (m->type == RMR_MSG_CHALLENGE && all_zero(a->nonce, sizeof(a->nonce)))
		return reject(why, whylen, "CHALLENGE: nonce is all zero");
	if (m->type == RMR_MSG_AUTH && !all_zero(a->nonce, sizeof(a->nonce)))
		return reject(why, whylen, "AUTH: nonce field is not zero");
	return 0;
}

void rmr_wire_encode_chunk_sum(struct rmr_wire_chunk_sum *w, uint32_t crc, uint32_t flags)
{
	w->crc = cpu_to_le32(crc);
	w->flags = cpu_to_le32(flags);
}

int rmr_wire_decode_chunk_sum(const struct rmr_msg *m, size_t i, uint32_t *crc,
			      uint32_t *flags, char *why, size_t whylen)
{
	struct rmr_wire_chunk_sum w;

	if (m->type != RMR_MSG_CHUNK_SUM_RSP || i >= m->payload_len / sizeof(w))
		return reject(why, whylen, "CHUNK_SUM_RSP: no entry %zu", i);
	memcpy(&w, (const char *)m->payload + i * sizeof(w), sizeof(w));
	*crc = le32_to_cpu(w.crc);
	*flags = le32_to_cpu(w.flags);
	if (*flags & ~RMR_SUM_FLAGS)
		return reject(why, whylen, "CHUNK_SUM_RSP: entry %zu has unknown flags 0x%x", i,
			      *flags);
	return 0;
}

void rmr_wire_encode_map_range(struct rmr_wire_map_range *w, const struct rmr_map_range *r)
{
	memset(w, 0, sizeof(*w));
	w->member_id = cpu_to_le16(r->member_id);
	w->flags = cpu_to_le16(r->flags);
	w->count = cpu_to_le32(r->count);
	w->first = cpu_to_le64(r->first);
}

uint64_t rmr_wire_decode_record(const struct rmr_msg *m)
{
	struct rmr_wire_record w;

	if (m->type != RMR_MSG_MAP_ADD || m->payload_len != sizeof(w))
		return 0;
	memcpy(&w, m->payload, sizeof(w));
	return le64_to_cpu(w.boot);
}

int rmr_wire_decode_map_range(const struct rmr_msg *m, size_t i, struct rmr_map_range *r,
			      char *why, size_t whylen)
{
	struct rmr_wire_map_range w;

	if (m->type != RMR_MSG_MAP_GET_RSP || i >= m->payload_len / sizeof(w))
		return reject(why, whylen, "no map range %zu in this message", i);
	memcpy(&w, (const char *)m->payload + i * sizeof(w), sizeof(w));
	r->member_id = le16_to_cpu(w.member_id);
	r->count = le32_to_cpu(w.count);
	r->first = le64_to_cpu(w.first);
	r->flags = le16_to_cpu(w.flags);
	if (r->flags & ~RMR_MAP_RANGE_FLAGS)
		return reject(why, whylen, "MAP_GET_RSP: range %zu has unknown flags 0x%x", i,
			      r->flags);
	if (r->member_id == 0 || r->member_id > RMR_MAX_MEMBER_ID)
		return reject(why, whylen, "MAP_GET_RSP: range %zu names member %u", i, r->member_id);
	if (r->flags & RMR_MAP_RANGE_VALUES) {
		if (r->flags != RMR_MAP_RANGE_MARK_VER && r->flags != RMR_MAP_RANGE_PULLED_VER &&
		    r->flags != RMR_MAP_RANGE_RECORD_BOOT)
			return reject(why, whylen, "MAP_GET_RSP: entry %zu is a value and more at once",
				      i);
		if (r->count != 0)
			return reject(why, whylen, "MAP_GET_RSP: value entry %zu has a count", i);
		return 0;
	}
	if ((r->flags & RMR_MAP_RANGE_RECORD_OLD) && !(r->flags & RMR_MAP_RANGE_RECORD))
		return reject(why, whylen, "MAP_GET_RSP: range %zu of an older boot is no record", i);
	if (r->count == 0 || r->first + r->count < r->first)
		return reject(why, whylen, "MAP_GET_RSP: range %zu is empty or wraps", i);
	return 0;
}
