/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The event loop that drives one client pool or one server: a thread that
 * makes transport progress, runs a periodic tick (heartbeats, deadlines,
 * reconnects) and runs work posted from other threads. The replication core
 * never blocks or reads the clock itself: it is called from here with the
 * time of the current iteration.
 */
#ifndef RMR_CORE_LOOP_H
#define RMR_CORE_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rmr/transport.h>

struct loop;

struct loop_ops {
	/* Work was posted with loop_wake(): drain your queues. */
	void (*wake)(void *ctx);
	/* Periodic tick with the current time. */
	void (*tick)(void *ctx, uint64_t now_ns);
};

int loop_create(const struct loop_ops *ops, void *ctx, unsigned tick_ms, struct loop **out);
/* Attach the transport instance the loop makes progress on (before loop_start). */
void loop_set_transport(struct loop *l, const struct rmr_transport_ops *tops, void *tp);
int loop_start(struct loop *l, const char *thread_name);
/* Stop the thread and wait for it (not from the loop thread). */
void loop_stop(struct loop *l);
void loop_destroy(struct loop *l);

/* Ask the loop to call ops->wake soon. Any thread; cheap when already pending. */
void loop_wake(struct loop *l);
/* Run fn(arg) on the loop thread and wait for it (at once on the loop thread). */
void loop_call(struct loop *l, void (*fn)(void *arg), void *arg);
bool loop_on_thread(struct loop *l);
/*
 * Call fn(priv) on the loop thread whenever @fd is readable (level
 * triggered), so that a consumer's own sockets are served where its requests
 * complete. Any thread; loop_unwatch() returns once fn runs no more (not from
 * fn itself). -EEXIST, -ENOSPC (LOOP_MAX_WATCH), -EOPNOTSUPP in a
 * simulation, -errno of epoll_ctl.
 */
#define LOOP_MAX_WATCH 8
int loop_watch(struct loop *l, int fd, void (*fn)(void *priv), void *priv);
int loop_unwatch(struct loop *l, int fd);
/*
 * On the loop thread: call @fd's fn in this loop turn, readable or not (work
 * the consumer queued for itself, without an eventfd). -EPERM elsewhere,
 * -ENOENT if @fd is not watched.
 */
int loop_kick(struct loop *l, int fd);
/*
 * On the loop thread: do not sleep before @deadline_ns (loop_clock_ns()
 * time); poll the transport and the descriptors instead, for work that is
 * about to arrive. 0 cancels. A later call replaces an earlier one.
 */
void loop_poll_until(struct loop *l, uint64_t deadline_ns);
/* Waits so far that could sleep (for tests and profiles). Any thread. */
uint64_t loop_sleeps(struct loop *l);
/* Turns that looked without sleeping because of loop_poll_until(). Any thread. */
uint64_t loop_polls(struct loop *l);
/* Time of the current iteration (monotonic ns); valid on the loop thread. */
uint64_t loop_now(struct loop *l);
/* Monotonic clock in ns (the virtual clock while a simulation runs). */
uint64_t loop_clock_ns(void);
/* 64 random bits: from the kernel, or from the simulation's seed. */
uint64_t loop_random(void);
/*
 * Delay before the next reconnect: *@backoff_ms (@min_ms when 0) with +-25%
 * jitter, so that peers do not retry in lockstep; *@backoff_ms doubles, up
 * to @max_ms. Returns nanoseconds.
 */
uint64_t loop_backoff_ns(unsigned *backoff_ms, unsigned min_ms, unsigned max_ms);

/*
 * Deterministic simulation, for the sim test suite. While it is on, loops
 * get no thread: loop_start() registers them and the test steps them all on
 * its own thread, against a virtual clock, with a seeded random source.
 * Blocking waits inside librmr (opening a pool, waiting for a free slot)
 * step the world instead of sleeping. One simulation per process at a time;
 * start it before creating any client or server, end it after the last.
 */
void loop_sim_begin(uint64_t seed);
void loop_sim_end(void);
bool loop_sim_active(void);
/* Step every loop once (progress, posted work, due ticks); returns the events handled. */
unsigned loop_sim_step(void);
/* Step until quiet, then advance the clock 1 ms; repeat for @ns of virtual time. */
void loop_sim_run(uint64_t ns);
/* For a blocking wait: drop @m, make progress (a step, or 1 ms if quiet), take @m again. */
void loop_sim_wait(pthread_mutex_t *m);

#endif
