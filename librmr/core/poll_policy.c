/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "poll_policy.h"

void poll_policy_init(struct poll_policy *p, uint64_t window_ns)
{
	/* All start on: the first wait of each kind shows whether they pay. */
	*p = (struct poll_policy){ .window_ns = window_ns, .idle_pays = true, .sent_pays = true,
				   .answers_pay = true };
}

uint64_t poll_on_answer(struct poll_policy *p, uint64_t *first_answer, bool more_due,
			uint64_t now)
{
	if (p->sent_at) {
		p->sent_pays = now - p->sent_at <= p->window_ns;
		p->sent_at = 0;
	}
	if (more_due) {
		if (!*first_answer)
			*first_answer = now;
		return p->window_ns && p->answers_pay ? now + p->window_ns : 0;
	}
	if (*first_answer) {
		/* The last of several answers: how far behind the first it came. */
		p->answers_pay = now - *first_answer <= p->window_ns;
		*first_answer = 0;
	}
	return 0;
}

uint64_t poll_on_idle(struct poll_policy *p, uint64_t now)
{
	p->idle_since = now ? now : 1; /* 0 means "not idle" */
	if (p->peak > 1)
		p->lone_run = 0;
	else if (p->lone_run < POLL_LONE_RUN)
		p->lone_run++;
	p->peak = 0;
	return p->window_ns && p->idle_pays ? now + p->window_ns : 0;
}

uint64_t poll_on_busy(struct poll_policy *p, uint64_t now, unsigned in_flight)
{
	if (in_flight > p->peak)
		p->peak = in_flight;
	if (!p->idle_since)
		return 0;
	p->idle_pays = now - p->idle_since <= p->window_ns;
	p->idle_since = 0;
	p->sent_at = now ? now : 1; /* 0 means "none" */
	return p->window_ns && p->sent_pays && p->lone_run >= POLL_LONE_RUN ? now + p->window_ns : 0;
}
