/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * daemon_log: the log lines of brmr-server and nbd-brmr, to stderr or to
 * syslog, each carrying the pool and the member it is about:
 *
 *   stderr:  PROG pool=vol1 member=2: [error: |warning: ]TEXT
 *   syslog:  pool=vol1 member=2: TEXT   (ident PROG, facility daemon)
 *
 * A line that names its own pool= and member= (librmr's lines do) keeps
 * them; one that does not gets the daemon's identity (dlog_identity()):
 * the pool(s) and member(s) it serves, "-" where there is none (the client
 * is no member, so its own lines say member=-).
 *
 * Thread-safe: every line is written with one call.
 */
#ifndef BRMR_TOOLS_DAEMON_LOG_H
#define BRMR_TOOLS_DAEMON_LOG_H

#include <rmr/rmr.h>

#include <stdbool.h>

/* Where lines go, and whether debug lines are kept. Call once, first. */
void dlog_open(const char *prog, bool use_syslog, bool verbose);
/* The identity of lines that name none: a pool ("vol1", "vol1,vol2") and a
 * member ("2", "1,3"). NULL or "" for "-". Call before threads log. */
void dlog_identity(const char *pool, const char *member);
bool dlog_verbose(void);

/* One line with the daemon's identity. */
void dlog(enum rmr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line about member @p member of pool @p pool (0: the daemon's member). */
void dlog_pm(enum rmr_log_level level, const char *pool, unsigned member, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* librmr's log sink (rmr_log_set_sink()). */
void dlog_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg);

#endif
