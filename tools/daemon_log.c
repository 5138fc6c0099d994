/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Log lines of the daemons with pool= and member= in each (see daemon_log.h). */
#include "daemon_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#define LINE_MAX_BYTES 1024

static const char *log_prog = "brmr";
static bool log_syslog, log_verbose;
static char id_pool[256] = "-", id_member[128] = "-";

void dlog_open(const char *prog, bool use_syslog, bool verbose)
{
	log_prog = prog;
	log_syslog = use_syslog;
	log_verbose = verbose;
	if (use_syslog)
		openlog(prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void dlog_identity(const char *pool, const char *member)
{
	snprintf(id_pool, sizeof(id_pool), "%s", pool && *pool ? pool : "-");
	snprintf(id_member, sizeof(id_member), "%s", member && *member ? member : "-");
}

bool dlog_verbose(void)
{
	return log_verbose;
}

static const char *level_tag(enum rmr_log_level level)
{
	switch (level) {
	case RMR_LOG_ERR:
		return "error: ";
	case RMR_LOG_WARN:
		return "warning: ";
	case RMR_LOG_NOTICE:
	case RMR_LOG_INFO:
	case RMR_LOG_DEBUG:
		return "";
	}
	return "";
}

/* @p head (without the ": ") is made of "key=value" words only. */
static bool is_key_values(const char *head, size_t len)
{
	size_t i = 0;

	if (!len)
		return false;
	while (i < len) {
		size_t w = i;

		while (i < len && head[i] != ' ')
			i++;
		if (!memchr(head + w, '=', i - w) || head[w] == '=')
			return false;
		if (i < len)
			i++; /* the blank */
	}
	return head[len - 1] != ' ';
}

/* The value of word "key=" in @p head, or NULL; its length in @p vlen. */
static const char *word_value(const char *head, size_t len, const char *key, size_t *vlen)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < len;) {
		size_t w = i;

		while (i < len && head[i] != ' ')
			i++;
		if (i - w > klen && !memcmp(head + w, key, klen)) {
			*vlen = i - w - klen;
			return head + w + klen;
		}
		i++;
	}
	return NULL;
}

/*
 * Emit @p text, whose own "pool=.. member=..: " head (if any) wins over
 * @p pool and @p member. The output's head is always "pool=P member=M"
 * followed by the text's other words.
 */
static void emit(enum rmr_log_level level, const char *pool, const char *member, const char *text)
{
	const char *colon = strstr(text, ": "), *pv = NULL, *mv = NULL;
	size_t plen = 0, mlen = 0, hlen = 0;
	char rest_head[LINE_MAX_BYTES] = "", line[LINE_MAX_BYTES + 512];

	if (level > RMR_LOG_INFO && !log_verbose)
		return;
	if (colon && is_key_values(text, (size_t)(colon - text))) {
		hlen = (size_t)(colon - text);
		pv = word_value(text, hlen, "pool=", &plen);
		mv = word_value(text, hlen, "member=", &mlen);
		/* The other words, in their order. */
		for (size_t i = 0, used = 0; i < hlen;) {
			size_t w = i;

			while (i < hlen && text[i] != ' ')
				i++;
			if (strncmp(text + w, "pool=", 5) && strncmp(text + w, "member=", 7) &&
			    used + (i - w) + 2 < sizeof(rest_head)) {
				rest_head[used++] = ' ';
				memcpy(rest_head + used, text + w, i - w);
				used += i - w;
				rest_head[used] = '\0';
			}
			i++;
		}
		text = colon + 2;
	}
	if (!pv) {
		pv = pool;
		plen = strlen(pool);
	}
	if (!mv) {
		mv = member;
		mlen = strlen(member);
	}
	snprintf(line, sizeof(line), "pool=%.*s member=%.*s%s: %s%s", (int)plen, pv, (int)mlen, mv,
		 rest_head, log_syslog ? "" : level_tag(level), text);
	if (log_syslog)
		syslog((int)level, "%s", line);
	else
		/* One fprintf per line: stdio locks the stream, lines never interleave. */
		fprintf(stderr, "%s %s\n", log_prog, line);
}

void dlog(enum rmr_log_level level, const char *fmt, ...)
{
	char msg[LINE_MAX_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, id_pool, id_member, msg);
}

void dlog_pm(enum rmr_log_level level, const char *pool, unsigned member, const char *fmt, ...)
{
	char msg[LINE_MAX_BYTES], mem[16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(mem, sizeof(mem), "%u", member);
	emit(level, pool ? pool : id_pool, member ? mem : id_member, msg);
}

void dlog_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	emit(level, id_pool, id_member, msg);
}
