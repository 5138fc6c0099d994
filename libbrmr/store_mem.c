/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "store_mem.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define EXTENT (1ull << STORE_MEM_EXTENT_SHIFT)
#define PAGE 4096ull

static uint64_t extent_end(const struct store_mem *m, uint64_t e)
{
	uint64_t end = (e + 1) << STORE_MEM_EXTENT_SHIFT;

	return end < m->size ? end : m->size;
}

static bool bit_get(const uint64_t *bits, uint64_t e)
{
	return (bits[e / 64] >> (e % 64)) & 1;
}

static void bit_set(uint64_t *bits, uint64_t e, bool on)
{
	if (on)
		bits[e / 64] |= 1ull << (e % 64);
	else
		bits[e / 64] &= ~(1ull << (e % 64));
}

/* Inside the data area, and every extent of it known? */
static bool servable(const struct store_mem *m, uint64_t addr, size_t len)
{
	if (!m->base || !len || addr > m->size || len > m->size - addr)
		return false;
	for (uint64_t e = addr >> STORE_MEM_EXTENT_SHIFT;
	     e <= (addr + len - 1) >> STORE_MEM_EXTENT_SHIFT; e++)
		if (!bit_get(m->known, e))
			return false;
	return true;
}

/* Does the file hold data, no hole, over [@p start, @p end) of the data area? */
static bool allocated(const struct store_mem *m, uint64_t start, uint64_t end)
{
	off_t hole = lseek(m->fd, (off_t)(m->data_offset + start), SEEK_HOLE);

	return hole >= 0 && (uint64_t)hole >= m->data_offset + end;
}

/*
 * Put the pages of known extent @p e into the page tables in one call
 * rather than one fault per page on first copy (a fresh member spent 5.5 %
 * of its time in page faults under 4k writes). Their memory exists already;
 * this only costs the page-table entries. Done when an extent becomes known
 * while serving, and before the first large copy into one the scan at start
 * found (faulting those in at start would walk a large store before serving).
 */
static void fault_in(struct store_mem *m, uint64_t e)
{
#ifdef MADV_POPULATE_WRITE
	uint64_t start = e << STORE_MEM_EXTENT_SHIFT;

	/* Only a hint: an old kernel (EINVAL) or any error leaves the faults to come. */
	(void)madvise(m->base + start, (size_t)(extent_end(m, e) - start), MADV_POPULATE_WRITE);
#endif
	bit_set(m->faulted, e, true);
}

/* Before a large copy: fault in the extents of [@p addr, + @p len) not yet in. */
static void fault_in_range(struct store_mem *m, uint64_t addr, size_t len)
{
	if (len <= STORE_MEM_FAULT_MAX)
		return;
	for (uint64_t e = addr >> STORE_MEM_EXTENT_SHIFT;
	     e <= (addr + len - 1) >> STORE_MEM_EXTENT_SHIFT; e++)
		if (!bit_get(m->faulted, e))
			fault_in(m, e);
}

/* Mark the extents that lie wholly inside [@p from, @p to) known. */
static void know_range(struct store_mem *m, uint64_t from, uint64_t to)
{
	for (uint64_t e = (from + EXTENT - 1) >> STORE_MEM_EXTENT_SHIFT;
	     (e << STORE_MEM_EXTENT_SHIFT) < m->size && extent_end(m, e) <= to; e++)
		bit_set(m->known, e, true);
}

/* Walk the data area's data segments: each SEEK_HOLE ends a whole run of pages. */
static int scan(struct store_mem *m)
{
	uint64_t pos = 0;

	while (pos < m->size) {
		off_t data = lseek(m->fd, (off_t)(m->data_offset + pos), SEEK_DATA);
		off_t hole;

		if (data < 0)
			return errno == ENXIO ? 0 : -errno; /* ENXIO: no data after pos */
		if ((uint64_t)data >= m->data_offset + m->size)
			return 0;
		hole = lseek(m->fd, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		pos = (uint64_t)hole - m->data_offset;
		if (pos > m->size)
			pos = m->size;
		know_range(m, (uint64_t)data - m->data_offset, pos);
	}
	return 0;
}

int store_mem_open(struct store_mem *m, int fd, uint64_t data_offset, uint64_t size)
{
	uint64_t nextents = (size + EXTENT - 1) >> STORE_MEM_EXTENT_SHIFT;
	struct statfs sfs;
	struct stat st;
	void *base;
	int ret;

	memset(m, 0, sizeof(*m));
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sfs) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || sfs.f_type != TMPFS_MAGIC)
		return 0;
	if (!size || data_offset % PAGE || size > SIZE_MAX - PAGE)
		return -EINVAL;
	m->known = calloc((size_t)((nextents + 63) / 64), sizeof(*m->known));
	m->faulted = calloc((size_t)((nextents + 63) / 64), sizeof(*m->faulted));
	if (!m->known || !m->faulted) {
		free(m->known);
		free(m->faulted);
		m->known = m->faulted = NULL;
		return -ENOMEM;
	}
	base = mmap(NULL, (size_t)((size + PAGE - 1) & ~(PAGE - 1)), PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, (off_t)data_offset);
	if (base == MAP_FAILED) {
		ret = -errno;
		free(m->known);
		free(m->faulted);
		m->known = m->faulted = NULL;
		return ret;
	}
	m->base = base;
	m->size = size;
	m->fd = fd;
	m->data_offset = data_offset;
	ret = scan(m);
	if (ret < 0) {
		store_mem_close(m);
		return ret;
	}
	return 1;
}

void store_mem_close(struct store_mem *m)
{
	if (m->base)
		munmap(m->base, (size_t)((m->size + PAGE - 1) & ~(PAGE - 1)));
	free(m->known);
	free(m->faulted);
	memset(m, 0, sizeof(*m));
}

bool store_mem_read(struct store_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (!servable(m, addr, len))
		return false;
	fault_in_range(m, addr, len);
	memcpy(buf, m->base + addr, len);
	m->mapped_ios++;
	return true;
}

bool store_mem_write(struct store_mem *m, uint64_t addr, const void *buf, size_t len)
{
	if (!servable(m, addr, len))
		return false;
	fault_in_range(m, addr, len);
	memcpy(m->base + addr, buf, len);
	m->mapped_ios++;
	return true;
}

void store_mem_written(struct store_mem *m, uint64_t addr, uint64_t len)
{
	uint64_t end = addr + len;

	if (!m->base || !len || addr > m->size || len > m->size - addr)
		return;
	for (uint64_t e = addr >> STORE_MEM_EXTENT_SHIFT;
	     e <= (end - 1) >> STORE_MEM_EXTENT_SHIFT; e++) {
		uint64_t start = e << STORE_MEM_EXTENT_SHIFT, stop = extent_end(m, e);

		if (bit_get(m->known, e))
			continue;
		/* Covered: every page of it now exists. Reaching its last page (a
		 * fill going forward): ask the file whether a hole is left. */
		if ((addr <= start && end >= stop) ||
		    (end + PAGE > stop && allocated(m, start, stop))) {
			bit_set(m->known, e, true);
			fault_in(m, e);
		}
	}
}

void store_mem_forget(struct store_mem *m, uint64_t addr, uint64_t len)
{
	if (!m->base || !len || addr >= m->size)
		return;
	if (len > m->size - addr)
		len = m->size - addr;
	for (uint64_t e = addr >> STORE_MEM_EXTENT_SHIFT;
	     e <= (addr + len - 1) >> STORE_MEM_EXTENT_SHIFT; e++) {
		bit_set(m->known, e, false);
		bit_set(m->faulted, e, false); /* the kernel unmaps what it punches */
	}
}
