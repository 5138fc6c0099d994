/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "member_state.h"

#include "compiler.h"

#define N RMR_MEMBER_NEW
#define OK RMR_MEMBER_NORMAL
#define F RMR_MEMBER_FAILED
#define R RMR_MEMBER_RECONNECTING
#define M RMR_MEMBER_MAINTENANCE
#define D RMR_MEMBER_DETACHED
#define X RMR_MEMBER_REMOVED

/*
 * legal[from][to]. Why each edge exists:
 *  NEW -> RECONNECTING     first hello answered; admission decided next
 *  NEW -> FAILED           first connect or hello failed
 *  RECONNECTING -> NORMAL  admitted: the member holds every acknowledged write
 *  RECONNECTING -> FAILED  session lost before admission
 *  RECONNECTING -> MAINTENANCE  hello answered while the operator holds it out
 *  NORMAL -> FAILED        heartbeat timeout, I/O error, request deadline, peer closed
 *  NORMAL -> MAINTENANCE   operator takes the member out
 *  FAILED -> RECONNECTING  reconnected and hello answered
 *  MAINTENANCE -> RECONNECTING  operator puts it back: same path as a return
 *  MAINTENANCE -> FAILED   session lost while out
 *  any but REMOVED -> DETACHED  the operator detaches it (remove-member, keeping its tracking)
 *  DETACHED -> FAILED      the operator attaches it again: it reconnects and catches up
 *  any -> REMOVED          the operator deletes it from the pool, or the membership says so
 *  REMOVED -> NEW          the entry takes a member added to the pool
 */
static const bool legal[RMR_MEMBER_STATE_COUNT][RMR_MEMBER_STATE_COUNT] = {
	[N] = { [R] = true, [F] = true, [D] = true, [X] = true },
	[R] = { [OK] = true, [F] = true, [M] = true, [D] = true, [X] = true },
	[OK] = { [F] = true, [M] = true, [D] = true, [X] = true },
	[F] = { [R] = true, [D] = true, [X] = true },
	[M] = { [R] = true, [F] = true, [D] = true, [X] = true },
	[D] = { [F] = true, [X] = true },
	[X] = { [N] = true },
};

bool member_state_can_move(enum rmr_member_state from, enum rmr_member_state to)
{
	if ((unsigned)from >= RMR_MEMBER_STATE_COUNT || (unsigned)to >= RMR_MEMBER_STATE_COUNT)
		return false;
	return legal[from][to];
}

RMR_EXPORT const char *rmr_member_state_name(enum rmr_member_state s)
{
	static const char *const names[] = {
#define RMR_X_NAME(name, str) [RMR_MEMBER_##name] = str,
		RMR_MEMBER_STATES(RMR_X_NAME)
#undef RMR_X_NAME
	};

	if ((unsigned)s >= RMR_ARRAY_SIZE(names))
		return "invalid";
	return names[s];
}
