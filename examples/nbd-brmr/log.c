/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log.c: log lines of nbd-brmr, to stderr, each prefixed with
 * "nbd-brmr pool=NAME: " so that lines of several servers on one terminal or
 * journal can be told apart. Stays off the data path: requests are only
 * logged when they are refused, and then only with --verbose.
 */
#include "nbdb.h"

#include <stdio.h>
#include <string.h>

static char log_prefix[RMR_NAME_MAX + 32] = "nbd-brmr:";
static bool log_verbose;

void nbdb_log_init(const char *pool, bool verbose)
{
	snprintf(log_prefix, sizeof(log_prefix), "nbd-brmr pool=%s:", pool);
	log_verbose = verbose;
}

bool nbdb_log_verbose(void)
{
	return log_verbose;
}

static const char *level_tag(enum nbdb_log_level level)
{
	switch (level) {
	case NBDB_ERR:
		return "error: ";
	case NBDB_WARN:
		return "warning: ";
	case NBDB_NOTICE:
	case NBDB_INFO:
	case NBDB_DEBUG:
		return "";
	}
	return "";
}

static void log_line(enum nbdb_log_level level, const char *msg)
{
	/* One fprintf per line: stdio locks the stream for the call, so lines
	 * of different threads do not interleave. */
	fprintf(stderr, "%s %s%s\n", log_prefix, level_tag(level), msg);
}

void nbdb_log(enum nbdb_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > NBDB_INFO && !log_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_line(level, msg);
}

void nbdb_log_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	enum nbdb_log_level l;

	(void)ctx;
	switch (level) {
	case RMR_LOG_ERR:
		l = NBDB_ERR;
		break;
	case RMR_LOG_WARN:
		l = NBDB_WARN;
		break;
	case RMR_LOG_NOTICE:
		l = NBDB_NOTICE;
		break;
	case RMR_LOG_INFO:
		l = NBDB_INFO;
		break;
	case RMR_LOG_DEBUG:
		l = NBDB_DEBUG;
		break;
	default:
		l = NBDB_INFO;
		break;
	}
	if (l > NBDB_INFO && !log_verbose)
		return;
	/* librmr's lines name their pool and member already. */
	fprintf(stderr, "nbd-brmr: %s%s\n", level_tag(l), msg);
}
