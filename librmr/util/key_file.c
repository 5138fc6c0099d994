/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pool key files (include/rmr/rmr.h): a secret that proves membership of a
 * pool, so it must never be readable by anyone but the daemons' user. A file
 * that others may read is refused rather than used: the key may have leaked,
 * and the operator should know. Every consumer (libbrmr's pools, the
 * kvstore) keeps its key in this one format.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "compiler.h"
#include "hex.h"
#include <rmr/rmr.h>

__attribute__((format(printf, 4, 5)))
static int key_fail(int ret, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

RMR_EXPORT int rmr_key_load(const char *path, uint8_t key[RMR_KEY_LEN], char *err, size_t errlen)
{
	char buf[RMR_KEY_FILE_LEN + 2];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !*path || !key)
		return key_fail(-EINVAL, err, errlen, "no key file named");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ret = -errno;
		return key_fail(ret, err, errlen, "key file %s: %s", path, strerror(-ret));
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return key_fail(ret, err, errlen, "key file %s: %s", path, strerror(-ret));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return key_fail(-EINVAL, err, errlen, "key file %s: not a regular file", path);
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		close(fd);
		return key_fail(-EPERM, err, errlen, "key file %s: mode %04o lets group or others "
				"read it; the key may have leaked (chmod 600 it, or make a new one)",
				path, (unsigned)(st.st_mode & 07777));
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			close(fd);
			return key_fail(ret, err, errlen, "key file %s: %s", path, strerror(-ret));
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len == RMR_KEY_FILE_LEN && buf[len - 1] == '\n')
		len--;
	if (len != 2 * RMR_KEY_LEN) {
		sodium_memzero(buf, sizeof(buf));
		return key_fail(-EINVAL, err, errlen, "key file %s: not a pool key (%d hexadecimal "
				"digits and a newline expected)", path, 2 * RMR_KEY_LEN);
	}
	for (size_t i = 0; i < RMR_KEY_LEN; i++) {
		int hi = hex_digit(buf[2 * i]), lo = hex_digit(buf[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			sodium_memzero(buf, sizeof(buf));
			sodium_memzero(key, RMR_KEY_LEN);
			return key_fail(-EINVAL, err, errlen, "key file %s: character %zu is not a "
					"hexadecimal digit", path, 2 * i + 1 + (hi >= 0));
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

RMR_EXPORT int rmr_key_create(const char *path, char *err, size_t errlen)
{
	uint8_t key[RMR_KEY_LEN];
	char hex[RMR_KEY_FILE_LEN + 1];
	size_t off = 0;
	int fd, ret = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !*path)
		return key_fail(-EINVAL, err, errlen, "no key file named");
	if (sodium_init() < 0)
		return key_fail(-EIO, err, errlen, "key file %s: libsodium does not start", path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		return key_fail(ret, err, errlen, "key file %s: %s", path, strerror(-ret));
	}
	/* Whatever the umask: the key is for the owner alone. */
	if (fchmod(fd, 0600) < 0)
		ret = -errno;
	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	hex[2 * RMR_KEY_LEN] = '\n';
	while (!ret && off < RMR_KEY_FILE_LEN) {
		ssize_t n = write(fd, hex + off, RMR_KEY_FILE_LEN - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ret = -errno;
		else
			off += (size_t)n;
	}
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	sodium_memzero(key, sizeof(key));
	sodium_memzero(hex, sizeof(hex));
	if (ret) {
		unlink(path);
		return key_fail(ret, err, errlen, "key file %s: %s", path, strerror(-ret));
	}
	return 0;
}
