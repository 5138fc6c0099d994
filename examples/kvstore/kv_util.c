/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers of the kvstore programs; see kv_util.h. */
#include "kv_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int kv_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int kv_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

bool kv_parse_i64(const char *s, size_t len, int64_t *out)
{
	bool neg = false;
	uint64_t v = 0, limit;
	size_t i = 0;

	if (len == 0 || len > 20)
		return false;
	if (s[0] == '-') {
		neg = true;
		i = 1;
		if (len == 1)
			return false;
	}
	if (s[i] == '0' && len > i + 1)
		return false; /* "007" is not an integer to Redis */
	if (s[i] == '0' && neg)
		return false; /* nor "-0" */
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return false;
		d = (unsigned)(s[i] - '0');
		if (v > (limit - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

int kv_write_file_atomic(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;
	int rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	if (fputs(text, f) == EOF)
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

uint64_t kv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t kv_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int kv_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

int kv_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, bool dsync)
{
	/* RWF_DSYNC makes one write durable in one call; older kernels lack it. */
	static atomic_bool no_rwf_dsync;
	bool use_rwf = dsync && !atomic_load(&no_rwf_dsync);
	size_t done = 0;

	while (done < len) {
		struct iovec iov = { (char *)buf + done, len - done };
		ssize_t n = use_rwf ? pwritev2(fd, &iov, 1, (off_t)(off + done), RWF_DSYNC)
				    : pwrite(fd, iov.iov_base, iov.iov_len, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && use_rwf && (errno == EOPNOTSUPP || errno == ENOSYS)) {
			atomic_store(&no_rwf_dsync, true);
			use_rwf = false;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	if (dsync && !use_rwf && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

int kv_listen_unix(const char *path, char *why, size_t whylen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, probe, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "socket path %s is too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(why, whylen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		/* A live server answers: then this is a second start. */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			snprintf(why, whylen, "%s is in use by a running process", path);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -errno;
	}
	/* Created 0600 from the start: status is for the operator only. */
	old = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret < 0 || listen(fd, 16) < 0) {
		int err = errno;

		snprintf(why, whylen, "%s: %s", path, strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}
