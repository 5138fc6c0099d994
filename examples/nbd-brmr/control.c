/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control.c: the control socket (--control PATH), spoken by `brmrctl status`,
 * `brmrctl metrics`, `brmrctl events` and `brmrctl maintenance`, and the
 * client's events.
 *
 * Protocol: the client connects, writes one line and reads the answer until
 * the server closes:
 *   "status text", "status json", "status prometheus" ("status" alone means
 *       text): the output of rmr_pool_status_format(), newline-terminated;
 *   "maintenance on ID", "maintenance off ID": "ok\n";
 *   "add-member ID ADDR" (a new member), "add-member ID" (attach a detached
 *       one again), "remove-member ID", "remove-member ID detach": "ok\n"
 *       once the members took the change;
 *   "events": the current state and then every change, one JSON object a
 *       line, until either side closes (see tools/evstream.h);
 *   "events now": the current state only.
 * Anything else, or a refused action, is answered "error: REASON\n". Served
 * on the main thread, one client at a time; short socket timeouts keep a
 * silent client from stalling it, and event listeners never block it.
 */
#include "nbdb.h"
#include "../../tools/control_line.h"
#include "../../tools/evstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CONTROL_LINE_MAX 256
#define CONTROL_TIMEOUT_MS 1000
/* Status output: grows from the first size up to the last on -ENOSPC. */
#define CONTROL_OUT_FIRST (16u * 1024)
#define CONTROL_OUT_MAX (1024u * 1024)
#define ROLE "client"

_Static_assert(NBDB_CONTROL_POLLFDS >= EVSTREAM_MAX_LISTENERS + 2, "room for every listener");

static void send_all(int fd, const char *s, size_t n)
{
	/* Best effort: a client that left early misses its answer. */
	(void)nbdb_write_full(fd, s, n);
}

static void answer_status(int fd, struct brmr_dev *dev, enum rmr_format fmt)
{
	struct rmr_pool_status *st;
	size_t size = CONTROL_OUT_FIRST;
	char *out = NULL;
	int rc;

	st = calloc(1, sizeof(*st));
	if (!st) {
		send_all(fd, "error: out of memory\n", 21);
		return;
	}
	st->size = sizeof(*st);
	rc = rmr_client_status(brmr_client(dev), st);
	if (rc < 0) {
		send_all(fd, "error: status unavailable\n", 26);
		goto out;
	}
	for (;;) {
		char *n = realloc(out, size);

		if (!n) {
			rc = -ENOMEM;
			break;
		}
		out = n;
		rc = rmr_pool_status_format(st, fmt, out, size);
		if (rc != -ENOSPC || size >= CONTROL_OUT_MAX)
			break;
		size *= 2;
	}
	if (rc < 0) {
		send_all(fd, "error: cannot format status\n", 28);
		goto out;
	}
	send_all(fd, out, (size_t)rc);
	if (rc == 0 || out[rc - 1] != '\n')
		send_all(fd, "\n", 1);
out:
	free(out);
	free(st);
}

/* "on ID" or "off ID": take a member out of I/O, or put it back. */
static void answer_maintenance(int fd, struct brmr_dev *dev, const char *args)
{
	char word[8], extra, msg[128];
	unsigned id;
	int ret, n;

	if (sscanf(args, "%7s %u %c", word, &id, &extra) != 2 || id == 0 || id > RMR_MAX_MEMBER_ID ||
	    (strcmp(word, "on") && strcmp(word, "off"))) {
		n = snprintf(msg, sizeof(msg), "error: usage: maintenance on|off MEMBER-ID\n");
	} else {
		ret = rmr_client_set_maintenance(brmr_client(dev), (uint16_t)id, !strcmp(word, "on"));
		if (ret == 0) {
			nbdb_log_member(NBDB_NOTICE, id, "maintenance %s (operator)", word);
			n = snprintf(msg, sizeof(msg), "ok\n");
		} else if (ret == -ENOENT) {
			n = snprintf(msg, sizeof(msg), "error: no member %u in this pool\n", id);
		} else if (ret == -EALREADY) {
			n = snprintf(msg, sizeof(msg), "error: member %u is %s in maintenance\n", id,
				     strcmp(word, "on") ? "not" : "already");
		} else if (ret == -EBUSY) {
			n = snprintf(msg, sizeof(msg),
				     "error: member %u is not normal, or the last normal member\n", id);
		} else {
			n = snprintf(msg, sizeof(msg), "error: %s\n", strerror(-ret));
		}
	}
	send_all(fd, msg, (size_t)n);
}

/* "ID [ADDR]": add a member, or attach a detached one again. */
_Static_assert(RMR_ADDR_MAX == 107, "the sscanf width below");
static void answer_add_member(int fd, struct brmr_dev *dev, const char *args)
{
	char addr[RMR_ADDR_MAX + 2] = "", extra, msg[192];
	unsigned id;
	int ret, n, got = sscanf(args, "%u %107s %c", &id, addr, &extra);

	if (got < 1 || got > 2 || id == 0 || id > RMR_MAX_MEMBER_ID) {
		n = snprintf(msg, sizeof(msg), "error: usage: add-member MEMBER-ID [ADDRESS]\n");
	} else {
		ret = rmr_client_add_member(brmr_client(dev), (uint16_t)id, got == 2 ? addr : NULL);
		if (ret == 0) {
			nbdb_log_member(NBDB_NOTICE, id, "%s (operator)",
					got == 2 ? "added to the pool" : "attached again");
			n = snprintf(msg, sizeof(msg), "ok\n");
		} else if (ret == -EEXIST) {
			n = snprintf(msg, sizeof(msg), "error: member %u is in the pool already\n", id);
		} else if (ret == -EINVAL) {
			n = snprintf(msg, sizeof(msg), "error: %s\n",
				     got == 2 ? "bad address" : "a new member needs an address");
		} else if (ret == -ENOSPC) {
			n = snprintf(msg, sizeof(msg), "error: the pool has %u members already\n",
				     RMR_MAX_MEMBERS);
		} else if (ret == -EBUSY) {
			n = snprintf(msg, sizeof(msg), "error: another membership change runs\n");
		} else {
			n = snprintf(msg, sizeof(msg), "error: %s\n", strerror(-ret));
		}
	}
	send_all(fd, msg, (size_t)n);
}

/* "ID" or "ID detach": delete a member from the pool, or detach it. */
static void answer_remove_member(int fd, struct brmr_dev *dev, const char *args)
{
	char word[8] = "", extra, msg[192];
	unsigned id;
	int ret, n, got = sscanf(args, "%u %7s %c", &id, word, &extra);

	if (got < 1 || got > 2 || id == 0 || id > RMR_MAX_MEMBER_ID ||
	    (got == 2 && strcmp(word, "detach"))) {
		n = snprintf(msg, sizeof(msg), "error: usage: remove-member MEMBER-ID [detach]\n");
	} else {
		ret = rmr_client_remove_member(brmr_client(dev), (uint16_t)id, got == 2);
		if (ret == 0) {
			nbdb_log_member(NBDB_NOTICE, id, "%s (operator)",
					got == 2 ? "detached" : "removed from the pool");
			n = snprintf(msg, sizeof(msg), "ok\n");
		} else if (ret == -ENOENT) {
			n = snprintf(msg, sizeof(msg), "error: no member %u in this pool\n", id);
		} else if (ret == -EALREADY) {
			n = snprintf(msg, sizeof(msg), "error: member %u is detached already\n", id);
		} else if (ret == -EBUSY) {
			n = snprintf(msg, sizeof(msg),
				     "error: refused: no other member is normal, fewer than min_legs would stay, a remaining member still resyncs, or another change runs\n");
		} else {
			n = snprintf(msg, sizeof(msg), "error: %s\n", strerror(-ret));
		}
	}
	send_all(fd, msg, (size_t)n);
}

/* ---- events ---------------------------------------------------------------- */

static void publish(struct nbdb_control *ctl, struct evline *l)
{
	const char *line = evline_end(l);

	if (line)
		evstream_publish(ctl->ev, line);
}

/* librmr logs the transition itself, with its reason. */
static void on_member_state(void *priv, unsigned index, uint16_t member_id, const char *addr,
			    enum rmr_member_state from, enum rmr_member_state to, const char *reason)
{
	struct nbdb_control *ctl = priv;
	struct evline l;

	(void)index;
	evline_begin(&l, ROLE, "change", "member_state", ctl->pool);
	evline_u64(&l, "member", member_id);
	evline_str(&l, "addr", addr);
	evline_str(&l, "from", rmr_member_state_name(from));
	evline_str(&l, "state", rmr_member_state_name(to));
	evline_str(&l, "reason", reason ? reason : "");
	publish(ctl, &l);
}

static void on_dirty_tracking(void *priv, uint16_t member_id, bool tracking)
{
	struct nbdb_control *ctl = priv;
	struct evline l;

	nbdb_log_member(NBDB_NOTICE, member_id, "%s",
			tracking ? "misses writes: the others track its chunks"
				 : "took the dirty maps and resyncs from its peers");
	evline_begin(&l, ROLE, "change", "dirty_tracking", ctl->pool);
	evline_u64(&l, "member", member_id);
	evline_bool(&l, "tracking", tracking);
	publish(ctl, &l);
}

static void on_map_update(void *priv, uint16_t member_id, uint16_t source_id, int status)
{
	struct nbdb_control *ctl = priv;
	struct evline l;

	nbdb_log_member(status ? NBDB_WARN : NBDB_NOTICE, member_id, "map update from member %u %s%s",
			source_id, status ? "failed: " : "done", status ? strerror(-status) : "");
	evline_begin(&l, ROLE, "change", "map_update", ctl->pool);
	evline_u64(&l, "member", member_id);
	evline_u64(&l, "from", source_id);
	evline_int(&l, "status", status);
	evline_str(&l, "error", status ? strerror(-status) : NULL);
	publish(ctl, &l);
}

const struct rmr_client_ops nbdb_client_ops = {
	.size = sizeof(nbdb_client_ops),
	.member_state = on_member_state,
	.dirty_tracking = on_dirty_tracking,
	.map_update = on_map_update,
};

/* The current state as "exists" lines, then "exists-done". @return a
 * malloc'd text, or NULL. */
static char *render_exists(struct nbdb_control *ctl, size_t *len)
{
	struct rmr_pool_status *st = calloc(1, sizeof(*st));
	struct evline l;
	char *text = NULL, uuid[37];
	FILE *f;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	if (rmr_client_status(brmr_client(ctl->dev), st) < 0 || !(f = open_memstream(&text, len))) {
		free(st);
		return NULL;
	}
	rmr_uuid_format(&st->uuid, uuid);
	evline_begin(&l, ROLE, "exists", "pool", st->name);
	evline_str(&l, "uuid", uuid);
	evline_u64(&l, "size", st->pool_size);
	evline_u64(&l, "chunk_size", st->chunk_size);
	evline_u64(&l, "members", st->nmembers);
	evline_u64(&l, "normal_members", st->normal_members);
	evline_u64(&l, "map_ver", st->map_ver);
	evline_u64(&l, "writer_epoch", st->writer_epoch);
	evline_bool(&l, "fenced", st->fenced);
	evline_put(f, &l);
	for (unsigned i = 0; i < st->nmembers && i < RMR_MAX_MEMBERS; i++) {
		const struct rmr_member_status *m = &st->members[i];

		evline_begin(&l, ROLE, "exists", "member_state", st->name);
		evline_u64(&l, "member", m->member_id);
		evline_str(&l, "addr", m->addr);
		evline_str(&l, "state", rmr_member_state_name(m->state));
		evline_str(&l, "reason", m->reason);
		evline_put(f, &l);
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (!(st->missed_mask & (1ull << id)))
			continue;
		evline_begin(&l, ROLE, "exists", "dirty_tracking", st->name);
		evline_u64(&l, "member", id);
		evline_bool(&l, "tracking", true);
		evline_put(f, &l);
	}
	evline_begin(&l, ROLE, "exists-done", NULL, NULL);
	evline_put(f, &l);
	free(st);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* "events" or "events now". Takes @p fd. */
static void answer_events(struct nbdb_control *ctl, int fd, bool now)
{
	size_t len = 0;
	char *text;
	int slot = -1;

	if (!now) {
		slot = evstream_attach(ctl->ev, fd);
		if (slot < 0) {
			send_all(fd, "error: too many events listeners\n", 33);
			close(fd);
			return;
		}
	}
	/* After the attach: no change falls between the state and the stream. */
	text = render_exists(ctl, &len);
	if (!text) {
		text = strdup("error: status unavailable\n");
		len = text ? strlen(text) : 0;
	}
	if (now) {
		send_all(fd, text ? text : "", len);
		close(fd);
	} else {
		evstream_start(ctl->ev, slot, text ? text : "", len);
	}
	free(text);
}

/* ---- the socket -------------------------------------------------------------- */

static void serve_one(struct nbdb_control *ctl)
{
	char line[CONTROL_LINE_MAX];
	int fd = control_accept_line(ctl->lfd, CONTROL_TIMEOUT_MS, line, sizeof(line));

	if (fd < 0)
		return;
	if (strcmp(line, "status text") == 0 || strcmp(line, "status") == 0)
		answer_status(fd, ctl->dev, RMR_FORMAT_TEXT);
	else if (strcmp(line, "status json") == 0)
		answer_status(fd, ctl->dev, RMR_FORMAT_JSON);
	else if (strcmp(line, "status prometheus") == 0)
		answer_status(fd, ctl->dev, RMR_FORMAT_PROMETHEUS);
	else if (strncmp(line, "maintenance ", 12) == 0)
		answer_maintenance(fd, ctl->dev, line + 12);
	else if (strncmp(line, "add-member ", 11) == 0)
		answer_add_member(fd, ctl->dev, line + 11);
	else if (strncmp(line, "remove-member ", 14) == 0)
		answer_remove_member(fd, ctl->dev, line + 14);
	else if (strcmp(line, "events") == 0 || strcmp(line, "events now") == 0) {
		answer_events(ctl, fd, strcmp(line, "events now") == 0);
		return; /* answer_events() took the descriptor */
	} else
		send_all(fd, "error: unknown command\n", 23);
	close(fd);
}

int nbdb_control_init(struct nbdb_control *ctl, const char *pool)
{
	int ret;

	ctl->lfd = -1;
	ctl->pool = pool;
	ctl->ev = calloc(1, sizeof(*ctl->ev));
	if (!ctl->ev)
		return -ENOMEM;
	ret = evstream_init(ctl->ev, "control socket");
	if (ret < 0) {
		free(ctl->ev);
		ctl->ev = NULL;
	}
	return ret;
}

void nbdb_control_start(struct nbdb_control *ctl, int lfd, struct brmr_dev *dev, const char *path)
{
	ctl->lfd = lfd;
	ctl->dev = dev;
	ctl->ev->what = path;
}

unsigned nbdb_control_pollfds(struct nbdb_control *ctl, struct pollfd *pfd)
{
	if (ctl->lfd < 0 || !ctl->dev)
		return 0;
	pfd[0] = (struct pollfd){ .fd = ctl->lfd, .events = POLLIN };
	return 1 + evstream_pollfds(ctl->ev, pfd + 1);
}

void nbdb_control_handle(struct nbdb_control *ctl, const struct pollfd *pfd, unsigned n)
{
	if (!n)
		return;
	/* Listeners first: a socket closed here is not in pfd any more. */
	evstream_handle(ctl->ev, pfd + 1, n - 1);
	if (pfd[0].revents & POLLIN)
		serve_one(ctl);
}

void nbdb_control_destroy(struct nbdb_control *ctl)
{
	if (!ctl->ev)
		return;
	evstream_destroy(ctl->ev);
	free(ctl->ev);
	ctl->ev = NULL;
}
