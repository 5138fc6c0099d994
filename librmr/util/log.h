/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal logging: one line per event, routed to the sink set by the application. */
#ifndef RMR_UTIL_LOG_H
#define RMR_UTIL_LOG_H

#include <rmr/rmr.h>

void rmr_logf(enum rmr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...) rmr_logf(RMR_LOG_ERR, __VA_ARGS__)
#define log_warn(...) rmr_logf(RMR_LOG_WARN, __VA_ARGS__)
#define log_notice(...) rmr_logf(RMR_LOG_NOTICE, __VA_ARGS__)
#define log_info(...) rmr_logf(RMR_LOG_INFO, __VA_ARGS__)
#define log_debug(...) rmr_logf(RMR_LOG_DEBUG, __VA_ARGS__)

#endif
