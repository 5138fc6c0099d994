/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A store on tmpfs: its data area mapped, so that a read or write is a
 * memcpy instead of a system call that walks the page cache per page (on
 * tmpfs both land in the same pages, and neither makes them more durable).
 * Measured on a 2-vCPU VM, 4k random writes at QD32 through a 2-member pool:
 * a member's CPU per write 4.1 -> 3.2 us, the pool's IOPS +7-10 %.
 *
 * A store file is sparse, and a store through a mapping into a hole
 * allocates the page in the fault handler, where a full tmpfs can only
 * answer SIGBUS. So the map serves only extents known to be allocated
 * through and through; everything else goes through pread and pwrite,
 * which answer ENOSPC. An extent becomes known at start (a SEEK_DATA/
 * SEEK_HOLE scan), when a pwrite covers it, and when a pwrite reaches its
 * last page and a SEEK_HOLE finds none in it (so a sequential fill maps
 * what it filled); it is forgotten before a trim punches a hole in it.
 *
 * A copy into pages this process has not touched yet costs a page fault
 * per 4 KiB page: a copy of a large request (over STORE_MEM_FAULT_MAX)
 * first fills the page tables of its extents in one madvise per extent,
 * as a pwrite that makes an extent known does. Measured on tmpfs, per GiB:
 * pwrite 0.25 s, memcpy into untouched pages 0.43 s, the madvise 0.12 s
 * and a memcpy after it 0.12 s; 1 MiB writes through a 2-member pool cost
 * a member 545-555 us of CPU per write against 610-690 through pwrite.
 * Small requests take their few faults: filling a 2 MiB extent's page
 * tables (about 235 us) would stall the one 4 KiB request that found it.
 *
 * Not thread-safe: the store runs every request of a mapped store on the
 * server's loop thread (tmpfs never blocks), so a trim cannot race a copy.
 *
 * What the map cannot survive is another process shrinking the store file
 * or punching holes in it while it is served (the store holds an exclusive
 * flock, which brmr's tools respect): a copy into the missing pages ends
 * the member with SIGBUS where pread would have failed the request. The
 * member's peers then carry on without it, as after any crash.
 */
#ifndef BRMR_STORE_MEM_H
#define BRMR_STORE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store_mem {
	uint8_t *base;           /* the data area, mapped; NULL: not mapped */
	uint64_t size;           /* bytes of it (the pool size) */
	int fd;
	uint64_t data_offset;    /* of the data area in the file */
	uint64_t *known;         /* bit per extent: every page of it is allocated */
	uint64_t *faulted;       /* bit per extent: its pages are in our page tables */
	uint64_t mapped_ios;     /* reads and writes served through the map */
};

/* Extents of 2 MiB: a 1 TiB pool needs 64 KiB of bits. */
#define STORE_MEM_EXTENT_SHIFT 21
/* Larger requests fault their extents in whole before they copy (see above). */
#define STORE_MEM_FAULT_MAX (32u * 1024)

/*
 * Map the data area [@p data_offset, + @p size) of @p fd if it is a regular
 * file on tmpfs, and scan which extents are allocated.
 * @return 1 if mapped, 0 if the store is not on tmpfs, -errno on failure
 *         (the store then works unmapped).
 */
int store_mem_open(struct store_mem *m, int fd, uint64_t data_offset, uint64_t size);
void store_mem_close(struct store_mem *m);

static inline bool store_mem_mapped(const struct store_mem *m)
{
	return m->base != NULL;
}

/*
 * Copy [@p addr, + @p len) of the data area through the map, if every
 * extent of it is known. @return whether it did.
 */
bool store_mem_read(struct store_mem *m, uint64_t addr, void *buf, size_t len);
bool store_mem_write(struct store_mem *m, uint64_t addr, const void *buf, size_t len);

/* A pwrite of [@p addr, + @p len) succeeded: learn which extents are now allocated. */
void store_mem_written(struct store_mem *m, uint64_t addr, uint64_t len);

/* Holes may be punched in [@p addr, + @p len): stop serving its extents through the map. */
void store_mem_forget(struct store_mem *m, uint64_t addr, uint64_t len);

#endif
