/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The record of nbd-brmr's last clean close (rmr_close_record), kept in a
 * small text file between a clean shutdown and the next start. With it,
 * the next open may go on without members that were behind at the close
 * (rmr_client_opts.last_close): a planned restart while a member is away
 * needs no --open-without. librmr trusts it only if every member it names
 * answers and grants the next writer epoch, so a stale or foreign file
 * opens nothing it should not; a file that does not parse is ignored.
 *
 *   # nbd-brmr: the last clean close of pool vol1
 *   pool_uuid 4f2c...-...
 *   writer_epoch 12
 *   current_ids 0x6
 */
#include "nbdb.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nbdb_close_record_load(const char *path, struct rmr_close_record *rec)
{
	char line[128], uuid[64] = "";
	bool have_epoch = false, have_ids = false, have_uuid = false;
	FILE *f = fopen(path, "re");
	int rc = 0;

	memset(rec, 0, sizeof(*rec));
	if (!f)
		return errno == ENOENT ? -ENOENT : -errno;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		char extra;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "pool_uuid %63s %c", uuid, &extra) == 1)
			have_uuid = rmr_uuid_parse(uuid, &rec->pool_uuid) == 0;
		else if (sscanf(line, "writer_epoch %" SCNu64 " %c", &rec->writer_epoch, &extra) == 1)
			have_epoch = true;
		else if (sscanf(line, "current_ids %" SCNx64 " %c", &rec->current_ids, &extra) == 1)
			have_ids = true;
		else
			rc = -EINVAL;
	}
	fclose(f);
	if (rc == 0 && !(have_uuid && have_epoch && have_ids && rec->writer_epoch &&
			 rec->current_ids && !(rec->current_ids & 1)))
		rc = -EINVAL;
	if (rc < 0)
		memset(rec, 0, sizeof(*rec));
	return rc;
}

int nbdb_close_record_save(const char *path, const char *pool, const struct rmr_close_record *rec)
{
	char uuid[37], *text;
	int rc;

	rmr_uuid_format(&rec->pool_uuid, uuid);
	if (asprintf(&text, "# nbd-brmr: the last clean close of pool %s\npool_uuid %s\n"
			    "writer_epoch %" PRIu64 "\ncurrent_ids 0x%" PRIx64 "\n",
		     pool, uuid, rec->writer_epoch, rec->current_ids) < 0)
		return -ENOMEM;
	rc = nbdb_write_file_atomic(path, text, 0600, true);
	free(text);
	return rc;
}
