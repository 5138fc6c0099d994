/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rendering of status snapshots as a table for humans and as JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
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

static int pool_status_prometheus(const struct rmr_pool_status *st, char *buf, size_t len);
static int server_status_prometheus(const struct rmr_server_status *st, char *buf, size_t len);

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

	if (st && buf && len && fmt == RMR_FORMAT_PROMETHEUS)
		return pool_status_prometheus(st, buf, len);
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
				",\"resync_bytes\":%" PRIu64 ",\"map_updates\":%" PRIu64
				",\"unflushed_chunks\":%" PRIu64 ",\"record_chunks_queued\":%" PRIu64 "}",
			    m->map_ver, m->reads, m->writes, m->read_bytes, m->write_bytes, m->errors,
			    m->reconnects, m->inflight, m->tx_bytes, m->rx_bytes, m->resync_bytes,
			    m->map_updates, m->unflushed_chunks, m->record_chunks_queued);
		}
		put(&o, "],\"writer_epoch\":%" PRIu64 ",\"fenced\":%s,\"auth_refused\":%" PRIu64
			",\"loop_sleeps\":%" PRIu64 ",\"loop_polls\":%" PRIu64 "}\n", st->writer_epoch,
		    st->fenced ? "true" : "false", st->auth_refused, st->loop_sleeps, st->loop_polls);
		return finish(&o);
	}

	human_bytes(st->pool_size, size, sizeof(size));
	put(&o, "pool %s  uuid %s  size %s  chunk %u KiB\n", st->name, uuid, size,
	    st->chunk_size / 1024);
	put(&o, "client: %u of %u members normal, map version %" PRIu64
		", missed writes: %s, %u of %u slots busy\n",
	    st->normal_members, st->nmembers, st->map_ver, missed, st->inflight, st->queue_depth);
	put(&o, "writer epoch %" PRIu64 ", %" PRIu64 " sessions refused authentication, "
		"event loop slept %" PRIu64 " times, polled %" PRIu64 " times%s\n",
	    st->writer_epoch, st->auth_refused, st->loop_sleeps, st->loop_polls,
	    st->fenced ? "  FENCED: another writer took the pool over, all I/O fails" : "");
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
	/* What a power loss of a member's host could take, and records nobody took yet. */
	for (unsigned i = 0; i < st->nmembers && i < RMR_MAX_MEMBERS; i++) {
		const struct rmr_member_status *m = &st->members[i];

		if (m->unflushed_chunks || m->record_chunks_queued)
			put(&o, "member %u: %" PRIu64 " chunks written since its last flush, %" PRIu64
				" chunks to record as maybe lost (waiting for a member to take them)\n",
			    m->member_id, m->unflushed_chunks, m->record_chunks_queued);
	}
	return finish(&o);
}

/* ",\"KEY\":{\"ID\":N,...}": the nonzero counts of @v, by member id. */
static void put_id_counts(struct out *o, const char *key, const uint64_t *v)
{
	put(o, ",\"%s\":{", key);
	for (unsigned id = 1, first = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (v[id]) {
			put(o, "%s\"%u\":%" PRIu64, first ? "" : ",", id, v[id]);
			first = 0;
		}
	}
	put(o, "}");
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
		if (p->record_chunks[id])
			n = snprintf(buf + used, len - used, "%s%u(%" PRIu64 " chunks, %" PRIu64
				     " maybe lost)", used ? "," : "", id, p->dirty_chunks[id],
				     p->record_chunks[id]);
		else if (p->dirty_chunks[id])
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

/* ",\"NAME\":[1,2,3]": the member ids in @mask. */
static void put_ids_json(struct out *o, const char *name, uint64_t mask)
{
	put(o, ",\"%s\":[", name);
	for (unsigned id = 1, n = 0; id <= RMR_MAX_MEMBER_ID; id++)
		if (mask & (1ull << id))
			put(o, "%s%u", n++ ? "," : "", id);
	put(o, "]");
}

/* ",\"verify\":{...}" before the peers (all zero until a verify ran). */
static void put_verify_json(struct out *o, const struct rmr_server_pool_status *p)
{
	put(o, ",\"verify\":{\"running\":%s,\"repair\":%s,\"done\":%" PRIu64
	       ",\"total\":%" PRIu64 ",\"mismatches\":%" PRIu64 ",\"repaired\":%" PRIu64
	       ",\"skipped\":%" PRIu64 ",\"eta_s\":%" PRIu64 ",\"found\":[",
	    p->verify_running ? "true" : "false", p->verify_repair ? "true" : "false",
	    p->verify_done, p->verify_total, p->verify_mismatches, p->verify_repaired,
	    p->verify_skipped, p->verify_eta_s);
	for (uint32_t i = 0; i < p->verify_nfound && i < RMR_VERIFY_FOUND_MAX; i++) {
		put(o, "%s{\"chunk\":%" PRIu64 ",\"members\":[", i ? "," : "",
		    p->verify_found[i]);
		for (unsigned id = 1, n = 0; id <= RMR_MAX_MEMBER_ID; id++)
			if (p->verify_found_ids[i] & (1ull << id))
				put(o, "%s%u", n++ ? "," : "", id);
		put(o, "]}");
	}
	put(o, "]}");
}

/* "[#####---------------] ": @done of @total as a bar for --watch. */
static void put_bar(struct out *o, uint64_t done, uint64_t total)
{
	enum { WIDTH = 20 };
	unsigned full = total ? (unsigned)(done * WIDTH / total) : 0;
	char bar[WIDTH + 1];

	for (unsigned i = 0; i < WIDTH; i++)
		bar[i] = i < full ? '#' : '-';
	bar[WIDTH] = '\0';
	put(o, "[%s] ", bar);
}

/* "  verify: [##------] 300/1024 chunks (29%), 2 differ, 2 repaired, ETA 4 s": once one ran. */
static void put_verify_line(struct out *o, const struct rmr_server_pool_status *p)
{
	if (!p->verify_total)
		return;
	put(o, "  verify: ");
	put_bar(o, p->verify_done, p->verify_total);
	put(o, "%" PRIu64 "/%" PRIu64 " chunks (%" PRIu64 "%%), %" PRIu64 " differ",
	    p->verify_done, p->verify_total, p->verify_done * 100 / p->verify_total,
	    p->verify_mismatches);
	if (p->verify_repair)
		put(o, ", %" PRIu64 " repaired", p->verify_repaired);
	if (p->verify_running && p->verify_eta_s)
		put(o, ", ETA %" PRIu64 " s", p->verify_eta_s);
	put(o, "%s\n", p->verify_running ? ", running" : "");
	for (uint32_t i = 0; i < p->verify_nfound && i < RMR_VERIFY_FOUND_MAX; i++) {
		char ids[128];

		mask_list(p->verify_found_ids[i], ids, sizeof(ids));
		put(o, "    chunk %" PRIu64 " differs on member%s %s\n", p->verify_found[i],
		    strchr(ids, ',') ? "s" : "", ids);
	}
}

/* "  resync: [####----] 120/500 chunks (24%), 35.2 MiB/s, ETA 11 s": only while there is one. */
static void put_resync_line(struct out *o, const struct rmr_server_pool_status *p)
{
	char rate[32], copied[32];
	uint64_t pct;

	if (p->resync_total == 0 || (p->resync_done == p->resync_total && !p->resync_running))
		return;
	pct = p->resync_done * 100 / p->resync_total;
	human_bytes(p->resync_bps, rate, sizeof(rate));
	human_bytes(p->resync_bytes, copied, sizeof(copied));
	put(o, "  resync: ");
	put_bar(o, p->resync_done, p->resync_total);
	put(o, "%" PRIu64 "/%" PRIu64 " chunks (%" PRIu64 "%%), %s copied, %s/s",
	    p->resync_done, p->resync_total, pct, copied, rate);
	if (p->resync_eta_s)
		put(o, ", ETA %" PRIu64 " s", p->resync_eta_s);
	if (p->resync_paused)
		put(o, ", paused by the operator");
	else if (p->resync_waiting)
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

	if (st && buf && len && fmt == RMR_FORMAT_PROMETHEUS)
		return server_status_prometheus(st, buf, len);
	if (!st || !buf || !len || (fmt != RMR_FORMAT_TEXT && fmt != RMR_FORMAT_JSON))
		return -EINVAL;
	buf[0] = '\0';
	if (fmt == RMR_FORMAT_JSON) {
		put(&o, "{\"role\":\"member\",\"listen\":");
		put_json_str(&o, st->listen_addr);
		put(&o, ",\"sessions\":%u,\"rejected\":%" PRIu64 ",\"auth_refused\":%" PRIu64
			",\"pools\":[", st->sessions, st->rejected, st->auth_refused);
	} else {
		put(&o, "member server %s: %u sessions, %" PRIu64 " refused (%" PRIu64
			" for who they claimed to be)\n", st->listen_addr, st->sessions, st->rejected,
		    st->auth_refused);
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
				",\"chunk_size\":%u,\"map_ver\":%" PRIu64 ",\"membership_ver\":%" PRIu64,
			    uuid, p->member_id, p->pool_size, p->chunk_size, p->map_ver,
			    p->membership_ver);
			put_ids_json(&o, "members", p->members_mask);
			put_ids_json(&o, "detached", p->detached_mask);
			put(&o, ",\"missed\":[");
			for (unsigned id = 1, first = 1; id <= RMR_MAX_MEMBER_ID; id++) {
				if (p->missed_mask & (1ull << id)) {
					put(&o, "%s%u", first ? "" : ",", id);
					first = 0;
				}
			}
			put(&o, "]");
			put_id_counts(&o, "dirty_chunks", p->dirty_chunks);
			put_id_counts(&o, "record_chunks", p->record_chunks);
			put(&o, ",\"sessions\":%u,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
				",\"read_bytes\":%" PRIu64 ",\"write_bytes\":%" PRIu64
				",\"errors\":%" PRIu64 ",\"meta_saves\":%" PRIu64
				",\"map_writes\":%" PRIu64 ",\"map_pulls\":%" PRIu64,
			    p->sessions, p->reads, p->writes, p->read_bytes, p->write_bytes, p->errors,
			    p->meta_saves, p->map_writes, p->map_pulls);
			put(&o, ",\"writer_epoch\":%" PRIu64 ",\"fenced_requests\":%" PRIu64
				",\"activity_log\":{\"ranges\":%u"
				",\"chunks\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"evictions\":%" PRIu64
				",\"stale\":%s}",
			    p->writer_epoch, p->fenced_requests, p->al_ranges, p->al_chunks,
			    p->al_writes, p->al_evictions,
			    p->al_stale ? "true" : "false");
			put(&o, ",\"resync\":{\"running\":%s,\"waiting\":%s,\"paused\":%s,\"done\":%" PRIu64
				",\"total\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"bps\":%" PRIu64
				",\"eta_s\":%" PRIu64 ",\"rate_limit\":%" PRIu64
				",\"sync_queue_depth\":%u,\"inflight\":%u,\"inflight_peak\":%u"
				",\"served_bytes\":%" PRIu64 "}",
			    p->resync_running ? "true" : "false", p->resync_waiting ? "true" : "false",
			    p->resync_paused ? "true" : "false", p->resync_done, p->resync_total,
			    p->resync_bytes, p->resync_bps, p->resync_eta_s, p->resync_rate_limit,
			    p->sync_queue_depth, p->resync_inflight, p->resync_inflight_peak,
			    p->served_sync_bytes);
			put_verify_json(&o, p);
			put(&o, ",\"peers\":[");
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
		put_verify_line(&o, p);
		put_peers_line(&o, p);
		put(&o, "  writer epoch %" PRIu64 "; activity log: %u ranges (%" PRIu64
			" chunks)%s, %" PRIu64 " records written\n",
		    p->writer_epoch, p->al_ranges, p->al_chunks,
		    p->al_stale ? " of a writer that is gone" : "", p->al_writes);
	}
	if (fmt == RMR_FORMAT_JSON)
		put(&o, "]}\n");
	return finish(&o);
}

/* ---- Prometheus text format (exposition format 0.0.4) ---------------------------
 *
 * Each metric family is written once, HELP and TYPE first, then one sample
 * per pool, member or peer. Numbers that only grow are counters (_total);
 * everything that may go down again is a gauge. The tables below list the
 * plain numeric fields; identities and states are written by hand.
 */

enum prom_width { PROM_U64, PROM_U32, PROM_BOOL };

struct prom_metric {
	const char *name;
	bool counter;
	const char *help;
	size_t off;
	enum prom_width width;
};

#define PROM_C(name, type, field, help)                                                    \
	{ name, true, help, offsetof(type, field), PROM_U64 }
#define PROM_G(name, type, field, w, help)                                                 \
	{ name, false, help, offsetof(type, field), w }

static const struct prom_metric prom_client_pool[] = {
	PROM_G("rmr_client_pool_size_bytes", struct rmr_pool_status, pool_size, PROM_U64,
	       "Bytes in the pool's address space."),
	PROM_G("rmr_client_chunk_size_bytes", struct rmr_pool_status, chunk_size, PROM_U32,
	       "Bytes per chunk (the unit of dirty tracking)."),
	PROM_G("rmr_client_map_version", struct rmr_pool_status, map_ver, PROM_U64,
	       "The client's map version (bumped on every member failure)."),
	PROM_G("rmr_client_queue_depth", struct rmr_pool_status, queue_depth, PROM_U32,
	       "Request slots of the client."),
	PROM_G("rmr_client_inflight_requests", struct rmr_pool_status, inflight, PROM_U32,
	       "Request slots in use."),
	PROM_G("rmr_client_members", struct rmr_pool_status, nmembers, PROM_U32,
	       "Members the client opened the pool with."),
	PROM_G("rmr_client_members_normal", struct rmr_pool_status, normal_members, PROM_U32,
	       "Members in the normal state (serving reads, getting writes)."),
	PROM_G("rmr_client_writer_epoch", struct rmr_pool_status, writer_epoch, PROM_U64,
	       "The writer epoch the members granted this client."),
	PROM_G("rmr_client_fenced", struct rmr_pool_status, fenced, PROM_BOOL,
	       "1 if another writer took the pool over (all I/O fails)."),
	PROM_C("rmr_client_auth_refused_total", struct rmr_pool_status, auth_refused,
	       "Member sessions that failed authentication (no key, a wrong one), either way."),
	PROM_C("rmr_client_loop_sleeps_total", struct rmr_pool_status, loop_sleeps,
	       "Times the client's event loop slept waiting for work (see poll_us)."),
	PROM_C("rmr_client_loop_polls_total", struct rmr_pool_status, loop_polls,
	       "Turns of the client's event loop that polled for work expected soon (see poll_us)."),
};

static const struct prom_metric prom_client_member[] = {
	PROM_G("rmr_client_member_map_version", struct rmr_member_status, map_ver, PROM_U64,
	       "The member's map version at its hello."),
	PROM_G("rmr_client_member_inflight_requests", struct rmr_member_status, inflight, PROM_U32,
	       "Requests awaiting the member's answer."),
	PROM_C("rmr_client_member_reads_total", struct rmr_member_status, reads,
	       "Read requests the member served."),
	PROM_C("rmr_client_member_writes_total", struct rmr_member_status, writes,
	       "Write requests the member applied."),
	PROM_C("rmr_client_member_read_bytes_total", struct rmr_member_status, read_bytes,
	       "Payload bytes read from the member."),
	PROM_C("rmr_client_member_write_bytes_total", struct rmr_member_status, write_bytes,
	       "Payload bytes written to the member."),
	PROM_C("rmr_client_member_errors_total", struct rmr_member_status, errors,
	       "Requests that failed on the member."),
	PROM_C("rmr_client_member_reconnects_total", struct rmr_member_status, reconnects,
	       "Sessions to the member re-established."),
	PROM_C("rmr_client_member_sent_bytes_total", struct rmr_member_status, tx_bytes,
	       "Bytes sent on the session, headers included."),
	PROM_C("rmr_client_member_received_bytes_total", struct rmr_member_status, rx_bytes,
	       "Bytes received on the session, headers included."),
	PROM_C("rmr_client_member_resync_bytes_total", struct rmr_member_status, resync_bytes,
	       "Resync payload bytes through the client (always 0: members copy among themselves)."),
	PROM_C("rmr_client_member_map_updates_total", struct rmr_member_status, map_updates,
	       "Dirty-map updates the member took from a peer at the client's request."),
	PROM_G("rmr_client_member_unflushed_chunks", struct rmr_member_status, unflushed_chunks,
	       PROM_U64, "Chunks of writes the member acknowledged that no flush on it covered yet."),
	PROM_G("rmr_client_member_record_queued_chunks", struct rmr_member_status,
	       record_chunks_queued, PROM_U64,
	       "Chunks to record as maybe lost by the member, waiting for a member to take them."),
};

static const struct prom_metric prom_server_pool[] = {
	PROM_G("rmr_server_pool_size_bytes", struct rmr_server_pool_status, pool_size, PROM_U64,
	       "Bytes in the pool's address space."),
	PROM_G("rmr_server_chunk_size_bytes", struct rmr_server_pool_status, chunk_size, PROM_U32,
	       "Bytes per chunk (the unit of dirty tracking)."),
	PROM_G("rmr_server_map_version", struct rmr_server_pool_status, map_ver, PROM_U64,
	       "Highest map version this member has seen."),
	PROM_G("rmr_server_pool_sessions", struct rmr_server_pool_status, sessions, PROM_U32,
	       "Client sessions attached to the pool."),
	PROM_C("rmr_server_reads_total", struct rmr_server_pool_status, reads,
	       "Read requests served."),
	PROM_C("rmr_server_writes_total", struct rmr_server_pool_status, writes,
	       "Write requests applied."),
	PROM_C("rmr_server_read_bytes_total", struct rmr_server_pool_status, read_bytes,
	       "Payload bytes read."),
	PROM_C("rmr_server_write_bytes_total", struct rmr_server_pool_status, write_bytes,
	       "Payload bytes written."),
	PROM_C("rmr_server_errors_total", struct rmr_server_pool_status, errors,
	       "Requests that failed in the store."),
	PROM_C("rmr_server_meta_saves_total", struct rmr_server_pool_status, meta_saves,
	       "Metadata blobs written."),
	PROM_C("rmr_server_map_writes_total", struct rmr_server_pool_status, map_writes,
	       "Dirty-map blocks written."),
	PROM_C("rmr_server_map_pulls_total", struct rmr_server_pool_status, map_pulls,
	       "Dirty-map updates taken from a peer."),
	PROM_C("rmr_server_fenced_requests_total", struct rmr_server_pool_status, fenced_requests,
	       "Requests and hellos refused from fenced writers."),
	PROM_G("rmr_server_writer_epoch", struct rmr_server_pool_status, writer_epoch, PROM_U64,
	       "The writer epoch this member granted last."),
	PROM_G("rmr_server_sync_queue_depth", struct rmr_server_pool_status, sync_queue_depth,
	       PROM_U32, "Resync pieces allowed in flight."),
	PROM_G("rmr_server_resync_rate_limit_bytes_per_second", struct rmr_server_pool_status,
	       resync_rate_limit, PROM_U64, "Resync rate limit, 0 = unlimited."),
	PROM_G("rmr_server_resync_running", struct rmr_server_pool_status, resync_running,
	       PROM_BOOL, "1 while this member copies its dirty chunks in."),
	PROM_G("rmr_server_resync_waiting", struct rmr_server_pool_status, resync_waiting,
	       PROM_BOOL, "1 while own chunks are dirty but no peer can serve them yet."),
	PROM_G("rmr_server_resync_paused", struct rmr_server_pool_status, resync_paused,
	       PROM_BOOL, "1 while the operator has the background resync paused."),
	PROM_G("rmr_server_resync_chunks", struct rmr_server_pool_status, resync_total, PROM_U64,
	       "Chunks dirty for this member since it last was clean."),
	PROM_G("rmr_server_resync_chunks_done", struct rmr_server_pool_status, resync_done,
	       PROM_U64, "Of those, chunks copied in or overwritten whole."),
	PROM_C("rmr_server_resync_bytes_total", struct rmr_server_pool_status, resync_bytes,
	       "Bytes copied in from peers by resync."),
	PROM_G("rmr_server_resync_bytes_per_second", struct rmr_server_pool_status, resync_bps,
	       PROM_U64, "Resync copy rate over the last seconds."),
	PROM_G("rmr_server_resync_eta_seconds", struct rmr_server_pool_status, resync_eta_s,
	       PROM_U64, "Seconds of resync left at that rate (0 if unknown or done)."),
	PROM_C("rmr_server_resync_served_bytes_total", struct rmr_server_pool_status,
	       served_sync_bytes, "Bytes sent to peers for their resync."),
	PROM_G("rmr_server_resync_inflight_chunks", struct rmr_server_pool_status, resync_inflight,
	       PROM_U32, "Chunks the background resync copies now (at most sync_queue_depth)."),
	PROM_G("rmr_server_activity_log_ranges", struct rmr_server_pool_status, al_ranges,
	       PROM_U32, "Chunk ranges in the activity log."),
	PROM_G("rmr_server_activity_log_chunks", struct rmr_server_pool_status, al_chunks,
	       PROM_U64, "Chunks those ranges cover."),
	PROM_C("rmr_server_activity_log_writes_total", struct rmr_server_pool_status, al_writes,
	       "Activity log records written since start."),
	PROM_C("rmr_server_activity_log_evictions_total", struct rmr_server_pool_status,
	       al_evictions, "Ranges dropped from the activity log to make room."),
	PROM_G("rmr_server_activity_log_stale", struct rmr_server_pool_status, al_stale,
	       PROM_BOOL, "1 if the log holds ranges of a writer that is gone."),
	PROM_G("rmr_server_verify_running", struct rmr_server_pool_status, verify_running,
	       PROM_BOOL, "1 while this member runs a verify of the pool."),
	PROM_G("rmr_server_verify_chunks", struct rmr_server_pool_status, verify_total, PROM_U64,
	       "Chunks the current (or last) verify compares."),
	PROM_G("rmr_server_verify_chunks_done", struct rmr_server_pool_status, verify_done,
	       PROM_U64, "Of those, chunks compared so far."),
	PROM_G("rmr_server_verify_mismatches", struct rmr_server_pool_status, verify_mismatches,
	       PROM_U64, "Chunks the current (or last) verify found different on a peer."),
	PROM_G("rmr_server_verify_repaired", struct rmr_server_pool_status, verify_repaired,
	       PROM_U64, "Of those, chunks marked dirty for resync."),
};

static const struct prom_metric prom_server_peer[] = {
	PROM_G("rmr_server_peer_connected", struct rmr_peer_status, connected, PROM_BOOL,
	       "1 while the member-to-member session is up."),
	PROM_G("rmr_server_peer_map_version", struct rmr_peer_status, map_ver, PROM_U64,
	       "The peer's map version at its hello."),
	PROM_C("rmr_server_peer_sync_bytes_total", struct rmr_peer_status, sync_bytes,
	       "Resync payload bytes received from the peer."),
	PROM_C("rmr_server_peer_map_bytes_total", struct rmr_peer_status, map_bytes,
	       "Dirty-map bytes received from the peer."),
	PROM_C("rmr_server_peer_reconnects_total", struct rmr_peer_status, reconnects,
	       "Sessions to the peer opened after the first."),
};

static uint64_t prom_value(const void *base, const struct prom_metric *m)
{
	const char *p = (const char *)base + m->off;

	switch (m->width) {
	case PROM_U64: {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		return v;
	}
	case PROM_U32: {
		uint32_t v;

		memcpy(&v, p, sizeof(v));
		return v;
	}
	case PROM_BOOL: {
		bool v;

		memcpy(&v, p, sizeof(v));
		return v ? 1 : 0;
	}
	}
	return 0;
}

static void prom_head(struct out *o, const char *name, bool counter, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, counter ? "counter" : "gauge");
}

/* A label value: backslash, double quote and newline escaped. */
static void prom_label(struct out *o, const char *key, const char *val, bool first)
{
	put(o, "%s%s=\"", first ? "" : ",", key);
	for (; *val; val++) {
		if (*val == '\\')
			put(o, "\\\\");
		else if (*val == '"')
			put(o, "\\\"");
		else if (*val == '\n')
			put(o, "\\n");
		else
			put(o, "%c", *val);
	}
	put(o, "\"");
}

static void prom_label_u(struct out *o, const char *key, unsigned val)
{
	put(o, ",%s=\"%u\"", key, val);
}

/* Client: labels pool, and member plus addr (a member's id is 0 until it answered). */
static void prom_client_member_labels(struct out *o, const struct rmr_pool_status *st,
				      const struct rmr_member_status *m)
{
	put(o, "{");
	prom_label(o, "pool", st->name, true);
	prom_label_u(o, "member", m->member_id);
	prom_label(o, "addr", m->addr, false);
	put(o, "}");
}

static int pool_status_prometheus(const struct rmr_pool_status *st, char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	unsigned n = RMR_MIN(st->nmembers, (uint32_t)RMR_MAX_MEMBERS);
	char uuid[37];

	buf[0] = '\0';
	rmr_uuid_format(&st->uuid, uuid);
	prom_head(&o, "rmr_client_pool_info", false, "The pool's identity; always 1.");
	put(&o, "rmr_client_pool_info{");
	prom_label(&o, "pool", st->name, true);
	prom_label(&o, "uuid", uuid, false);
	put(&o, "} 1\n");
	for (size_t k = 0; k < RMR_ARRAY_SIZE(prom_client_pool); k++) {
		const struct prom_metric *m = &prom_client_pool[k];

		prom_head(&o, m->name, m->counter, m->help);
		put(&o, "%s{", m->name);
		prom_label(&o, "pool", st->name, true);
		put(&o, "} %" PRIu64 "\n", prom_value(st, m));
	}
	prom_head(&o, "rmr_client_member_state", false,
		  "1 for the state the member's session is in, 0 for the others.");
	for (unsigned i = 0; i < n; i++)
		for (int s = 0; s < RMR_MEMBER_STATE_COUNT; s++) {
			put(&o, "rmr_client_member_state{");
			prom_label(&o, "pool", st->name, true);
			prom_label_u(&o, "member", st->members[i].member_id);
			prom_label(&o, "addr", st->members[i].addr, false);
			prom_label(&o, "state", rmr_member_state_name((enum rmr_member_state)s), false);
			put(&o, "} %d\n", st->members[i].state == (enum rmr_member_state)s);
		}
	prom_head(&o, "rmr_client_member_missed_writes", false,
		  "1 while the member is recorded as having missed writes (tracked dirty).");
	for (unsigned i = 0; i < n; i++) {
		uint16_t id = st->members[i].member_id;

		put(&o, "rmr_client_member_missed_writes");
		prom_client_member_labels(&o, st, &st->members[i]);
		put(&o, " %d\n", id && id <= RMR_MAX_MEMBER_ID && (st->missed_mask & (1ull << id)));
	}
	for (size_t k = 0; k < RMR_ARRAY_SIZE(prom_client_member); k++) {
		const struct prom_metric *m = &prom_client_member[k];

		prom_head(&o, m->name, m->counter, m->help);
		for (unsigned i = 0; i < n; i++) {
			put(&o, "%s", m->name);
			prom_client_member_labels(&o, st, &st->members[i]);
			put(&o, " %" PRIu64 "\n", prom_value(&st->members[i], m));
		}
	}
	return finish(&o);
}

static void prom_server_pool_labels(struct out *o, const struct rmr_server_pool_status *p)
{
	put(o, "{");
	prom_label(o, "pool", p->name, true);
	prom_label_u(o, "member", p->member_id);
	put(o, "}");
}

/* Member ids a pool's per-peer gauges cover: itself, its peers, and any id on record. */
enum peer_value { PEER_DIRTY, PEER_RECORDS, PEER_MISSED };

static uint64_t prom_server_ids(const struct rmr_server_pool_status *p);

/* A gauge per pool and peer of it: what member 'member' records of member 'peer'. */
static void prom_per_peer(struct out *o, const struct rmr_server_status *st, unsigned np,
			  const char *name, const char *help, enum peer_value what)
{
	prom_head(o, name, false, help);
	for (unsigned i = 0; i < np; i++) {
		const struct rmr_server_pool_status *p = &st->pools[i];
		uint64_t ids = prom_server_ids(p);

		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			uint64_t v = what == PEER_DIRTY	  ? p->dirty_chunks[id]
				     : what == PEER_RECORDS ? p->record_chunks[id]
							    : (p->missed_mask >> id) & 1;

			if (!(ids & (1ull << id)))
				continue;
			put(o, "%s{", name);
			prom_label(o, "pool", p->name, true);
			prom_label_u(o, "member", p->member_id);
			prom_label_u(o, "peer", id);
			put(o, "} %" PRIu64 "\n", v);
		}
	}
}

static uint64_t prom_server_ids(const struct rmr_server_pool_status *p)
{
	uint64_t mask = p->missed_mask;

	if (p->member_id <= RMR_MAX_MEMBER_ID)
		mask |= 1ull << p->member_id;
	for (unsigned k = 0; k < p->npeers && k < RMR_MAX_MEMBERS; k++)
		if (p->peers[k].member_id <= RMR_MAX_MEMBER_ID)
			mask |= 1ull << p->peers[k].member_id;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (p->dirty_chunks[id])
			mask |= 1ull << id;
	return mask & ~1ull;
}

static int server_status_prometheus(const struct rmr_server_status *st, char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	unsigned np = RMR_MIN(st->npools, (uint32_t)RMR_SERVER_MAX_POOLS);

	buf[0] = '\0';
	prom_head(&o, "rmr_server_sessions", false, "Sessions of all pools, plus unbound ones.");
	put(&o, "rmr_server_sessions %u\n", st->sessions);
	prom_head(&o, "rmr_server_rejected_sessions_total", true,
		  "Sessions refused (bad hello, malformed messages).");
	put(&o, "rmr_server_rejected_sessions_total %" PRIu64 "\n", st->rejected);
	prom_head(&o, "rmr_server_auth_refused_total", true,
		  "Sessions refused for who they claimed to be (no key or a wrong one, a wrong "
		  "pool UUID, a member id not theirs), and dialed peers that did not prove the key.");
	put(&o, "rmr_server_auth_refused_total %" PRIu64 "\n", st->auth_refused);
	prom_head(&o, "rmr_server_pool_info", false, "A served pool's identity; always 1.");
	for (unsigned i = 0; i < np; i++) {
		char uuid[37];

		rmr_uuid_format(&st->pools[i].uuid, uuid);
		put(&o, "rmr_server_pool_info{");
		prom_label(&o, "pool", st->pools[i].name, true);
		prom_label_u(&o, "member", st->pools[i].member_id);
		prom_label(&o, "uuid", uuid, false);
		prom_label(&o, "listen", st->listen_addr, false);
		put(&o, "} 1\n");
	}
	for (size_t k = 0; k < RMR_ARRAY_SIZE(prom_server_pool); k++) {
		const struct prom_metric *m = &prom_server_pool[k];

		prom_head(&o, m->name, m->counter, m->help);
		for (unsigned i = 0; i < np; i++) {
			put(&o, "%s", m->name);
			prom_server_pool_labels(&o, &st->pools[i]);
			put(&o, " %" PRIu64 "\n", prom_value(&st->pools[i], m));
		}
	}
	prom_per_peer(&o, st, np, "rmr_server_dirty_chunks",
		      "Chunks member 'peer' missed or may have lost, as recorded on member 'member'.",
		      PEER_DIRTY);
	prom_per_peer(&o, st, np, "rmr_server_record_chunks",
		      "Of those, chunks member 'peer' only may have lost to a power loss of its host.",
		      PEER_RECORDS);
	prom_per_peer(&o, st, np, "rmr_server_missed_writes",
		      "1 while member 'member' records member 'peer' as having missed writes.",
		      PEER_MISSED);
	prom_head(&o, "rmr_server_peer_info", false,
		  "A member-to-member session this member dials; always 1.");
	for (unsigned i = 0; i < np; i++)
		for (unsigned k = 0; k < st->pools[i].npeers && k < RMR_MAX_MEMBERS; k++) {
			put(&o, "rmr_server_peer_info{");
			prom_label(&o, "pool", st->pools[i].name, true);
			prom_label_u(&o, "member", st->pools[i].member_id);
			prom_label_u(&o, "peer", st->pools[i].peers[k].member_id);
			prom_label(&o, "addr", st->pools[i].peers[k].addr, false);
			put(&o, "} 1\n");
		}
	for (size_t m = 0; m < RMR_ARRAY_SIZE(prom_server_peer); m++) {
		const struct prom_metric *pm = &prom_server_peer[m];

		prom_head(&o, pm->name, pm->counter, pm->help);
		for (unsigned i = 0; i < np; i++)
			for (unsigned k = 0; k < st->pools[i].npeers && k < RMR_MAX_MEMBERS; k++) {
				put(&o, "%s{", pm->name);
				prom_label(&o, "pool", st->pools[i].name, true);
				prom_label_u(&o, "member", st->pools[i].member_id);
				prom_label_u(&o, "peer", st->pools[i].peers[k].member_id);
				put(&o, "} %" PRIu64 "\n", prom_value(&st->pools[i].peers[k], pm));
			}
	}
	return finish(&o);
}
