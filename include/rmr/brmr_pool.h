/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file brmr_pool.h
 * @brief libbrmr: a pool's member list in its stores, for pool creation.
 *
 * Every member's superblock lists all members of the pool (id and address)
 * so that a member knows its peers (member-to-member sessions) and the pool's
 * member set (rmr_pool_params.members_mask) from its own store. These calls
 * create and read that list; brmrctl create uses them.
 *
 * (Separate from brmr.h only because it was added by the storage side while
 * brmr.h was being written; it may be folded into brmr.h.)
 */
#ifndef RMR_BRMR_POOL_H
#define RMR_BRMR_POOL_H

#include <rmr/brmr.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One member of a pool, as listed in every member's superblock. */
struct brmr_member {
	uint16_t id;                 /**< 1..RMR_MAX_MEMBER_ID, unique in the pool */
	char addr[RMR_ADDR_MAX + 1]; /**< where its brmr-server listens; printable, no spaces */
};

/** brmr_store_format_pool() flags. */
enum brmr_format_flags {
	/** Check everything (parameters, the target, its size) but write nothing. */
	BRMR_FORMAT_CHECK_ONLY = 1 << 0,
};

/**
 * brmr_store_format() with the pool's member list: @p members (@p nmembers
 * entries, at most RMR_MAX_MEMBERS; may be 0) must include @c p->member_id.
 * Without @c force, a target whose first MiB is not all zero (a brmr
 * superblock or anything else) is refused. The data area of the new store
 * reads as zeroes, so members formatted together start identical.
 * @p why receives a one-line reason on failure (may be NULL).
 *
 * @return 0; -EINVAL for bad parameters or flags; -EEXIST if the target
 *         holds a superblock or other data and @c force is not set; -EBUSY
 *         if a brmr-server is serving it; -ENOSPC if a block device is too
 *         small; -errno from the system.
 */
int brmr_store_format_pool(const char *path, const struct brmr_format_params *p,
			   const struct brmr_member *members, unsigned nmembers,
			   unsigned flags, char *why, size_t whylen);

/**
 * Copy the member list of an open store into @p out (room for @p cap).
 * @return the number of members listed (may exceed @p cap; 0 if the store
 *         was formatted without a list).
 */
int brmr_store_members(struct brmr_store *s, struct brmr_member *out, unsigned cap);

#ifdef __cplusplus
}
#endif
#endif /* RMR_BRMR_POOL_H */
