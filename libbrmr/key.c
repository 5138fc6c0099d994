/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The key of a pool file: its key_file, read by librmr's rmr_key_load().
 */
#include <rmr/brmr_config.h>

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "brmr_internal.h"

BRMR_EXPORT int brmr_config_key(const struct brmr_config *cfg, uint8_t key[RMR_KEY_LEN],
				bool *have, char *err, size_t errlen)
{
	int ret;

	if (!cfg || !key || !have) {
		if (err && errlen)
			snprintf(err, errlen, "bad arguments");
		return -EINVAL;
	}
	*have = false;
	if (!cfg->key_file_set && access(cfg->key_file, F_OK) < 0 && errno == ENOENT)
		return 0;
	ret = rmr_key_load(cfg->key_file, key, err, errlen);
	if (ret == 0)
		*have = true;
	return ret;
}
