/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_store: a whole store file through the loaders. brmr_store_open()
 * picks a superblock slot; with FZ_SERVE the store is also served on an
 * in-process ("mem") server as brmr_store_serve() does, which runs librmr's
 * loaders over it: the metadata blob (store_meta_load, pool_meta_load), the
 * dirty-map bitmaps (load_maps) and the activity-log records
 * (al_load_records). The input patches a small formatted store: see
 * fuzz_store_image.h.
 *
 * A store must never crash a member: it is opened or refused with a
 * reason, and an opened one has a geometry that fits in the file.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <rmr/brmr.h>
#include <rmr/server.h>

#include "fuzz_store_image.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fz_image img;
static struct rmr_server *srv;

/* librmr's log lines are formatted (and checked by ASan) but not printed. */
static void quiet(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

static void setup(void)
{
	struct rmr_server_opts so = { .size = sizeof(so), .transport = "mem",
				      .listen_addr = "fuzz-store" };

	rmr_log_set_sink(quiet, NULL, RMR_LOG_DEBUG);
	if (fz_image_init(&img) < 0 || rmr_server_create(&so, &srv) < 0)
		abort();
}

/* What brmr_store_info() reports must fit in the file, in order, without wrapping. */
static void check_info(const struct brmr_store_info *in)
{
	unsigned __int128 meta_end = (unsigned __int128)in->meta_offset + in->meta_size;
	unsigned __int128 map_end = (unsigned __int128)in->map_offset + in->map_size;
	unsigned __int128 data_end = (unsigned __int128)in->data_offset + in->pool_size;

	if (in->meta_offset < SB_AREA_SIZE || meta_end > in->map_offset ||
	    map_end > in->data_offset || data_end > img.size || !in->pool_size ||
	    !in->chunk_size || (in->chunk_size & (in->chunk_size - 1)) || !in->member_id ||
	    in->member_id > RMR_MAX_MEMBER_ID || !in->pool_name[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_member members[RMR_MAX_MEMBERS + 1];
	struct rmr_server_pool *pool = NULL;
	struct brmr_store *s;
	char why[256] = "";
	int flags, n;

	if (!srv)
		setup();
	flags = fz_image_load(&img, data, size);
	if (flags < 0)
		abort();
	if (brmr_store_open(img.path, &s, why, sizeof(why)) < 0) {
		if (!why[0])
			abort();
		return 0;
	}
	if (brmr_store_info(s, &info) < 0)
		abort();
	check_info(&info);
	n = brmr_store_members(s, members, RMR_MAX_MEMBERS + 1);
	if (n < 0 || n > RMR_MAX_MEMBERS)
		abort();
	if (flags & FZ_SERVE) {
		struct brmr_serve_opts opts = { .size = sizeof(opts),
						.replace = flags & FZ_REPLACE };
		struct rmr_peer peers[RMR_MAX_MEMBERS];
		struct rmr_pool_params params;
		int ret;

		/*
		 * brmr_store_serve() without its lock and I/O worker threads
		 * (four threads per input would cost more than the input); the
		 * store then does its I/O inline, as in the unit tests.
		 */
		if (store_pool_params(s, &opts, &params, peers) < 0)
			abort();
		ret = rmr_server_add_pool(srv, &params, &store_ops, s, &pool);
		/* Served, or refused as the API documents; nothing else. */
		if (ret == 0)
			rmr_server_remove_pool(pool);
		else if (ret != -EBADMSG && ret != -EINVAL && ret != -EEXIST &&
			 ret != -EOVERFLOW && ret != -EIO)
			abort();
	}
	brmr_store_close(s);
	return 0;
}
