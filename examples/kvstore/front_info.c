/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * INFO: sections of "field:value" lines as Redis prints them. The
 * replication section comes from rmr_client_status(): one line per member
 * with its state and counters, resync_bytes included (always 0: members
 * copy missed buckets from each other, never through the front).
 */
#include "front.h"
#include "kv_util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void __attribute__((format(printf, 2, 3))) line(struct kv_buf *b, const char *fmt, ...)
{
	char s[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(s))
		n = sizeof(s) - 1;
	kv_buf_append(b, s, (size_t)n);
	kv_buf_append(b, "\r\n", 2);
}

static void section_server(struct front *f, struct kv_buf *b)
{
	char uuid[37];
	struct rmr_pool_status *st = calloc(1, sizeof(*st));

	line(b, "# Server");
	line(b, "kvstore_mode:front");
	line(b, "process_id:%ld", (long)getpid());
	line(b, "listen:%s", f->listen_addr);
	line(b, "uptime_in_seconds:%" PRIu64, (kv_mono_ms() - f->start_ms) / 1000);
	line(b, "pool:%s", f->cfg.pool);
	if (st) {
		st->size = sizeof(*st);
		if (rmr_client_status(f->client, st) == 0) {
			rmr_uuid_format(&st->uuid, uuid);
			line(b, "pool_uuid:%s", uuid);
		}
		free(st);
	}
	line(b, "buckets:%" PRIu64, f->nbuckets);
	line(b, "bucket_size:%" PRIu32, f->bucket_size);
	line(b, "max_key_plus_value:%" PRIu32, f->max_kv);
	line(b, "max_io_size:%" PRIu32, f->max_io);
	line(b, "queue_depth:%" PRIu32, f->qd);
	line(b, "max_frame:%zu", f->cfg.max_frame);
}

static void section_clients(struct front *f, struct kv_buf *b)
{
	line(b, "# Clients");
	line(b, "connected_clients:%u", f->nconns);
	line(b, "maxclients:%u", f->cfg.max_clients);
}

static void section_stats(struct front *f, struct kv_buf *b)
{
	line(b, "# Stats");
	line(b, "total_connections_received:%" PRIu64, f->total_connections);
	line(b, "rejected_connections:%" PRIu64, f->rejected_connections);
	line(b, "total_commands_processed:%" PRIu64, f->total_commands);
	line(b, "protocol_errors:%" PRIu64, f->protocol_errors);
	line(b, "oversized_frames:%" PRIu64, f->oversized_frames);
	line(b, "pool_requests:%" PRIu64, f->rmr_requests);
	line(b, "pool_request_errors:%" PRIu64, f->rmr_errors);
	line(b, "pool_requests_in_flight:%u", f->inflight);
	line(b, "expired_keys_deleted:%" PRIu64, f->expired_deleted);
}

/* A member's reason, safe inside "a=b,c=d": no separators, no line ends. */
static void clean_reason(char *s)
{
	for (; *s; s++)
		if (*s == ',' || *s == '\r' || *s == '\n' || *s == '=')
			*s = ';';
}

static void section_replication(struct front *f, struct kv_buf *b)
{
	struct rmr_pool_status *st = calloc(1, sizeof(*st));

	line(b, "# Replication");
	line(b, "role:front");
	if (!st)
		return;
	st->size = sizeof(*st);
	if (rmr_client_status(f->client, st) < 0) {
		free(st);
		return;
	}
	line(b, "pool:%s", st->name);
	line(b, "writer_epoch:%" PRIu64, st->writer_epoch);
	line(b, "fenced:%d", st->fenced ? 1 : 0);
	line(b, "map_ver:%" PRIu64, st->map_ver);
	line(b, "missed_mask:0x%" PRIx64, st->missed_mask);
	line(b, "members:%u", st->nmembers);
	line(b, "normal_members:%u", st->normal_members);
	line(b, "keyed:%d", f->cfg.keyed ? 1 : 0);
	line(b, "auth_refused:%" PRIu64, st->auth_refused);
	for (unsigned i = 0; i < st->nmembers; i++) {
		struct rmr_member_status *m = &st->members[i];

		clean_reason(m->reason);
		line(b, "member%u:id=%u,addr=%s,state=%s,reason=%s,map_ver=%" PRIu64 ",reads=%" PRIu64
			",writes=%" PRIu64 ",errors=%" PRIu64 ",inflight=%u,reconnects=%" PRIu64
			",read_bytes=%" PRIu64 ",write_bytes=%" PRIu64 ",tx_bytes=%" PRIu64
			",rx_bytes=%" PRIu64 ",resync_bytes=%" PRIu64 ",map_updates=%" PRIu64,
		     i, m->member_id, m->addr, rmr_member_state_name(m->state), m->reason, m->map_ver,
		     m->reads, m->writes, m->errors, m->inflight, m->reconnects, m->read_bytes,
		     m->write_bytes, m->tx_bytes, m->rx_bytes, m->resync_bytes, m->map_updates);
	}
	free(st);
}

static const struct {
	const char *name;
	void (*fn)(struct front *f, struct kv_buf *b);
} sections[] = {
	{ "server", section_server },
	{ "clients", section_clients },
	{ "stats", section_stats },
	{ "replication", section_replication },
};

#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

void front_info(struct front *f, struct kv_buf *out, unsigned nnames, const struct resp_arg *names)
{
	bool want[NSECTIONS] = { false };
	bool first = true;

	for (unsigned k = 0; k < NSECTIONS; k++)
		want[k] = nnames == 0;
	for (unsigned i = 0; i < nnames; i++) {
		const struct resp_arg *a = &names[i];

		for (unsigned k = 0; k < NSECTIONS; k++)
			if ((a->len == 3 && !strncasecmp(a->p, "all", 3)) ||
			    (a->len == 7 && !strncasecmp(a->p, "default", 7)) ||
			    (a->len == 10 && !strncasecmp(a->p, "everything", 10)) ||
			    (a->len == strlen(sections[k].name) &&
			     !strncasecmp(a->p, sections[k].name, a->len)))
				want[k] = true;
	}
	for (unsigned k = 0; k < NSECTIONS; k++) {
		if (!want[k])
			continue;
		if (!first)
			kv_buf_append(out, "\r\n", 2);
		first = false;
		sections[k].fn(f, out);
	}
}
