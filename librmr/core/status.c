/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rendering of status snapshots as a table for humans and as JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include <rmr/rmr.h>
#include <rmr/server.h>

struct out {
	char *buf;
	size_t len, used;
	bool overflow;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->used)
		o->overflow = true;
	else
		o->used += (size_t)n;
}

/* A JSON string; our strings are names, addresses and reasons, escaped anyway. */
static void put_json_str(struct out *o, const char *s)
{
	put(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			put(o, "\\%c", ch);
		else if (ch < 0x20)
			put(o, "\\u%04x", ch);
		else
			put(o, "%c", ch);
	}
	put(o, "\"");
}

static int finish(struct out *o)
{
	if (o->overflow)
		return -ENOSPC;
	return (int)o->used;
}

static void mask_list(uint64_t mask, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && used < len; id++) {
		if (!(mask & (1ull << id)))
			continue;
		int n = snprintf(buf + used, len - used, "%s%u", used ? "," : "", id);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

static void human_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	unsigned u = 0;

	while (d >= 1024 && u + 1 < RMR_ARRAY_SIZE(units)) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", d, units[u]);
}

RMR_EXPORT int rmr_pool_status_format(const struct rmr_pool_status *st, enum rmr_format fmt,
				      char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	char uuid[37], size[32], missed[192];

	if (!st || !buf || !len || (fmt != RMR_FORMAT_TEXT && fmt != RMR_FORMAT_JSON))
		return -EINVAL;
	buf[0] = '\0';
	rmr_uuid_format(&st->uuid, uuid);
	mask_list(st->missed_mask, missed, sizeof(missed));

	if (fmt == RMR_FORMAT_JSON) {
		put(&o, "{\"role\":\"client\",\"pool\":");
		put_json_str(&o, st->name);
		put(&o, ",\"uuid\":\"%s\",\"size\":%" PRIu64 ",\"chunk_size\":%u,\"map_ver\":%" PRIu64
			",\"queue_depth\":%u,\"inflight\":%u,\"normal_members\":%u,\"missed\":[",
		    uuid, st->pool_size, st->chunk_size, st->map_ver, st->queue_depth, st->inflight,
		    st->normal_members);
		for (unsigned id = 1, first = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			if (st->missed_mask & (1ull << id)) {
				put(&o, "%s%u", first ? "" : ",", id);
				first = 0;
			}
		}
		put(&o, "],\"members\":[");
		for (unsigned i = 0; i < st->nmembers && i < RMR_MAX_MEMBERS; i++) {
			const struct rmr_member_status *m = &st->members[i];

			put(&o, "%s{\"id\":%u,\"addr\":", i ? "," : "", m->member_id);
			put_json_str(&o, m->addr);
			put(&o, ",\"state\":\"%s\",\"reason\":", rmr_member_state_name(m->state));
			put_json_str(&o, m->reason);
			put(&o, ",\"map_ver\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
				",\"read_bytes\":%" PRIu64 ",\"write_bytes\":%" PRIu64
				",\"errors\":%" PRIu64 ",\"reconnects\":%" PRIu64 ",\"inflight\":%u"
				",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
				",\"resync_bytes\":%" PRIu64 ",\"map_updates\":%" PRIu64 "}",
			    m->map_ver, m->reads, m->writes, m->read_bytes, m->write_bytes, m->errors,
			    m->reconnects, m->inflight, m->tx_bytes, m->rx_bytes, m->resync_bytes,
			    m->map_updates);
		}
		put(&o, "]}\n");
		return finish(&o);
	}

	human_bytes(st->pool_size, size, sizeof(size));
	put(&o, "pool %s  uuid %s  size %s  chunk %u KiB\n", st->name, uuid, size,
	    st->chunk_size / 1024);
	put(&o, "client: %u of %u members normal, map version %" PRIu64
		", missed writes: %s, %u of %u slots busy\n",
	    st->normal_members, st->nmembers, st->map_ver, missed, st->inflight, st->queue_depth);
	put(&o, "%-3s %-22s %-13s %10s %10s %10s %10s %6s %5s %7s  %s\n", "ID", "ADDRESS",
	    "STATE", "READS", "WRITES", "READ", "WRITTEN", "ERRORS", "RECON", "RESYNC", "REASON");
	for (unsigned i = 0; i < st->nmembers && i < RMR_MAX_MEMBERS; i++) {
		const struct rmr_member_status *m = &st->members[i];
		char id[8], rb[32], wb[32], sb[32];

		if (m->member_id)
			snprintf(id, sizeof(id), "%u", m->member_id);
		else
			snprintf(id, sizeof(id), "?");
		human_bytes(m->read_bytes, rb, sizeof(rb));
		human_bytes(m->write_bytes, wb, sizeof(wb));
		human_bytes(m->resync_bytes, sb, sizeof(sb));
		put(&o, "%-3s %-22s %-13s %10" PRIu64 " %10" PRIu64 " %10s %10s %6" PRIu64
			" %5" PRIu64 " %7s  %s\n",
		    id, m->addr, rmr_member_state_name(m->state), m->reads, m->writes, rb, wb,
		    m->errors, m->reconnects, sb, m->reason);
	}
	return finish(&o);
}

/* "2(16 chunks),3" : members recorded as having missed writes, with the chunks known. */
static void missed_with_dirty(const struct rmr_server_pool_status *p, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && used < len; id++) {
		int n;

		if (!(p->missed_mask & (1ull << id)) && !p->dirty_chunks[id])
			continue;
		if (p->dirty_chunks[id])
			n = snprintf(buf + used, len - used, "%s%u(%" PRIu64 " chunks)",
				     used ? "," : "", id, p->dirty_chunks[id]);
		else
			n = snprintf(buf + used, len - used, "%s%u", used ? "," : "", id);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* "  resync: 120/500 chunks (24%), 35.2 MiB/s, ETA 11 s": only while there is one. */
static void put_resync_line(struct out *o, const struct rmr_server_pool_status *p)
{
	char rate[32], copied[32];
	uint64_t pct;

	if (p->resync_total == 0 || (p->resync_done == p->resync_total && !p->resync_running))
		return;
	pct = p->resync_done * 100 / p->resync_total;
	human_bytes(p->resync_bps, rate, sizeof(rate));
	human_bytes(p->resync_bytes, copied, sizeof(copied));
	put(o, "  resync: %" PRIu64 "/%" PRIu64 " chunks (%" PRIu64 "%%), %s copied, %s/s",
	    p->resync_done, p->resync_total, pct, copied, rate);
	if (p->resync_eta_s)
		put(o, ", ETA %" PRIu64 " s", p->resync_eta_s);
	if (p->resync_waiting)
		put(o, ", waiting for a peer that holds the chunks");
	put(o, "\n");
}

/* "  peers: 1 up, 3 down (connection lost: ...)" */
static void put_peers_line(struct out *o, const struct rmr_server_pool_status *p)
{
	if (!p->npeers)
		return;
	put(o, "  peers:");
	for (unsigned k = 0; k < p->npeers && k < RMR_MAX_MEMBERS; k++) {
		const struct rmr_peer_status *ps = &p->peers[k];

		if (ps->connected)
			put(o, "%s %u up", k ? "," : "", ps->member_id);
		else
			put(o, "%s %u down (%s)", k ? "," : "", ps->member_id, ps->reason);
	}
	put(o, "\n");
}

RMR_EXPORT int rmr_server_status_format(const struct rmr_server_status *st, enum rmr_format fmt,
					char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };

	if (!st || !buf || !len || (fmt != RMR_FORMAT_TEXT && fmt != RMR_FORMAT_JSON))
		return -EINVAL;
	buf[0] = '\0';
	if (fmt == RMR_FORMAT_JSON) {
		put(&o, "{\"role\":\"member\",\"listen\":");
		put_json_str(&o, st->listen_addr);
		put(&o, ",\"sessions\":%u,\"rejected\":%" PRIu64 ",\"pools\":[", st->sessions,
		    st->rejected);
	} else {
		put(&o, "member server %s: %u sessions, %" PRIu64 " refused\n", st->listen_addr,
		    st->sessions, st->rejected);
		put(&o, "%-16s %-3s %-9s %8s %10s %10s %10s %10s %6s  %s\n", "POOL", "ID", "SIZE",
		    "SESSIONS", "READS", "WRITES", "READ", "WRITTEN", "ERRORS", "MISSED-BY");
	}
	for (unsigned i = 0; i < st->npools && i < RMR_SERVER_MAX_POOLS; i++) {
		const struct rmr_server_pool_status *p = &st->pools[i];
		char uuid[37], missed[192], size[32], rb[32], wb[32];

		rmr_uuid_format(&p->uuid, uuid);
		missed_with_dirty(p, missed, sizeof(missed));
		if (fmt == RMR_FORMAT_JSON) {
			put(&o, "%s{\"pool\":", i ? "," : "");
			put_json_str(&o, p->name);
			put(&o, ",\"uuid\":\"%s\",\"member_id\":%u,\"size\":%" PRIu64
				",\"chunk_size\":%u,\"map_ver\":%" PRIu64 ",\"missed\":[",
			    uuid, p->member_id, p->pool_size, p->chunk_size, p->map_ver);
			for (unsigned id = 1, first = 1; id <= RMR_MAX_MEMBER_ID; id++) {
				if (p->missed_mask & (1ull << id)) {
					put(&o, "%s%u", first ? "" : ",", id);
					first = 0;
				}
			}
			put(&o, "],\"dirty_chunks\":{");
			for (unsigned id = 1, first = 1; id <= RMR_MAX_MEMBER_ID; id++) {
				if (p->dirty_chunks[id]) {
					put(&o, "%s\"%u\":%" PRIu64, first ? "" : ",", id,
					    p->dirty_chunks[id]);
					first = 0;
				}
			}
			put(&o, "},\"sessions\":%u,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
				",\"read_bytes\":%" PRIu64 ",\"write_bytes\":%" PRIu64
				",\"errors\":%" PRIu64 ",\"meta_saves\":%" PRIu64
				",\"map_writes\":%" PRIu64 ",\"map_pulls\":%" PRIu64,
			    p->sessions, p->reads, p->writes, p->read_bytes, p->write_bytes, p->errors,
			    p->meta_saves, p->map_writes, p->map_pulls);
			put(&o, ",\"resync\":{\"running\":%s,\"waiting\":%s,\"done\":%" PRIu64
				",\"total\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"bps\":%" PRIu64
				",\"eta_s\":%" PRIu64 ",\"rate_limit\":%" PRIu64
				",\"sync_queue_depth\":%u,\"served_bytes\":%" PRIu64 "},\"peers\":[",
			    p->resync_running ? "true" : "false", p->resync_waiting ? "true" : "false",
			    p->resync_done, p->resync_total, p->resync_bytes, p->resync_bps,
			    p->resync_eta_s, p->resync_rate_limit, p->sync_queue_depth,
			    p->served_sync_bytes);
			for (unsigned k = 0; k < p->npeers && k < RMR_MAX_MEMBERS; k++) {
				const struct rmr_peer_status *ps = &p->peers[k];

				put(&o, "%s{\"id\":%u,\"addr\":", k ? "," : "", ps->member_id);
				put_json_str(&o, ps->addr);
				put(&o, ",\"connected\":%s,\"map_ver\":%" PRIu64
					",\"sync_bytes\":%" PRIu64 ",\"map_bytes\":%" PRIu64
					",\"reconnects\":%" PRIu64 ",\"reason\":",
				    ps->connected ? "true" : "false", ps->map_ver, ps->sync_bytes,
				    ps->map_bytes, ps->reconnects);
				put_json_str(&o, ps->reason);
				put(&o, "}");
			}
			put(&o, "]}");
			continue;
		}
		human_bytes(p->pool_size, size, sizeof(size));
		human_bytes(p->read_bytes, rb, sizeof(rb));
		human_bytes(p->write_bytes, wb, sizeof(wb));
		put(&o, "%-16s %-3u %-9s %8u %10" PRIu64 " %10" PRIu64 " %10s %10s %6" PRIu64 "  %s\n",
		    p->name, p->member_id, size, p->sessions, p->reads, p->writes, rb, wb, p->errors,
		    missed);
		put_resync_line(&o, p);
		put_peers_line(&o, p);
	}
	if (fmt == RMR_FORMAT_JSON)
		put(&o, "]}\n");
	return finish(&o);
}
