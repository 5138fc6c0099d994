/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Encoding and checked decoding of the front's requests; see kv_wire.h. */
#include "kv_wire.h"

#include <errno.h>

void kv_wire_set_hdr(uint8_t hdr[KV_SET_HDR], uint32_t klen, uint32_t vlen, uint64_t expire_ms)
{
	kv_put_le32(hdr, klen);
	kv_put_le32(hdr + 4, vlen);
	kv_put_le64(hdr + 8, expire_ms);
}

void kv_wire_del_hdr(uint8_t hdr[KV_DEL_HDR], uint32_t klen)
{
	kv_put_le32(hdr, klen);
	kv_put_le32(hdr + 4, 0);
}

void kv_wire_del_expired_hdr(uint8_t hdr[KV_DEL_EXPIRED_HDR], uint32_t klen, uint64_t deadline)
{
	kv_put_le32(hdr, klen);
	kv_put_le32(hdr + 4, 0);
	kv_put_le64(hdr + 8, deadline);
}

static int bad(const char **why, const char *reason)
{
	*why = reason;
	return -EINVAL;
}

int kv_wire_decode_write(uint16_t op, const void *payload, uint32_t len, struct kv_write *out,
			 const char **why)
{
	const uint8_t *p = payload;
	uint32_t hdr;

	memset(out, 0, sizeof(*out));
	out->op = (enum kv_op)op;
	switch (op) {
	case KV_OP_FLUSHALL:
		return len == 0 && !payload ? 0 : bad(why, "FLUSHALL carries no payload");
	case KV_OP_SET:
		hdr = KV_SET_HDR;
		break;
	case KV_OP_DEL:
		hdr = KV_DEL_HDR;
		break;
	case KV_OP_DEL_EXPIRED:
		hdr = KV_DEL_EXPIRED_HDR;
		break;
	default:
		return bad(why, "unknown write opcode");
	}
	if (!p || len < hdr)
		return bad(why, "payload shorter than its header");
	out->klen = kv_get_le32(p);
	if (out->klen > KV_KEY_MAX)
		return bad(why, "key longer than the limit");
	if (op == KV_OP_SET) {
		out->vlen = kv_get_le32(p + 4);
		out->expire_ms = kv_get_le64(p + 8);
		if ((uint64_t)hdr + out->klen + out->vlen != len)
			return bad(why, "SET lengths do not add up to the payload");
		out->value = p + hdr + out->klen;
	} else {
		if (kv_get_le32(p + 4) != 0)
			return bad(why, "reserved bytes not zero");
		if (op == KV_OP_DEL_EXPIRED)
			out->expire_ms = kv_get_le64(p + 8);
		if ((uint64_t)hdr + out->klen != len)
			return bad(why, "key length does not match the payload");
	}
	out->key = p + hdr;
	return 0;
}

int kv_wire_decode_get(const void *answer, uint32_t len, bool meta, struct kv_get_answer *out)
{
	const uint8_t *p = answer;
	uint32_t found;

	memset(out, 0, sizeof(*out));
	if (len < KV_GET_ANSWER_HDR)
		return -EPROTO;
	found = kv_get_le32(p);
	if (found > 1)
		return -EPROTO;
	out->found = found;
	out->vlen = kv_get_le32(p + 4);
	out->expire_ms = kv_get_le64(p + 8);
	if (!out->found)
		return len == KV_GET_ANSWER_HDR && out->vlen == 0 && out->expire_ms == 0 ? 0 : -EPROTO;
	if (meta)
		return len == KV_GET_ANSWER_HDR ? 0 : -EPROTO;
	if ((uint64_t)KV_GET_ANSWER_HDR + out->vlen != len)
		return -EPROTO;
	out->value = p + KV_GET_ANSWER_HDR;
	return 0;
}

void kv_wire_batch_rec_hdr(uint8_t hdr[KV_BATCH_REC_HDR], uint16_t op, uint32_t len)
{
	hdr[0] = (uint8_t)op;
	hdr[1] = (uint8_t)(op >> 8);
	hdr[2] = hdr[3] = 0;
	kv_put_le32(hdr + 4, len);
}

int kv_wire_batch_next(const void *payload, uint32_t len, uint32_t *off, struct kv_write *w,
		       const char **why)
{
	const uint8_t *p = payload;
	uint32_t rlen;
	uint16_t op;

	if (*off == len)
		return 0;
	if (len - *off < KV_BATCH_REC_HDR)
		return bad(why, "batch record header cut off");
	op = (uint16_t)(p[*off] | p[*off + 1] << 8);
	rlen = kv_get_le32(p + *off + 4);
	if (p[*off + 2] || p[*off + 3])
		return bad(why, "batch record: reserved bytes not zero");
	if (op != KV_OP_SET && op != KV_OP_DEL && op != KV_OP_DEL_EXPIRED)
		return bad(why, "batch record: not SET, DEL or DEL_EXPIRED");
	if (rlen > len - *off - KV_BATCH_REC_HDR)
		return bad(why, "batch record runs past the payload");
	if (kv_wire_decode_write(op, p + *off + KV_BATCH_REC_HDR, rlen, w, why) < 0)
		return -EINVAL;
	*off += KV_BATCH_REC_HDR + rlen;
	return 1;
}
