/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * When a client's event loop polls instead of sleeping.
 *
 * On a small host a sleep and the wake-up after it cost the loop more than
 * the work of a small request (on the 2-vCPU development VM, a 4 KiB write
 * at depth costs nbd-brmr ~7 us of CPU, at QD1 ~60 us, nearly all of it
 * going to sleep and waking up). Three of the loop's waits usually end
 * within microseconds, and there it polls for at most a window:
 *   - for the first answer to requests sent while none was in flight, if
 *     the consumer's last POLL_LONE_RUN busy times each had one request in
 *     flight at most (it waits for each answer): a member answers a small
 *     request within tens of microseconds, and the wake-up it would
 *     otherwise take costs as much again (QD1 4k writes through 2 members:
 *     85-94 us sleeping, 70-75 us polling). A consumer with several
 *     requests at once has one alone now and then, and keeps a small host
 *     busy: there the poll's CPU would be taken from the members (without
 *     the run of busy times, a key-value front with 50 clients served 75-97k
 *     GETs/s against 104-128k);
 *   - for the other answers of a request one member has answered: the
 *     members apply a write in parallel;
 *   - for the next request once none is in flight: a consumer that waits for
 *     each answer before it asks again (QD1) sends the next one at once.
 * Under load (requests always in flight) none of these waits occurs often:
 * answers keep the loop busy.
 * Each poll is tried again only while it pays: the last wait of its kind
 * ended within the window. A longer one turns it off until a wait of that
 * kind is short again (they are timed whether the loop polled or slept),
 * so an idle consumer or a slow member costs at most one unpaid window per
 * change of pace.
 *
 * Pure logic on times the caller gives, so that it can be tested alone;
 * the client's loop thread owns the state.
 */
#ifndef RMR_CORE_POLL_POLICY_H
#define RMR_CORE_POLL_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct poll_policy {
	uint64_t window_ns;     /* longest poll; 0: never poll */
	uint64_t idle_since;    /* the last request in flight completed then; 0: not idle */
	bool idle_pays;         /* the last idle time was within the window */
	uint64_t sent_at;       /* requests went out from idle then, no answer yet; 0: none */
	bool sent_pays;         /* the first answer after the last such send came within it */
	unsigned peak;          /* most requests in flight since the last idle time */
	unsigned lone_run;      /* busy times in a row with one request in flight at most */
	bool answers_pay;       /* the last request's answers came within the window */
};

/* A consumer with several requests at once now and then has one alone: not that. */
#define POLL_LONE_RUN 8

void poll_policy_init(struct poll_policy *p, uint64_t window_ns);

/*
 * A request got an answer at @now; @more_due: others of it are still due.
 * *@first_answer is the request's own record (0 before its first answer).
 * @return the time to poll until, or 0 for none.
 */
uint64_t poll_on_answer(struct poll_policy *p, uint64_t *first_answer, bool more_due,
			uint64_t now);

/* The last request in flight completed at @now. @return the time to poll until, or 0. */
uint64_t poll_on_idle(struct poll_policy *p, uint64_t now);

/*
 * New requests arrived at @now, @in_flight now in flight: an idle time, if
 * any, ends (stop polling for it). @return the time to poll until for their
 * first answer if they end one, or 0.
 */
uint64_t poll_on_busy(struct poll_policy *p, uint64_t now, unsigned in_flight);

#endif
