/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A pool's membership as one member keeps it: every member id with its
 * address and whether it is detached, under a version. The stores are
 * formatted with a member list (version 0); the client (the pool's one
 * writer) changes it at run time and tells every member (MEMBERSHIP).
 *
 * A member applies a change durably, in an order a crash cannot break: the
 * bitmap of each member added is written first (every chunk dirty for it:
 * a new store holds nothing), then the metadata blob that names the new
 * membership, the commit point; only then are the maps of removed members
 * dropped and the member-to-member sessions opened or closed. A detached
 * member stays a member: the others keep marking what it misses, so that
 * when it is attached again it copies only that.
 */
#ifndef RMR_CORE_MEMBERSHIP_H
#define RMR_CORE_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

#include "wire.h"

struct srv_pool;

/* The formatted membership (version 0): @params' members, with the peers' addresses. */
void membership_from_params(struct srv_pool *p, const struct rmr_pool_params *params);
/*
 * Check @ms as a membership for this member: its own id listed and not
 * detached, at most RMR_MAX_MEMBERS members. Returns NULL or a reason.
 */
const char *membership_invalid(const struct srv_pool *p, const struct rmr_membership *ms);
/*
 * A client's MEMBERSHIP. @check: only say whether this member holds every
 * chunk (-EBUSY if not), so that removing another member loses nothing.
 * Otherwise apply @ms if it is newer (0 if it is the current one, -EEXIST
 * if another membership holds its version, -ERANGE if it is older), under
 * @map_ver (members it adds are marked with it). Returns 0 or -errno.
 */
int membership_apply(struct srv_pool *p, const struct rmr_membership *ms, uint64_t map_ver,
		     bool check);
/* Open member-to-member sessions to the members that have none, close the others'. */
int membership_sync_peers(struct srv_pool *p);

#endif
