/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Proofs of the pool key; see auth.h. */
#include "auth.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

#define LABEL_LEN 24

_Static_assert(RMR_KEY_LEN == crypto_auth_hmacsha256_KEYBYTES, "pool key size");
_Static_assert(RMR_PROOF_LEN == crypto_auth_hmacsha256_BYTES, "proof size");

int rmr_auth_init(void)
{
	/* Idempotent and thread-safe: 0 first time, 1 after. */
	return sodium_init() < 0 ? -EIO : 0;
}

void rmr_auth_nonce(uint8_t nonce[RMR_NONCE_LEN])
{
	do
		randombytes_buf(nonce, RMR_NONCE_LEN);
	while (sodium_is_zero(nonce, RMR_NONCE_LEN));
}

void rmr_auth_proof(const uint8_t key[RMR_KEY_LEN], enum rmr_auth_side side,
		    const struct rmr_auth_ctx *ctx, uint8_t proof[RMR_PROOF_LEN])
{
	uint8_t msg[LABEL_LEN + 2 * RMR_NONCE_LEN + RMR_UUID_LEN + 4 + 2 + 2];
	uint8_t *p = msg;
	rmr_le32 role = cpu_to_le32(ctx->role);
	rmr_le16 iid = cpu_to_le16(ctx->initiator_id);
	rmr_le16 mid = cpu_to_le16(ctx->member_id);

	memset(msg, 0, sizeof(msg));
	strcpy((char *)p, side == RMR_AUTH_MEMBER ? "rmr-auth-v1 member" : "rmr-auth-v1 initiator");
	p += LABEL_LEN;
	memcpy(p, ctx->initiator_nonce, RMR_NONCE_LEN);
	p += RMR_NONCE_LEN;
	memcpy(p, ctx->member_nonce, RMR_NONCE_LEN);
	p += RMR_NONCE_LEN;
	memcpy(p, ctx->pool_uuid.b, RMR_UUID_LEN);
	p += RMR_UUID_LEN;
	memcpy(p, &role, 4);
	p += 4;
	memcpy(p, &iid, 2);
	p += 2;
	memcpy(p, &mid, 2);
	crypto_auth_hmacsha256(proof, msg, sizeof(msg), key);
}

bool rmr_auth_check(const uint8_t key[RMR_KEY_LEN], enum rmr_auth_side side,
		    const struct rmr_auth_ctx *ctx, const uint8_t proof[RMR_PROOF_LEN])
{
	uint8_t want[RMR_PROOF_LEN];
	bool ok;

	rmr_auth_proof(key, side, ctx, want);
	ok = crypto_verify_32(want, proof) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}
