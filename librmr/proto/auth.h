/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Session authentication: the proofs of the pool key exchanged in HELLO,
 * CHALLENGE and AUTH (docs/protocol.md, "Authentication").
 *
 * Each side proves that it holds the pool's key with an HMAC-SHA-256
 * (libsodium's crypto_auth_hmacsha256), keyed with the pool key, over
 *
 *   label (24 bytes, NUL-padded) | initiator nonce (32) | member nonce (32) |
 *   pool UUID (16) | role (le32) | initiator's claimed id (le16) |
 *   member's id (le16)
 *
 * with label "rmr-auth-v1 member" for the member's proof (in CHALLENGE) and
 * "rmr-auth-v1 initiator" for the initiator's (in AUTH): the two proofs of
 * one session differ, so neither can be reflected back as the other. Both
 * nonces are fresh per session, so no proof can be replayed.
 */
#ifndef RMR_PROTO_AUTH_H
#define RMR_PROTO_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/rmr.h>

#include "wire.h"

enum rmr_auth_side {
	RMR_AUTH_MEMBER,    /* the answering member's proof (CHALLENGE) */
	RMR_AUTH_INITIATOR, /* the dialing client's or member's proof (AUTH) */
};

/* What both proofs of a session are bound to. */
struct rmr_auth_ctx {
	uint8_t initiator_nonce[RMR_NONCE_LEN];
	uint8_t member_nonce[RMR_NONCE_LEN];
	rmr_uuid pool_uuid;
	uint32_t role;           /* RMR_ROLE_CLIENT or RMR_ROLE_PEER */
	uint16_t initiator_id;   /* the HELLO's sender_id: 0 for a client */
	uint16_t member_id;      /* the answering member's id */
};

/* Initialise the crypto library once per process: 0 or -EIO. */
int rmr_auth_init(void);
/* A fresh random nonce, never all zero. */
void rmr_auth_nonce(uint8_t nonce[RMR_NONCE_LEN]);
/* The proof of @side for @ctx under @key. */
void rmr_auth_proof(const uint8_t key[RMR_KEY_LEN], enum rmr_auth_side side,
		    const struct rmr_auth_ctx *ctx, uint8_t proof[RMR_PROOF_LEN]);
/* Does @proof prove @key for @side and @ctx? Constant time. */
bool rmr_auth_check(const uint8_t key[RMR_KEY_LEN], enum rmr_auth_side side,
		    const struct rmr_auth_ctx *ctx, const uint8_t proof[RMR_PROOF_LEN]);

#endif
