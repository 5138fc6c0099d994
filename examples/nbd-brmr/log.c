/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log.c: log lines of nbd-brmr, to stderr or syslog, through the daemons'
 * shared log code (tools/daemon_log.c): every line carries pool=NAME and
 * member=ID, member=- for the client's own lines that are about no one
 * member. Stays off the data path: requests are only logged when they are
 * refused, and then only with --verbose.
 */
#include "nbdb.h"
#include "../../tools/daemon_log.h"

#include <stdio.h>
#include <string.h>

void nbdb_log_init(const char *pool, bool verbose, bool use_syslog)
{
	dlog_open("nbd-brmr", use_syslog, verbose);
	dlog_identity(pool, "-");
}

bool nbdb_log_verbose(void)
{
	return dlog_verbose();
}

void nbdb_log(enum nbdb_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > NBDB_INFO && !dlog_verbose())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* The levels are syslog's, as librmr's are. */
	dlog((enum rmr_log_level)level, "%s", msg);
}

void nbdb_log_member(enum nbdb_log_level level, unsigned member, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dlog_pm((enum rmr_log_level)level, NULL, member, "%s", msg);
}

void nbdb_log_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg)
{
	dlog_rmr_sink(ctx, level, msg);
}
