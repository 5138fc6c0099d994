/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A store's flush on a thread of its own, off the event loop.
 *
 * A member flushes its store before it records chunks it copied in as
 * clean. An fdatasync writes back every page dirtied since the last one,
 * which on a busy or slow disk takes longer than the heartbeat timeout:
 * on the event loop it would stall the member's answers and heartbeats
 * meanwhile. The loop starts a flush here and, on a later turn, takes its
 * result; one flush runs at a time. The thread starts with the first flush.
 *
 * In a simulation (loop_sim_active() when the flusher is set up) the flush
 * runs at once, on the loop, so that runs stay deterministic, and its end
 * is seen 0 to 3 polls later (the seed decides), as a thread's would be.
 * Without a thread (pthread_create failed) it runs on the loop too.
 */
#ifndef RMR_CORE_FLUSHER_H
#define RMR_CORE_FLUSHER_H

#include <pthread.h>
#include <stdbool.h>

struct flusher {
	int (*flush)(void *store);
	void *store;
	bool inline_only;       /* run the flush on the caller's thread */
	bool busy;              /* loop only: started, result not taken yet */
	unsigned polls_left;    /* inline: flusher_done() says no this often first */

	pthread_mutex_t lock;   /* the rest */
	pthread_cond_t cv;
	pthread_t thread;
	bool thread_up;
	bool asked;             /* a flush to run */
	bool finished;          /* its result is in @status */
	bool stop;
	int status;
};

/* @flush(@store) must be callable from any thread. */
void flusher_init(struct flusher *f, int (*flush)(void *store), void *store);

/* Waits for a flush under way, then ends the thread. */
void flusher_destroy(struct flusher *f);

/* Start a flush; the flusher must not be busy. */
void flusher_start(struct flusher *f);

/* The flush started last has finished: take its result (0 or -errno) once. */
bool flusher_done(struct flusher *f, int *status);

static inline bool flusher_busy(const struct flusher *f)
{
	return f->busy;
}

#endif
