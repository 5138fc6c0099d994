/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Status formatters: the Prometheus text format of a client and a server
 * snapshot (families, types, labels, escaping, values), and the buffer
 * contract shared by every format (-ENOSPC, never an overrun).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmr/rmr.h>
#include <rmr/server.h>

#include "unit.h"

static struct rmr_pool_status cst;
static struct rmr_server_status sst;
static char out[256 * 1024];

static void fill_client(void)
{
	memset(&cst, 0, sizeof(cst));
	cst.size = sizeof(cst);
	snprintf(cst.name, sizeof(cst.name), "vol1");
	ck_assert_int_eq(rmr_uuid_parse("1b4e28ba-2fa1-41d2-883f-0016d3cca427", &cst.uuid), 0);
	cst.pool_size = 1ull << 30;
	cst.chunk_size = 128 * 1024;
	cst.map_ver = 7;
	cst.missed_mask = 1ull << 2;
	cst.queue_depth = 128;
	cst.inflight = 3;
	cst.normal_members = 1;
	cst.nmembers = 2;
	cst.writer_epoch = 5;
	cst.loop_sleeps = 4242;
	cst.loop_polls = 777;
	cst.members[0] = (struct rmr_member_status){
		.member_id = 1, .state = RMR_MEMBER_NORMAL, .addr = "127.0.0.1:7001",
		.reads = 10, .writes = 20, .read_bytes = 40960, .write_bytes = 81920,
		.tx_bytes = 123, .rx_bytes = 456, .unflushed_chunks = 12,
	};
	/* An address a label must escape. */
	cst.members[1] = (struct rmr_member_status){
		.member_id = 2, .state = RMR_MEMBER_FAILED, .addr = "odd\"addr\\x",
		.errors = 4, .reconnects = 1, .record_chunks_queued = 3,
	};
}

static void fill_server(void)
{
	struct rmr_server_pool_status *p;

	memset(&sst, 0, sizeof(sst));
	sst.size = sizeof(sst);
	snprintf(sst.listen_addr, sizeof(sst.listen_addr), "127.0.0.1:7001");
	sst.sessions = 3;
	sst.rejected = 1;
	sst.npools = 2;
	p = &sst.pools[0];
	snprintf(p->name, sizeof(p->name), "vol1");
	p->member_id = 1;
	p->pool_size = 1ull << 30;
	p->chunk_size = 128 * 1024;
	p->missed_mask = 1ull << 3;
	p->dirty_chunks[3] = 640;
	p->record_chunks[3] = 40;
	p->writes = 99;
	p->resync_running = true;
	p->resync_total = 10;
	p->resync_done = 4;
	p->npeers = 2;
	p->peers[0] = (struct rmr_peer_status){ .member_id = 2, .addr = "127.0.0.1:7002",
						 .connected = true, .sync_bytes = 1 << 20 };
	p->peers[1] = (struct rmr_peer_status){ .member_id = 3, .addr = "127.0.0.1:7003" };
	p = &sst.pools[1];
	snprintf(p->name, sizeof(p->name), "vol2");
	p->member_id = 4;
}

/* The sample line of @p series (name and labels, exactly) holds @p value. */
static void has_sample(const char *series, const char *value)
{
	char want[512];
	const char *at;

	snprintf(want, sizeof(want), "\n%s %s\n", series, value);
	at = strstr(out, want);
	ck_assert_msg(at != NULL, "no sample '%s %s' in:\n%s", series, value, out);
}

/*
 * The text is well-formed: every line is a HELP, a TYPE or a sample; each
 * family has one HELP and one TYPE before its samples; counters end in
 * _total; samples of one family are contiguous; every value is a number.
 */
static void well_formed(void)
{
	char *copy = strdup(out), *save = NULL, *line;
	char family[128] = "", type[16] = "", done[64][128];
	unsigned ndone = 0, samples = 0;

	ck_assert_ptr_nonnull(copy);
	ck_assert_msg(out[strlen(out) - 1] == '\n', "no final newline");
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		size_t n;

		if (!strncmp(line, "# HELP ", 7)) {
			n = strcspn(line + 7, " ");
			ck_assert_uint_lt(n, sizeof(family));
			for (unsigned i = 0; i < ndone; i++)
				ck_assert_msg(strncmp(done[i], line + 7, n) || done[i][n],
					      "family twice: %s", line);
			memcpy(family, line + 7, n);
			family[n] = '\0';
			ck_assert_uint_lt(ndone, 64);
			snprintf(done[ndone++], sizeof(done[0]), "%s", family);
			type[0] = '\0';
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			ck_assert_msg(!strncmp(line + 7, family, strlen(family)) &&
				      line[7 + strlen(family)] == ' ', "TYPE of another family: %s", line);
			snprintf(type, sizeof(type), "%s", line + 8 + strlen(family));
			ck_assert_msg(!strcmp(type, "counter") || !strcmp(type, "gauge"), "%s", line);
			n = strlen(family);
			if (!strcmp(type, "counter"))
				ck_assert_msg(n > 6 && !strcmp(family + n - 6, "_total"),
					      "counter without _total: %s", family);
			else
				ck_assert_msg(n <= 6 || strcmp(family + n - 6, "_total"),
					      "gauge named _total: %s", family);
			continue;
		}
		ck_assert_msg(line[0] != '#', "stray comment: %s", line);
		n = strcspn(line, "{ ");
		ck_assert_uint_lt(n, sizeof(name));
		memcpy(name, line, n);
		name[n] = '\0';
		ck_assert_msg(!strcmp(name, family) && type[0], "sample outside its family: %s", line);
		ck_assert_msg(!strncmp(name, "rmr_", 4), "prefix: %s", line);
		if (line[n] == '{') {
			const char *c = line + n + 1;

			/* key="value" pairs; inside a value only \\ \" \n escapes. */
			for (;;) {
				c += strspn(c, "abcdefghijklmnopqrstuvwxyz_");
				ck_assert_msg(c[0] == '=' && c[1] == '"', "label syntax: %s", line);
				for (c += 2; *c != '"'; c++) {
					ck_assert_msg(*c, "unterminated label: %s", line);
					if (*c == '\\') {
						c++;
						ck_assert_msg(*c == '\\' || *c == '"' || *c == 'n',
							      "bad escape: %s", line);
					}
				}
				c++;
				if (*c == '}')
					break;
				ck_assert_msg(*c == ',', "label separator: %s", line);
				c++;
			}
			n = (size_t)(c + 1 - line);
		}
		ck_assert_msg(line[n] == ' ', "no value: %s", line);
		ck_assert_msg(strspn(line + n + 1, "0123456789") == strlen(line + n + 1) &&
			      line[n + 1], "value is not a whole number: %s", line);
		samples++;
	}
	ck_assert_uint_gt(samples, 10);
	free(copy);
}

START_TEST(client_prometheus)
{
	int n;

	fill_client();
	n = rmr_pool_status_format(&cst, RMR_FORMAT_PROMETHEUS, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(strlen(out), (size_t)n);
	well_formed();
	has_sample("rmr_client_pool_info{pool=\"vol1\",uuid=\"1b4e28ba-2fa1-41d2-883f-0016d3cca427\"}", "1");
	has_sample("rmr_client_pool_size_bytes{pool=\"vol1\"}", "1073741824");
	has_sample("rmr_client_inflight_requests{pool=\"vol1\"}", "3");
	has_sample("rmr_client_members_normal{pool=\"vol1\"}", "1");
	has_sample("rmr_client_fenced{pool=\"vol1\"}", "0");
	has_sample("rmr_client_loop_sleeps_total{pool=\"vol1\"}", "4242");
	has_sample("rmr_client_loop_polls_total{pool=\"vol1\"}", "777");
	has_sample("rmr_client_member_state{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\",state=\"normal\"}", "1");
	has_sample("rmr_client_member_state{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\",state=\"failed\"}", "0");
	has_sample("rmr_client_member_state{pool=\"vol1\",member=\"2\",addr=\"odd\\\"addr\\\\x\",state=\"failed\"}", "1");
	has_sample("rmr_client_member_missed_writes{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\"}", "0");
	has_sample("rmr_client_member_missed_writes{pool=\"vol1\",member=\"2\",addr=\"odd\\\"addr\\\\x\"}", "1");
	has_sample("rmr_client_member_writes_total{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\"}", "20");
	has_sample("rmr_client_member_write_bytes_total{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\"}", "81920");
	has_sample("rmr_client_member_sent_bytes_total{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\"}", "123");
	has_sample("rmr_client_member_errors_total{pool=\"vol1\",member=\"2\",addr=\"odd\\\"addr\\\\x\"}", "4");
	has_sample("rmr_client_member_resync_bytes_total{pool=\"vol1\",member=\"2\",addr=\"odd\\\"addr\\\\x\"}", "0");
	has_sample("rmr_client_member_unflushed_chunks{pool=\"vol1\",member=\"1\",addr=\"127.0.0.1:7001\"}", "12");
	has_sample("rmr_client_member_record_queued_chunks{pool=\"vol1\",member=\"2\",addr=\"odd\\\"addr\\\\x\"}", "3");
	ck_assert_ptr_nonnull(strstr(out, "# TYPE rmr_client_member_reads_total counter\n"));
	ck_assert_ptr_nonnull(strstr(out, "# TYPE rmr_client_member_state gauge\n"));
}
END_TEST

/* What a power loss could take from a member, in text and JSON. */
START_TEST(client_at_risk_shown)
{
	fill_client();
	ck_assert_int_gt(rmr_pool_status_format(&cst, RMR_FORMAT_TEXT, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "member 1: 12 chunks written since its last flush, 0 chunks"));
	ck_assert_ptr_nonnull(strstr(out, "member 2: 0 chunks written since its last flush, 3 chunks"));
	ck_assert_int_gt(rmr_pool_status_format(&cst, RMR_FORMAT_JSON, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"unflushed_chunks\":12,\"record_chunks_queued\":0}"));
	ck_assert_ptr_nonnull(strstr(out, "\"unflushed_chunks\":0,\"record_chunks_queued\":3}"));
	cst.members[0].unflushed_chunks = 0;
	cst.members[1].record_chunks_queued = 0;
	ck_assert_int_gt(rmr_pool_status_format(&cst, RMR_FORMAT_TEXT, out, sizeof(out)), 0);
	ck_assert_ptr_null(strstr(out, "since its last flush"));
}
END_TEST

/* The text and JSON forms say how many of a member's dirty chunks are records. */
START_TEST(server_records_shown)
{
	fill_server();
	ck_assert_int_gt(rmr_server_status_format(&sst, RMR_FORMAT_TEXT, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "3(640 chunks, 40 maybe lost)"));
	ck_assert_int_gt(rmr_server_status_format(&sst, RMR_FORMAT_JSON, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"dirty_chunks\":{\"3\":640},\"record_chunks\":{\"3\":40}"));
}
END_TEST

START_TEST(server_prometheus)
{
	int n;

	fill_server();
	n = rmr_server_status_format(&sst, RMR_FORMAT_PROMETHEUS, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	well_formed();
	has_sample("rmr_server_sessions", "3");
	has_sample("rmr_server_rejected_sessions_total", "1");
	has_sample("rmr_server_pool_info{pool=\"vol1\",member=\"1\",uuid=\"00000000-0000-0000-0000-000000000000\",listen=\"127.0.0.1:7001\"}", "1");
	has_sample("rmr_server_writes_total{pool=\"vol1\",member=\"1\"}", "99");
	has_sample("rmr_server_writes_total{pool=\"vol2\",member=\"4\"}", "0");
	has_sample("rmr_server_resync_running{pool=\"vol1\",member=\"1\"}", "1");
	has_sample("rmr_server_resync_chunks{pool=\"vol1\",member=\"1\"}", "10");
	has_sample("rmr_server_resync_chunks_done{pool=\"vol1\",member=\"1\"}", "4");
	/* Per peer id: itself, its peers and whoever is on record. */
	has_sample("rmr_server_dirty_chunks{pool=\"vol1\",member=\"1\",peer=\"1\"}", "0");
	has_sample("rmr_server_dirty_chunks{pool=\"vol1\",member=\"1\",peer=\"2\"}", "0");
	has_sample("rmr_server_dirty_chunks{pool=\"vol1\",member=\"1\",peer=\"3\"}", "640");
	has_sample("rmr_server_dirty_chunks{pool=\"vol2\",member=\"4\",peer=\"4\"}", "0");
	has_sample("rmr_server_missed_writes{pool=\"vol1\",member=\"1\",peer=\"3\"}", "1");
	has_sample("rmr_server_record_chunks{pool=\"vol1\",member=\"1\",peer=\"3\"}", "40");
	has_sample("rmr_server_record_chunks{pool=\"vol1\",member=\"1\",peer=\"2\"}", "0");
	has_sample("rmr_server_missed_writes{pool=\"vol1\",member=\"1\",peer=\"2\"}", "0");
	has_sample("rmr_server_peer_info{pool=\"vol1\",member=\"1\",peer=\"3\",addr=\"127.0.0.1:7003\"}", "1");
	has_sample("rmr_server_peer_connected{pool=\"vol1\",member=\"1\",peer=\"2\"}", "1");
	has_sample("rmr_server_peer_connected{pool=\"vol1\",member=\"1\",peer=\"3\"}", "0");
	has_sample("rmr_server_peer_sync_bytes_total{pool=\"vol1\",member=\"1\",peer=\"2\"}", "1048576");
	ck_assert_ptr_null(strstr(out, "peer=\"0\""));
	ck_assert_ptr_nonnull(strstr(out, "# TYPE rmr_server_resync_bytes_total counter\n"));
	ck_assert_ptr_nonnull(strstr(out, "# TYPE rmr_server_dirty_chunks gauge\n"));
}
END_TEST

/* Buffer lengths to try: sparser as they grow, but n and n + 1 always. */
static size_t next_len(size_t len, size_t n)
{
	if (len >= n)
		return len + 1;
	len += 1 + len / 64;
	return len < n ? len : n;
}

/* Every format, every buffer length up to the full one: -ENOSPC below it,
 * the same text at it, and never a byte written past the buffer. */
START_TEST(short_buffers)
{
	static const enum rmr_format fmts[] = { RMR_FORMAT_TEXT, RMR_FORMAT_JSON,
						RMR_FORMAT_PROMETHEUS };
	static char full[256 * 1024], buf[256 * 1024 + 1];

	fill_client();
	fill_server();
	for (unsigned f = 0; f < 3; f++)
		for (int server = 0; server < 2; server++) {
			int n = server ? rmr_server_status_format(&sst, fmts[f], full, sizeof(full))
				       : rmr_pool_status_format(&cst, fmts[f], full, sizeof(full));

			ck_assert_int_gt(n, 0);
			for (size_t len = 1; len <= (size_t)n + 1; len = next_len(len, (size_t)n)) {
				int r;

				memset(buf, 'Z', sizeof(buf));
				r = server ? rmr_server_status_format(&sst, fmts[f], buf, len)
					   : rmr_pool_status_format(&cst, fmts[f], buf, len);
				expect(buf[len] == 'Z');
				if (len <= (size_t)n)
					expect(r == -ENOSPC);
				else
					expect(r == n && !memcmp(buf, full, (size_t)n + 1));
			}
		}
	ck_assert_int_eq(rmr_pool_status_format(&cst, (enum rmr_format)3, out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(rmr_server_status_format(&sst, (enum rmr_format)3, out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(rmr_pool_status_format(NULL, RMR_FORMAT_PROMETHEUS, out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(rmr_server_status_format(&sst, RMR_FORMAT_PROMETHEUS, out, 0), -EINVAL);
}
END_TEST

/* The member's text: a progress bar for a resync and a verify, the chunks a verify found. */
START_TEST(server_text_bars)
{
	struct rmr_server_pool_status *p;
	int n;

	fill_server();
	p = &sst.pools[0];
	p->verify_running = true;
	p->verify_total = 40;
	p->verify_done = 30;
	p->verify_mismatches = 1;
	p->verify_eta_s = 3;
	p->verify_nfound = 1;
	p->verify_found[0] = 17;
	p->verify_found_ids[0] = (1ull << 2) | (1ull << 3);
	n = rmr_server_status_format(&sst, RMR_FORMAT_TEXT, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(out, "  resync: [########------------] 4/10 chunks (40%)"));
	ck_assert_ptr_nonnull(strstr(out, "  verify: [###############-----] 30/40 chunks (75%), 1 differ, ETA 3 s, running\n"));
	ck_assert_ptr_nonnull(strstr(out, "    chunk 17 differs on members 2,3\n"));
	n = rmr_server_status_format(&sst, RMR_FORMAT_JSON, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(out, "\"eta_s\":3,\"found\":[{\"chunk\":17,\"members\":[2,3]}]}"));
	ck_assert_ptr_nonnull(strstr(out, "]},\"peers\":[{\"id\":2,"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("status");
	TCase *tc = tcase_create("status");

	tcase_add_test(tc, client_prometheus);
	tcase_add_test(tc, client_at_risk_shown);
	tcase_add_test(tc, server_prometheus);
	tcase_add_test(tc, server_records_shown);
	tcase_add_test(tc, short_buffers);
	tcase_add_test(tc, server_text_bars);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
