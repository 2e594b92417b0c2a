/*
 * backing_memfd.c — backing 4: a plain sealed memfd.
 *
 * Always available on Linux >= 3.17. It is not a dma-buf: devices import it
 * as host memory (Vulkan VK_EXT_external_memory_host, an NPU userptr BO).
 * Sized with ftruncate only, so pages materialise on first touch; sealed
 * against shrinking and growing so no importer can ever see the pages vanish.
 */
#include "memory/backing.h"

#include <fcntl.h>

static enum het_status memfd_open(struct het_backing *b, const struct het_pool_params *p, size_t size,
                                  het_error *err)
{
    int fd;
    enum het_status st = het_backing_memfd_create(p->name ? p->name : "het-pool", size,
                                                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &fd, err);
    if (st != HET_OK) return st;
    b->map_fd = fd;
    b->dmabuf_fd = -1;
    b->size = size;
    return HET_OK;
}

const struct het_backing_ops het_backing_memfd_ops = {
    .kind      = HET_POOL_BACKING_MEMFD,
    .name      = "memfd (not a dma-buf)",
    .is_dmabuf = false,
    .open      = memfd_open,
    .map       = het_backing_map_shared,
    .close     = het_backing_close_fds,
};
