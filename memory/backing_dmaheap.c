/*
 * backing_dmaheap.c — backing 2: a dma-buf from the system DMA heap.
 *
 * DMA_HEAP_IOCTL_ALLOC on /dev/dma_heap/system returns a dma-buf of pages the
 * kernel allocates at once (not lazily, unlike memfd), which any device
 * driver can import and the CPU can mmap. CPU access is bracketed with
 * DMA_BUF_IOCTL_SYNC, which does the cache maintenance for attached devices.
 */
#include "memory/backing.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static enum het_status dmaheap_open(struct het_backing *b, const struct het_pool_params *p, size_t size,
                                    het_error *err)
{
    const char *path = p->dma_heap_path ? p->dma_heap_path : "/dev/dma_heap/system";
    int heap = open(path, O_RDONLY | O_CLOEXEC);
    if (heap < 0) {
        int e = errno;
        return het_error_set(err, e == ENOENT ? HET_ERR_NO_DEVICE : HET_ERR_IO, "%s: %s", path, strerror(e));
    }
    struct dma_heap_allocation_data d = {
        .len = size,
        .fd_flags = O_RDWR | O_CLOEXEC,
        .heap_flags = 0,
    };
    if (ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &d) != 0) {
        int e = errno;
        close(heap);
        return het_error_set(err, e == ENOMEM ? HET_ERR_NOMEM : HET_ERR_DEVICE,
                             "%s: DMA_HEAP_IOCTL_ALLOC(%zu bytes): %s", path, size, strerror(e));
    }
    close(heap);
    /* Name it for /sys/kernel/debug/dma_buf/bufinfo; failure is harmless. */
    (void)ioctl((int)d.fd, DMA_BUF_SET_NAME, p->name ? p->name : "het-pool");
    b->map_fd = b->dmabuf_fd = (int)d.fd;
    b->size = size;
    return HET_OK;
}

const struct het_backing_ops het_backing_dmaheap_ops = {
    .kind      = HET_POOL_BACKING_DMAHEAP,
    .name      = "dma-heap system",
    .is_dmabuf = true,
    .open      = dmaheap_open,
    .map       = het_backing_map_shared,
    .close     = het_backing_close_fds,
};
