/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The member session state machine: one table of legal transitions. The
 * only door through which a session changes state is client.c's
 * member_set_state(), which consults this table and logs every transition
 * with its reason.
 */
#ifndef RMR_CORE_MEMBER_STATE_H
#define RMR_CORE_MEMBER_STATE_H

#include <stdbool.h>
#include <rmr/rmr.h>

/* True if a session may move from @from to @to. */
bool member_state_can_move(enum rmr_member_state from, enum rmr_member_state to);

/* True if a session in @s carries I/O. */
static inline bool member_state_serves_io(enum rmr_member_state s)
{
	return s == RMR_MEMBER_NORMAL;
}

#endif
