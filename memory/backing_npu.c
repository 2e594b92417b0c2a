/*
 * backing_npu.c — backing 1: a buffer the NPU owns, exported as a dma-buf.
 *
 * The pool does not talk to amdxdna itself: the NPU backend, when it finds an
 * amdxdna device, fills params.npu with a callback that allocates a BO of the
 * pool's size and exports it as a dma-buf. This file checks what comes back
 * (a dma-buf, at least as large as asked), maps it like any other backing and
 * tells the backend (release) once the pool has let go of it, so that the
 * backend's BO handle outlives every mapping of the buffer.
 */
#include "memory/backing.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Give the buffer back to a provider after the fd has been closed. */
static void npu_release(const struct het_pool_npu_provider *npu)
{
    if (npu->release) npu->release(npu->ctx);
}

static enum het_status npu_open(struct het_backing *b, const struct het_pool_params *p, size_t size,
                                het_error *err)
{
    if (!p->npu.export_dmabuf)
        return het_error_set(err, HET_ERR_NO_DEVICE, "no NPU buffer provider (no amdxdna device, or the NPU "
                             "backend is not initialised)");
    het_error perr = { .status = HET_OK, .msg = "provider gave no reason" };
    int fd = p->npu.export_dmabuf(p->npu.ctx, size, &perr);
    if (fd < 0)
        return het_error_set(err, perr.status != HET_OK ? perr.status : HET_ERR_DEVICE,
                             "export refused: %s", perr.msg);
    if (!het_backing_fd_is_dmabuf(fd)) {
        close(fd);
        npu_release(&p->npu);
        return het_error_set(err, HET_ERR_DEVICE, "provider returned fd %d, which is not a dma-buf", fd);
    }
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || (size_t)end < size) {
        int e = errno;
        close(fd);
        npu_release(&p->npu);
        if (end < 0) return het_error_set(err, HET_ERR_DEVICE, "dma-buf fd %d: lseek: %s", fd, strerror(e));
        return het_error_set(err, HET_ERR_DEVICE, "dma-buf has %lld bytes, pool needs %zu", (long long)end, size);
    }
    b->map_fd = b->dmabuf_fd = fd;
    b->size = size;
    b->npu = p->npu;
    return HET_OK;
}

static void npu_close(struct het_backing *b)
{
    struct het_pool_npu_provider npu = b->npu;
    het_backing_close_fds(b);
    memset(&b->npu, 0, sizeof b->npu);
    npu_release(&npu);
}

const struct het_backing_ops het_backing_npu_ops = {
    .kind      = HET_POOL_BACKING_NPU,
    .name      = "amdxdna bo",
    .is_dmabuf = true,
    .open      = npu_open,
    .map       = het_backing_map_shared,
    .close     = npu_close,
};
