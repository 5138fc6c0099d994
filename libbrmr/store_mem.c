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

static bool is_known(const struct store_mem *m, uint64_t e)
{
	return (m->known[e / 64] >> (e % 64)) & 1;
}

static void set_known(struct store_mem *m, uint64_t e, bool known)
{
	if (known)
		m->known[e / 64] |= 1ull << (e % 64);
	else
		m->known[e / 64] &= ~(1ull << (e % 64));
}

/* Inside the data area, and every extent of it known? */
static bool servable(const struct store_mem *m, uint64_t addr, size_t len)
{
	if (!m->base || !len || len > STORE_MEM_MAX_COPY || addr > m->size || len > m->size - addr)
		return false;
	for (uint64_t e = addr >> STORE_MEM_EXTENT_SHIFT;
	     e <= (addr + len - 1) >> STORE_MEM_EXTENT_SHIFT; e++)
		if (!is_known(m, e))
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
 * Map the pages of a newly known extent into the page tables in one call
 * rather than one fault per page on first copy (a fresh member spent 5.5 %
 * of its time in page faults under 4k writes). Their memory exists already;
 * this only costs the page-table entries. Not done for the extents the scan
 * at start finds: that would walk a large store before serving it.
 */
static void prefault(struct store_mem *m, uint64_t start, uint64_t stop)
{
#ifdef MADV_POPULATE_WRITE
	/* Only a hint: an old kernel (EINVAL) or any error leaves the faults to come. */
	(void)madvise(m->base + start, (size_t)(stop - start), MADV_POPULATE_WRITE);
#else
	(void)m;
	(void)start;
	(void)stop;
#endif
}

/* Mark the extents that lie wholly inside [@p from, @p to) known. */
static void know_range(struct store_mem *m, uint64_t from, uint64_t to)
{
	for (uint64_t e = (from + EXTENT - 1) >> STORE_MEM_EXTENT_SHIFT;
	     (e << STORE_MEM_EXTENT_SHIFT) < m->size && extent_end(m, e) <= to; e++)
		set_known(m, e, true);
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
	if (!m->known)
		return -ENOMEM;
	base = mmap(NULL, (size_t)((size + PAGE - 1) & ~(PAGE - 1)), PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, (off_t)data_offset);
	if (base == MAP_FAILED) {
		ret = -errno;
		free(m->known);
		m->known = NULL;
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
	memset(m, 0, sizeof(*m));
}

bool store_mem_read(struct store_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (!servable(m, addr, len))
		return false;
	memcpy(buf, m->base + addr, len);
	m->mapped_ios++;
	return true;
}

bool store_mem_write(struct store_mem *m, uint64_t addr, const void *buf, size_t len)
{
	if (!servable(m, addr, len))
		return false;
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

		if (is_known(m, e))
			continue;
		/* Covered: every page of it now exists. Reaching its last page (a
		 * fill going forward): ask the file whether a hole is left. */
		if ((addr <= start && end >= stop) ||
		    (end + PAGE > stop && allocated(m, start, stop))) {
			set_known(m, e, true);
			prefault(m, start, stop);
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
	     e <= (addr + len - 1) >> STORE_MEM_EXTENT_SHIFT; e++)
		set_known(m, e, false);
}
