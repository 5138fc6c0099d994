/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A store's flush on a thread of its own; see flusher.h. */
#include "flusher.h"

#include <string.h>

#include "log.h"
#include "loop.h"

static void *flusher_thread(void *arg)
{
	struct flusher *f = arg;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		int status;

		while (!f->asked && !f->stop)
			pthread_cond_wait(&f->cv, &f->lock);
		if (f->stop)
			break;
		f->asked = false;
		pthread_mutex_unlock(&f->lock);
		status = f->flush(f->store);
		pthread_mutex_lock(&f->lock);
		f->status = status;
		f->finished = true;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

void flusher_init(struct flusher *f, int (*flush)(void *store), void *store)
{
	*f = (struct flusher){ .flush = flush, .store = store, .inline_only = loop_sim_active() };
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
}

void flusher_destroy(struct flusher *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lock);
	if (f->thread_up)
		pthread_join(f->thread, NULL);
	f->thread_up = false;
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cv);
}

void flusher_start(struct flusher *f)
{
	bool here = f->inline_only;

	if (!here && !f->thread_up) {
		int err = pthread_create(&f->thread, NULL, flusher_thread, f);

		/* No thread (tried again next time): on the loop, as it was. */
		if (err) {
			log_warn("store flush on the event loop: no thread for it: %s", strerror(err));
			here = true;
		} else {
			f->thread_up = true;
		}
	}
	if (here) {
		f->status = f->flush(f->store);
		f->finished = true;
		f->busy = true;
		/* A simulation sees it end some turns later, as a thread's would. */
		f->polls_left = loop_sim_active() ? (unsigned)(loop_random() % 4) : 0;
		return;
	}
	pthread_mutex_lock(&f->lock);
	f->finished = false;
	f->asked = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lock);
	f->busy = true;
}

bool flusher_done(struct flusher *f, int *status)
{
	bool done;

	if (!f->busy)
		return false;
	if (f->polls_left) {
		f->polls_left--;
		return false;
	}
	pthread_mutex_lock(&f->lock);
	done = f->finished;
	if (done) {
		*status = f->status;
		f->finished = false;
	}
	pthread_mutex_unlock(&f->lock);
	if (done)
		f->busy = false;
	return done;
}
