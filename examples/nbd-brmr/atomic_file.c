/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small files (pid, ready, close record) written so that a reader sees all or nothing. */
#include "nbdb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nbdb_write_file_atomic(const char *path, const char *text, mode_t mode, bool sync)
{
	size_t len = strlen(text);
	char *tmp;
	int fd, rc = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = -errno;
		free(tmp);
		return rc;
	}
	for (size_t done = 0; done < len && rc == 0;) {
		ssize_t n = write(fd, text + done, len - done);

		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n == 0)
			rc = -EIO;
	}
	if (rc == 0 && sync && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
