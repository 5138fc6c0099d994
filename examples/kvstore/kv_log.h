/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_log.h: log lines of the kvstore programs, to stderr. Every line starts
 * with the program, the pool and (on a member) the member id:
 *   "kvstore-member pool=kv member=2: resync complete ..."
 * so that the lines of several processes on one terminal or journal can be
 * told apart. librmr's own lines go through the same prefix (kv_log_rmr_sink).
 */
#ifndef KVSTORE_LOG_H
#define KVSTORE_LOG_H

#include <rmr/rmr.h>

#include <stdbool.h>

enum kv_log_level {
	KV_LOG_ERR = 3,
	KV_LOG_WARN = 4,
	KV_LOG_NOTICE = 5,
	KV_LOG_INFO = 6,
	KV_LOG_DEBUG = 7,
};

/* Set the prefix; @member_id 0 leaves the member out. Debug lines only if @verbose. */
void kv_log_init(const char *program, const char *pool, unsigned member_id, bool verbose);
bool kv_log_verbose(void);
void kv_log(enum kv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* librmr's log sink (rmr_log_set_sink), so its lines carry the same prefix. */
void kv_log_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg);

#endif
