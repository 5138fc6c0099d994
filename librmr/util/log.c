/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "compiler.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static rmr_log_fn log_fn;
static void *log_ctx;
static enum rmr_log_level log_max = RMR_LOG_INFO;

RMR_EXPORT void rmr_log_set_sink(rmr_log_fn fn, void *ctx, enum rmr_log_level max_level)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_ctx = ctx;
	log_max = max_level;
	pthread_mutex_unlock(&log_lock);
}

static const char *level_name(enum rmr_log_level l)
{
	switch (l) {
	case RMR_LOG_ERR: return "error";
	case RMR_LOG_WARN: return "warning";
	case RMR_LOG_NOTICE: return "notice";
	case RMR_LOG_INFO: return "info";
	case RMR_LOG_DEBUG: return "debug";
	}
	return "?";
}

void rmr_logf(enum rmr_log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	if (log_fn) {
		log_fn(log_ctx, level, line);
	} else {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		fprintf(stderr, "%02d:%02d:%02d.%03ld rmr %s: %s\n", tm.tm_hour, tm.tm_min,
			tm.tm_sec, ts.tv_nsec / 1000000, level_name(level), line);
	}
	pthread_mutex_unlock(&log_lock);
}
