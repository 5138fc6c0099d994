/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Log lines with the program, pool and member in front; see kv_log.h. */
#include "kv_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char prefix[RMR_NAME_MAX + 64] = "kvstore";
static char pool_tag[RMR_NAME_MAX + 8]; /* "pool=NAME" as librmr writes it */
static bool verbose_on;

void kv_log_init(const char *program, const char *pool, unsigned member_id, bool verbose)
{
	if (member_id)
		snprintf(prefix, sizeof(prefix), "%s pool=%s member=%u", program, pool, member_id);
	else
		snprintf(prefix, sizeof(prefix), "%s pool=%s", program, pool);
	snprintf(pool_tag, sizeof(pool_tag), "pool=%s", pool);
	verbose_on = verbose;
}

bool kv_log_verbose(void)
{
	return verbose_on;
}

static const char *level_tag(enum kv_log_level level)
{
	return level == KV_LOG_ERR ? "error: " : level == KV_LOG_WARN ? "warning: " : "";
}

void kv_log(enum kv_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > KV_LOG_INFO && !verbose_on)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One fprintf per line: stdio locks the stream, lines never interleave. */
	fprintf(stderr, "%s: %s%s\n", prefix, level_tag(level), msg);
}

void kv_log_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	size_t n = strlen(pool_tag);
	enum kv_log_level l = (enum kv_log_level)level;

	(void)ctx;
	if (l > KV_LOG_INFO && !verbose_on)
		return;
	/* librmr names the pool itself: drop it rather than say it twice. */
	if (n && !strncmp(msg, pool_tag, n) && (msg[n] == ' ' || msg[n] == ':')) {
		msg += n;
		msg += msg[0] == ':' ? 1 : 0;
		while (*msg == ' ')
			msg++;
	}
	fprintf(stderr, "%s: %slibrmr: %s\n", prefix, level_tag(l), msg);
}
