/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* Polled transports (no wait fd): spin this long after the last event, then nap. */
#define LOOP_SPIN_NS (200 * 1000ull)
#define LOOP_NAP_MS 1

struct loop_call {
	void (*fn)(void *arg);
	void *arg;
	bool done;
	struct loop_call *next;
};

struct loop {
	const struct loop_ops *ops;
	void *ctx;
	uint64_t tick_ns;
	const struct rmr_transport_ops *tops;
	void *tp;
	int epfd;
	int wakefd;
	pthread_t thread;
	bool running;
	atomic_bool stop;
	atomic_bool wake_pending;
	uint64_t now;
	bool simulated;              /* stepped by the simulation, no thread */
	uint64_t next_tick;          /* simulated loops */

	pthread_mutex_t call_lock;
	pthread_cond_t call_done;
	struct loop_call *calls;

	/* Consumer descriptors (loop_watch), touched on the loop thread only. */
	struct loop_watch {
		int fd;
		void (*fn)(void *priv);
		void *priv;
		bool kicked;
	} watch[LOOP_MAX_WATCH];
	unsigned nwatch;
	bool kicked;                 /* some watch was kicked */
	bool consumer_ready;         /* a watched descriptor was readable last time */
	uint64_t poll_until;         /* loop_poll_until(): no sleep before this time */
	atomic_uint_fast64_t sleeps; /* waits that could block (loop_sleeps) */
	atomic_uint_fast64_t polls;  /* waits that looked only, for work expected soon (loop_polls) */
};

#define SIM_MAX_LOOPS 64
#define SIM_QUIET_STEPS 100000 /* a world that never goes quiet is a livelock */

static struct {
	bool on;
	uint64_t now;
	uint64_t rng;
	struct loop *loops[SIM_MAX_LOOPS];
	unsigned n;
} sim;

void loop_sim_begin(uint64_t seed)
{
	memset(&sim, 0, sizeof(sim));
	sim.on = true;
	sim.now = 1000000000ull; /* not zero: "never" is often 0 */
	sim.rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

void loop_sim_end(void)
{
	sim.on = false;
	sim.n = 0;
}

bool loop_sim_active(void)
{
	return sim.on;
}

uint64_t loop_random(void)
{
	uint64_t v;

	if (sim.on) {
		/* xorshift64*: plenty for jitter, and the same for the same seed. */
		sim.rng ^= sim.rng >> 12;
		sim.rng ^= sim.rng << 25;
		sim.rng ^= sim.rng >> 27;
		return sim.rng * 0x2545f4914f6cdd1dull;
	}
	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = loop_clock_ns() ^ (uint64_t)(uintptr_t)&v;
	return v;
}

uint64_t loop_backoff_ns(unsigned *backoff_ms, unsigned min_ms, unsigned max_ms)
{
	unsigned base = *backoff_ms ? *backoff_ms : min_ms;
	uint64_t delay = base - base / 4 + loop_random() % (base / 2 + 1);

	*backoff_ms = base * 2 < max_ms ? base * 2 : max_ms;
	return delay * 1000000ull;
}

uint64_t loop_clock_ns(void)
{
	struct timespec ts;

	if (sim.on)
		return sim.now;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int loop_create(const struct loop_ops *ops, void *ctx, unsigned tick_ms, struct loop **out)
{
	struct loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!l)
		return -ENOMEM;
	l->ops = ops;
	l->ctx = ctx;
	l->tick_ns = (uint64_t)(tick_ms ? tick_ms : 50) * 1000000ull;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->epfd < 0 || l->wakefd < 0)
		goto fail;
	ev.data.fd = l->wakefd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) < 0)
		goto fail;
	pthread_mutex_init(&l->call_lock, NULL);
	pthread_cond_init(&l->call_done, NULL);
	l->now = loop_clock_ns();
	*out = l;
	return 0;
fail:;
	int err = -errno;
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->wakefd >= 0)
		close(l->wakefd);
	free(l);
	return err;
}

void loop_set_transport(struct loop *l, const struct rmr_transport_ops *tops, void *tp)
{
	l->tops = tops;
	l->tp = tp;
}

bool loop_on_thread(struct loop *l)
{
	return l->running && pthread_equal(pthread_self(), l->thread);
}

uint64_t loop_now(struct loop *l)
{
	return l->now;
}

void loop_wake(struct loop *l)
{
	uint64_t one = 1;

	if (atomic_exchange(&l->wake_pending, true))
		return;
	/* On the loop thread the flag is enough: the loop looks at it before it sleeps. */
	if (loop_on_thread(l))
		return;
	if (write(l->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("loop: eventfd write failed: %s", strerror(errno));
}

static void run_calls(struct loop *l)
{
	struct loop_call *list;

	pthread_mutex_lock(&l->call_lock);
	list = l->calls;
	l->calls = NULL;
	pthread_mutex_unlock(&l->call_lock);
	while (list) {
		struct loop_call *next = list->next;

		list->fn(list->arg);
		pthread_mutex_lock(&l->call_lock);
		list->done = true;
		pthread_cond_broadcast(&l->call_done);
		pthread_mutex_unlock(&l->call_lock);
		list = next;
	}
}

void loop_call(struct loop *l, void (*fn)(void *arg), void *arg)
{
	struct loop_call call = { .fn = fn, .arg = arg };

	if (!l->running || loop_on_thread(l)) {
		fn(arg);
		return;
	}
	pthread_mutex_lock(&l->call_lock);
	call.next = l->calls;
	l->calls = &call;
	pthread_mutex_unlock(&l->call_lock);
	/* Force the eventfd write: a pending wake may already have been consumed. */
	atomic_store(&l->wake_pending, false);
	loop_wake(l);
	pthread_mutex_lock(&l->call_lock);
	while (!call.done)
		pthread_cond_wait(&l->call_done, &l->call_lock);
	pthread_mutex_unlock(&l->call_lock);
}

struct watch_call {
	struct loop *l;
	int fd;
	void (*fn)(void *priv);
	void *priv;
	int ret;
};

static struct loop_watch *watch_find(struct loop *l, int fd)
{
	for (unsigned i = 0; i < l->nwatch; i++)
		if (l->watch[i].fd == fd)
			return &l->watch[i];
	return NULL;
}

static void do_watch(void *arg)
{
	struct watch_call *wc = arg;
	struct loop *l = wc->l;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = wc->fd };

	if (watch_find(l, wc->fd)) {
		wc->ret = -EEXIST;
	} else if (l->nwatch == LOOP_MAX_WATCH) {
		wc->ret = -ENOSPC;
	} else if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, wc->fd, &ev) < 0) {
		wc->ret = -errno;
	} else {
		l->watch[l->nwatch++] = (struct loop_watch){ wc->fd, wc->fn, wc->priv, false };
		wc->ret = 0;
	}
}

static void do_unwatch(void *arg)
{
	struct watch_call *wc = arg;
	struct loop *l = wc->l;
	struct loop_watch *w = watch_find(l, wc->fd);

	if (!w) {
		wc->ret = -ENOENT;
		return;
	}
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, wc->fd, NULL);
	*w = l->watch[--l->nwatch];
	wc->ret = 0;
}

int loop_watch(struct loop *l, int fd, void (*fn)(void *priv), void *priv)
{
	struct watch_call wc = { .l = l, .fd = fd, .fn = fn, .priv = priv };

	if (l->simulated || sim.on)
		return -EOPNOTSUPP;
	if (fd < 0 || fd == l->wakefd || !fn)
		return -EINVAL;
	loop_call(l, do_watch, &wc);
	return wc.ret;
}

int loop_unwatch(struct loop *l, int fd)
{
	struct watch_call wc = { .l = l, .fd = fd };

	loop_call(l, do_unwatch, &wc);
	return wc.ret;
}

void loop_poll_until(struct loop *l, uint64_t deadline_ns)
{
	l->poll_until = deadline_ns;
}

uint64_t loop_sleeps(struct loop *l)
{
	return atomic_load_explicit(&l->sleeps, memory_order_relaxed);
}

uint64_t loop_polls(struct loop *l)
{
	return atomic_load_explicit(&l->polls, memory_order_relaxed);
}

int loop_kick(struct loop *l, int fd)
{
	struct loop_watch *w;

	if (!loop_on_thread(l))
		return -EPERM;
	w = watch_find(l, fd);
	if (!w)
		return -ENOENT;
	w->kicked = l->kicked = true;
	return 0;
}

/* Call the kicked watches' fns (they may kick again: the next turn calls them). */
static void run_kicked(struct loop *l)
{
	l->kicked = false;
	for (unsigned i = 0; i < l->nwatch; i++) {
		if (!l->watch[i].kicked)
			continue;
		l->watch[i].kicked = false;
		l->watch[i].fn(l->watch[i].priv);
	}
}

/* An epoll event of fd @fd: the wake-up eventfd, or a consumer's descriptor. */
static void loop_event(struct loop *l, int fd)
{
	struct loop_watch *w;

	if (fd == l->wakefd) {
		atomic_store(&l->wake_pending, true);
		return;
	}
	w = watch_find(l, fd);
	if (w) {
		l->consumer_ready = true;
		w->kicked = false; /* this call serves the kick too */
		w->fn(w->priv);
	}
}

/*
 * Look at the loop's descriptors without sleeping and serve the ready
 * consumers' ones and the wake-up; the transport's are left to progress.
 * Only while a consumer's descriptor keeps being ready: a watch that is
 * only ever kicked (nbd-brmr's reply flush) never is, and costs no look.
 * @return whether any was served.
 */
static bool loop_poll_consumers(struct loop *l, int tfd)
{
	struct epoll_event evs[LOOP_MAX_WATCH + 2];
	bool served = false;
	int n;

	if (!l->consumer_ready)
		return false;
	l->consumer_ready = false; /* loop_event() sets it again */
	n = epoll_wait(l->epfd, evs, LOOP_MAX_WATCH + 2, 0);

	for (int i = 0; i < n; i++) {
		if (evs[i].data.fd == tfd)
			continue;
		loop_event(l, evs[i].data.fd);
		served = true;
	}
	return served;
}

static void handle_wake(struct loop *l)
{
	uint64_t v;

	if (read(l->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("loop: eventfd read failed: %s", strerror(errno));
	atomic_store(&l->wake_pending, false);
	run_calls(l);
	l->ops->wake(l->ctx);
}

static unsigned sim_step_loop(struct loop *l)
{
	unsigned events = 0;

	l->now = sim.now;
	if (l->tops)
		events += (unsigned)l->tops->progress(l->tp);
	if (atomic_load(&l->wake_pending)) {
		handle_wake(l);
		events++;
	}
	if (l->now >= l->next_tick) {
		l->ops->tick(l->ctx, l->now);
		l->next_tick = l->now + l->tick_ns;
	}
	return events;
}

unsigned loop_sim_step(void)
{
	unsigned events = 0;

	/* A loop may stop (and leave the list) while another one is stepped. */
	for (unsigned i = 0; i < sim.n; i++)
		events += sim_step_loop(sim.loops[i]);
	return events;
}

static void sim_settle(void)
{
	for (unsigned n = 0; loop_sim_step() > 0; n++) {
		if (n == SIM_QUIET_STEPS) {
			log_err("simulation: no quiet moment after %u steps", n);
			abort();
		}
	}
}

void loop_sim_run(uint64_t ns)
{
	uint64_t end = sim.now + ns;

	do {
		sim_settle();
		sim.now += 1000000ull;
	} while (sim.now < end);
	sim_settle();
}

void loop_sim_wait(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	if (loop_sim_step() == 0)
		sim.now += 1000000ull;
	pthread_mutex_lock(m);
}

static void *loop_thread(void *arg)
{
	struct loop *l = arg;
	int tfd = l->tops && l->tops->wait_fd ? l->tops->wait_fd(l->tp) : -1;
	uint64_t next_tick = loop_clock_ns() + l->tick_ns;
	uint64_t last_event = loop_clock_ns();

	if (tfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = tfd };

		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, tfd, &ev) < 0) {
			log_err("loop: cannot watch transport fd: %s", strerror(errno));
			tfd = -1;
		}
	}

	while (!atomic_load(&l->stop)) {
		int events = 0, timeout_ms;
		struct epoll_event evs[LOOP_MAX_WATCH + 2];

		l->now = loop_clock_ns();
		if (l->tops)
			events = l->tops->progress(l->tp);
		if (atomic_load(&l->wake_pending)) {
			handle_wake(l);
			events++;
		}
		l->now = loop_clock_ns();
		if (l->now >= next_tick) {
			l->ops->tick(l->ctx, l->now);
			next_tick = l->now + l->tick_ns;
		}
		/* Work a consumer queued for itself on this thread (completions). */
		if (l->kicked) {
			run_kicked(l);
			events++;
		}
		if (events > 0) {
			last_event = l->now;
			continue;
		}

		/* A busy consumer's descriptor is usually ready again by now: serve
		 * it before arming the transport for a sleep, which costs a
		 * provider several system calls (fi_trywait on every queue). Only
		 * consumers' descriptors count here: the transport's may stay
		 * readable until its trywait. */
		if (tfd >= 0 && l->nwatch && loop_poll_consumers(l, tfd))
			continue;

		timeout_ms = (int)((next_tick - l->now) / 1000000ull) + 1;
		if (l->poll_until > l->now) {
			/* Work is expected within microseconds: look, do not sleep. */
			timeout_ms = 0;
			atomic_fetch_add_explicit(&l->polls, 1, memory_order_relaxed);
		} else if (tfd < 0 && l->tops) {
			/* Polled transport: spin briefly after activity, then nap. */
			if (l->now - last_event < LOOP_SPIN_NS)
				timeout_ms = 0;
			else if (timeout_ms > LOOP_NAP_MS)
				timeout_ms = LOOP_NAP_MS;
		} else if (l->tops && l->tops->trywait(l->tp) != 0) {
			continue;
		}
		/* The consumer may have queued work on this thread since the last look. */
		if (atomic_load(&l->wake_pending))
			continue;
		if (timeout_ms)
			atomic_fetch_add_explicit(&l->sleeps, 1, memory_order_relaxed);
		int n = epoll_wait(l->epfd, evs, LOOP_MAX_WATCH + 2, timeout_ms);
		for (int i = 0; i < n; i++)
			loop_event(l, evs[i].data.fd);
	}
	/* Serve loop_call()s that raced with stop. */
	run_calls(l);
	return NULL;
}

int loop_start(struct loop *l, const char *thread_name)
{
	int err;

	if (sim.on) {
		if (sim.n == SIM_MAX_LOOPS)
			return -ENOSPC;
		l->simulated = true;
		l->now = sim.now;
		l->next_tick = sim.now + l->tick_ns;
		sim.loops[sim.n++] = l;
		return 0;
	}
	atomic_store(&l->stop, false);
	l->running = true;
	err = pthread_create(&l->thread, NULL, loop_thread, l);
	if (err) {
		l->running = false;
		return -err;
	}
	if (thread_name) {
		char name[16];

		snprintf(name, sizeof(name), "%s", thread_name);
		pthread_setname_np(l->thread, name);
	}
	return 0;
}

void loop_stop(struct loop *l)
{
	if (l->simulated) {
		for (unsigned i = 0; i < sim.n; i++) {
			if (sim.loops[i] == l) {
				sim.loops[i] = sim.loops[--sim.n];
				break;
			}
		}
		l->simulated = false;
		return;
	}
	if (!l->running)
		return;
	atomic_store(&l->stop, true);
	atomic_store(&l->wake_pending, false);
	loop_wake(l);
	pthread_join(l->thread, NULL);
	l->running = false;
}

void loop_destroy(struct loop *l)
{
	if (!l)
		return;
	loop_stop(l);
	close(l->epfd);
	close(l->wakefd);
	pthread_mutex_destroy(&l->call_lock);
	pthread_cond_destroy(&l->call_done);
	free(l);
}
