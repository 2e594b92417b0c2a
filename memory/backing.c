/*
 * backing.c — the table of pool backings and what they share: the 2 MiB
 * aligned MAP_SHARED mapping, closing fds, sealed memfds, recognising a
 * dma-buf fd and the DMA_BUF_IOCTL_SYNC cache-maintenance call.
 */
#include "memory/backing.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* Base alignment of the mapping: one x86-64 huge page, so THP (when enabled)
 * and device page tables with 2 MiB entries can be used for the whole pool. */
#define HET_BACKING_BASE_ALIGN ((size_t)2 << 20)

const struct het_backing_ops *het_backing_ops_get(enum het_pool_backing kind)
{
    switch (kind) {
    case HET_POOL_BACKING_NPU:     return &het_backing_npu_ops;
    case HET_POOL_BACKING_DMAHEAP: return &het_backing_dmaheap_ops;
    case HET_POOL_BACKING_UDMABUF: return &het_backing_udmabuf_ops;
    case HET_POOL_BACKING_MEMFD:   return &het_backing_memfd_ops;
    default:                       return NULL;
    }
}

void het_backing_reset(struct het_backing *b, enum het_pool_backing kind)
{
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->map_fd = b->dmabuf_fd = -1;
}

enum het_status het_backing_map_shared(struct het_backing *b, bool hugepages, het_error *err)
{
    if (b->size > SIZE_MAX - HET_BACKING_BASE_ALIGN)
        return het_error_set(err, HET_ERR_INVALID, "size %zu too large to map", b->size);
    /* Reserve address space with slack, then place the shared mapping at
     * the first 2 MiB boundary inside it and return the slack. */
    size_t span = b->size + HET_BACKING_BASE_ALIGN;
    void *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *want = NULL;
    if (res != MAP_FAILED)
        want = (void *)(((uintptr_t)res + HET_BACKING_BASE_ALIGN - 1) & ~(uintptr_t)(HET_BACKING_BASE_ALIGN - 1));
    void *p = mmap(want, b->size, PROT_READ | PROT_WRITE, MAP_SHARED | (want ? MAP_FIXED : 0), b->map_fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        if (res != MAP_FAILED) munmap(res, span);
        return het_error_set(err, HET_ERR_IO, "mmap(MAP_SHARED, %zu bytes) of fd %d: %s", b->size, b->map_fd,
                             strerror(e));
    }
    if (res != MAP_FAILED) {
        char *lo = res, *hi = (char *)res + span, *end = (char *)p + b->size;
        if ((char *)p > lo) munmap(lo, (size_t)((char *)p - lo));
        if (hi > end) munmap(end, (size_t)(hi - end));
    }
    if (hugepages) (void)madvise(p, b->size, MADV_HUGEPAGE);   /* best effort */
    b->base = p;
    return HET_OK;
}

void het_backing_close_fds(struct het_backing *b)
{
    if (b->base) munmap(b->base, b->size);
    if (b->dmabuf_fd >= 0 && b->dmabuf_fd != b->map_fd) close(b->dmabuf_fd);
    if (b->map_fd >= 0) close(b->map_fd);
    b->base = NULL;
    b->map_fd = b->dmabuf_fd = -1;
}

enum het_status het_backing_memfd_create(const char *name, size_t size, unsigned seals, int *fd,
                                         het_error *err)
{
    *fd = -1;
    int f = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0) return het_error_set(err, HET_ERR_IO, "memfd_create(\"%s\"): %s", name, strerror(errno));
    if (size > (size_t)INT64_MAX || ftruncate(f, (off_t)size) != 0) {
        int e = size > (size_t)INT64_MAX ? EFBIG : errno;
        close(f);
        return het_error_set(err, HET_ERR_NOMEM, "memfd ftruncate to %zu bytes: %s", size, strerror(e));
    }
    if (seals && fcntl(f, F_ADD_SEALS, (int)seals) != 0) {
        int e = errno;
        close(f);
        return het_error_set(err, HET_ERR_IO, "memfd F_ADD_SEALS 0x%x: %s", seals, strerror(e));
    }
    *fd = f;
    return HET_OK;
}

bool het_backing_fd_is_dmabuf(int fd)
{
    if (fd < 0) return false;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    if (f) {
        bool found = false;
        while (!found && fgets(line, sizeof line, f))
            found = strncmp(line, "exp_name:", 9) == 0;
        fclose(f);
        return found;
    }
    struct dma_buf_sync bad = { .flags = ~(__u64)0 };
    return ioctl(fd, DMA_BUF_IOCTL_SYNC, &bad) != 0 && errno == EINVAL;
}

enum het_status het_backing_dmabuf_sync(int fd, unsigned flags, bool end, het_error *err)
{
    struct dma_buf_sync s = {
        .flags = (flags & DMA_BUF_SYNC_RW) | (end ? DMA_BUF_SYNC_END : DMA_BUF_SYNC_START),
    };
    int r;
    do {
        r = ioctl(fd, DMA_BUF_IOCTL_SYNC, &s);
    } while (r != 0 && (errno == EINTR || errno == EAGAIN));
    if (r != 0)
        return het_error_set(err, HET_ERR_DEVICE, "DMA_BUF_IOCTL_SYNC(%s, %s%s) on fd %d: %s",
                             end ? "END" : "START", (flags & DMA_BUF_SYNC_READ) ? "R" : "",
                             (flags & DMA_BUF_SYNC_WRITE) ? "W" : "", fd, strerror(errno));
    return HET_OK;
}
