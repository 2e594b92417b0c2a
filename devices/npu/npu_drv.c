/*
 * npu_drv.c — the amdxdna driver calls (see npu_drv.h), over our own ABI
 * header and libdrm. Not executed on the development machine (no NPU);
 * written against the kernel's uAPI and driver sources, and exercised by
 * tests/test_npu_hw.c where /dev/accel/accel0 is amdxdna.
 */
#include "devices/npu/npu_drv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>

static enum het_status errno_status(int e)
{
    switch (e) {
    case ENOMEM:           return HET_ERR_NOMEM;
    case ETIME:
    case ETIMEDOUT:        return HET_ERR_TIMEOUT;
    case ENODEV:
    case EIO:
    case ESHUTDOWN:        return HET_ERR_DEVICE_LOST;
    case EINVAL:
    case EOPNOTSUPP:       return HET_ERR_DEVICE;
    default:               return HET_ERR_DEVICE;
    }
}

static enum het_status xioctl(struct xdna_dev *d, unsigned long req, void *arg, const char *what, het_error *err)
{
    if (drmIoctl(d->fd, req, arg) == 0) return HET_OK;
    const int e = errno;
    return het_error_set(err, errno_status(e), "amdxdna %s: %s: %s", d->node, what, strerror(e));
}

/* ---- device ------------------------------------------------------------------ */

static bool driver_is_amdxdna(int fd, struct xdna_dev *d)
{
    drmVersionPtr v = drmGetVersion(fd);
    if (!v) return false;
    bool ok = v->name && strcmp(v->name, XDNA_DRIVER_NAME) == 0;
    if (d) {
        snprintf(d->driver, sizeof d->driver, "%s", v->name ? v->name : "?");
        d->drv_major = v->version_major;
        d->drv_minor = v->version_minor;
        d->drv_patch = v->version_patchlevel;
    }
    drmFreeVersion(v);
    return ok;
}

bool xdna_present(char *why, size_t cap)
{
    const char *node = "/dev/accel/accel0";
    int fd = open(node, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "%s: %s", node, strerror(errno));
        return false;
    }
    struct xdna_dev d = { .fd = fd };
    bool ok = driver_is_amdxdna(fd, &d);
    if (!ok) snprintf(why, cap, "%s: driver is '%s', not amdxdna", node, d.driver[0] ? d.driver : "unknown");
    close(fd);
    return ok;
}

enum het_status xdna_open(struct xdna_dev *d, const char *node, het_error *err)
{
    memset(d, 0, sizeof *d);
    d->fd = -1;
    char seen[256] = "";
    for (int i = 0; i < 16; i++) {
        char path[64];
        if (node) snprintf(path, sizeof path, "%s", node);
        else snprintf(path, sizeof path, "/dev/accel/accel%d", i);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            if (node || i == 0) snprintf(seen, sizeof seen, "%s: %s", path, strerror(errno));
            if (node) break;
            continue;
        }
        if (driver_is_amdxdna(fd, d)) {
            d->fd = fd;
            snprintf(d->node, sizeof d->node, "%s", path);
            return HET_OK;
        }
        snprintf(seen, sizeof seen, "%s: driver '%s' is not amdxdna", path, d->driver);
        close(fd);
        if (node) break;
    }
    return het_error_set(err, HET_ERR_NO_DEVICE, "npu: no amdxdna device (%s)", seen[0] ? seen : "nothing found");
}

void xdna_close(struct xdna_dev *d)
{
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

static enum het_status get_info(struct xdna_dev *d, uint32_t param, void *buf, uint32_t size, const char *what,
                                het_error *err)
{
    struct xdna_get_info gi = { .param = param, .buffer_size = size, .buffer = (uint64_t)(uintptr_t)buf };
    return xioctl(d, XDNA_IOCTL_GET_INFO, &gi, what, err);
}

enum het_status xdna_query(struct xdna_dev *d, het_error *err)
{
    enum het_status st = get_info(d, XDNA_QUERY_AIE_METADATA, &d->meta, sizeof d->meta, "GET_INFO(AIE_METADATA)", err);
    if (st == HET_OK) st = get_info(d, XDNA_QUERY_AIE_VERSION, &d->aie, sizeof d->aie, "GET_INFO(AIE_VERSION)", err);
    if (st == HET_OK)
        st = get_info(d, XDNA_QUERY_FIRMWARE_VERSION, &d->fw, sizeof d->fw, "GET_INFO(FIRMWARE_VERSION)", err);
    return st;
}

/* ---- buffer objects ------------------------------------------------------------- */

enum het_status xdna_bo_info(struct xdna_dev *d, struct xdna_bo *bo, het_error *err)
{
    struct xdna_get_bo_info gi = { .handle = bo->handle };
    enum het_status st = xioctl(d, XDNA_IOCTL_GET_BO_INFO, &gi, "GET_BO_INFO", err);
    if (st != HET_OK) return st;
    bo->xdna_addr = gi.xdna_addr;
    if (!bo->map && gi.map_offset != ~(uint64_t)0 && bo->type != XDNA_BO_DEV) {
        void *m = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, (off_t)gi.map_offset);
        if (m == MAP_FAILED)
            return het_error_set(err, HET_ERR_DEVICE, "amdxdna %s: mmap BO %u (%zu bytes): %s", d->node, bo->handle,
                                 bo->size, strerror(errno));
        bo->map = m;
        bo->map_size = bo->size;
    }
    return HET_OK;
}

static void gem_close(struct xdna_dev *d, uint32_t handle)
{
    struct drm_gem_close gc = { .handle = handle };
    drmIoctl(d->fd, DRM_IOCTL_GEM_CLOSE, &gc);
}

enum het_status xdna_bo_create(struct xdna_dev *d, enum xdna_bo_type type, size_t size, struct xdna_bo *bo,
                               het_error *err)
{
    memset(bo, 0, sizeof *bo);
    struct xdna_create_bo cb = { .size = size, .type = (uint32_t)type };
    enum het_status st = xioctl(d, XDNA_IOCTL_CREATE_BO, &cb, "CREATE_BO", err);
    if (st != HET_OK) return st;
    bo->handle = cb.handle;
    bo->type = (uint32_t)type;
    bo->size = size;
    st = xdna_bo_info(d, bo, err);
    if (st != HET_OK) xdna_bo_free(d, bo);
    return st;
}

enum het_status xdna_bo_import(struct xdna_dev *d, int dmabuf_fd, size_t size, struct xdna_bo *bo, het_error *err)
{
    memset(bo, 0, sizeof *bo);
    bo->type = XDNA_BO_SHARE;
    bo->size = size;
    uint32_t h = 0;
    if (drmPrimeFDToHandle(d->fd, dmabuf_fd, &h) != 0) {
        /* older or newer kernels: the va-table form of CREATE_BO */
        struct xdna_va_tbl tbl = { .dmabuf_fd = dmabuf_fd, .num_entries = 0 };
        struct xdna_create_bo cb = { .vaddr = (uint64_t)(uintptr_t)&tbl, .size = size, .type = XDNA_BO_SHARE };
        enum het_status st = xioctl(d, XDNA_IOCTL_CREATE_BO, &cb, "import dma-buf (PRIME and CREATE_BO)", err);
        if (st != HET_OK) return st;
        h = cb.handle;
    }
    bo->handle = h;
    enum het_status st = xdna_bo_info(d, bo, err);
    if (st != HET_OK) xdna_bo_free(d, bo);
    return st;
}

enum het_status xdna_bo_userptr(struct xdna_dev *d, void *p, size_t size, struct xdna_bo *bo, het_error *err)
{
    memset(bo, 0, sizeof *bo);
    if (((uintptr_t)p & 4095) || (size & 4095) || !size)
        return het_error_set(err, HET_ERR_INVALID, "amdxdna: user memory %p + %zu is not page aligned", p, size);
    /* struct xdna_va_tbl followed by its one entry */
    uint64_t tbl[(sizeof(struct xdna_va_tbl) + sizeof(struct xdna_va_entry)) / 8];
    const struct xdna_va_tbl head = { .dmabuf_fd = -1, .num_entries = 1 };
    const struct xdna_va_entry ent = { .vaddr = (uint64_t)(uintptr_t)p, .len = size };
    memcpy(tbl, &head, sizeof head);
    memcpy((uint8_t *)tbl + sizeof head, &ent, sizeof ent);
    struct xdna_create_bo cb = { .vaddr = (uint64_t)(uintptr_t)tbl, .size = size, .type = XDNA_BO_SHARE };
    enum het_status st = xioctl(d, XDNA_IOCTL_CREATE_BO, &cb, "CREATE_BO(user pages)", err);
    if (st != HET_OK) return st;
    bo->handle = cb.handle;
    bo->type = XDNA_BO_SHARE;
    bo->size = size;
    struct xdna_get_bo_info gi = { .handle = bo->handle };
    st = xioctl(d, XDNA_IOCTL_GET_BO_INFO, &gi, "GET_BO_INFO(user pages)", err);
    if (st != HET_OK) {
        xdna_bo_free(d, bo);
        return st;
    }
    bo->xdna_addr = gi.xdna_addr;    /* the caller's own mapping is the host view */
    return HET_OK;
}

enum het_status xdna_bo_sync(struct xdna_dev *d, const struct xdna_bo *bo, uint32_t dir, uint64_t off, uint64_t size,
                             het_error *err)
{
    struct xdna_sync_bo sb = { .handle = bo->handle, .direction = dir, .offset = off, .size = size };
    return xioctl(d, XDNA_IOCTL_SYNC_BO, &sb, dir == XDNA_SYNC_TO_DEVICE ? "SYNC_BO(to device)" : "SYNC_BO(from device)",
                  err);
}

enum het_status xdna_bo_export(struct xdna_dev *d, const struct xdna_bo *bo, int *fd, het_error *err)
{
    if (drmPrimeHandleToFD(d->fd, bo->handle, DRM_CLOEXEC | DRM_RDWR, fd) == 0) return HET_OK;
    return het_error_set(err, HET_ERR_DEVICE, "amdxdna %s: export BO %u as dma-buf: %s", d->node, bo->handle,
                         strerror(errno));
}

void xdna_bo_free(struct xdna_dev *d, struct xdna_bo *bo)
{
    if (bo->map) munmap(bo->map, bo->map_size);
    if (bo->handle) gem_close(d, bo->handle);
    memset(bo, 0, sizeof *bo);
}

/* ---- hardware contexts --------------------------------------------------------- */

enum het_status xdna_hwctx_create(struct xdna_dev *d, uint32_t num_tiles, uint32_t max_opc, struct xdna_hwctx *h,
                                  het_error *err)
{
    memset(h, 0, sizeof *h);
    struct xdna_qos_info qos = {0};
    struct xdna_create_hwctx ch = { .qos_p = (uint64_t)(uintptr_t)&qos, .num_tiles = num_tiles, .max_opc = max_opc };
    enum het_status st = xioctl(d, XDNA_IOCTL_CREATE_HWCTX, &ch, "CREATE_HWCTX", err);
    if (st != HET_OK) return st;
    h->handle = ch.handle;
    h->syncobj = ch.syncobj_handle;
    return HET_OK;
}

enum het_status xdna_hwctx_config_cu(struct xdna_dev *d, const struct xdna_hwctx *h, uint32_t pdi_bo, uint8_t func,
                                     het_error *err)
{
    /* struct xdna_hwctx_config_cu followed by its one CU */
    uint64_t cfg[(sizeof(struct xdna_hwctx_config_cu) + sizeof(struct xdna_cu_config)) / 8];
    const struct xdna_hwctx_config_cu head = { .num_cus = 1 };
    const struct xdna_cu_config cu = { .cu_bo = pdi_bo, .cu_func = func };
    memcpy(cfg, &head, sizeof head);
    memcpy((uint8_t *)cfg + sizeof head, &cu, sizeof cu);
    struct xdna_config_hwctx ch = { .handle = h->handle, .param_type = XDNA_HWCTX_CONFIG_CU,
                                    .param_val = (uint64_t)(uintptr_t)cfg, .param_val_size = sizeof cfg };
    return xioctl(d, XDNA_IOCTL_CONFIG_HWCTX, &ch, "CONFIG_HWCTX(CU)", err);
}

void xdna_hwctx_destroy(struct xdna_dev *d, struct xdna_hwctx *h)
{
    if (h->handle) {
        struct xdna_destroy_hwctx dh = { .handle = h->handle };
        drmIoctl(d->fd, XDNA_IOCTL_DESTROY_HWCTX, &dh);
    }
    if (h->syncobj) drmSyncobjDestroy(d->fd, h->syncobj);
    memset(h, 0, sizeof *h);
}

/* ---- commands ------------------------------------------------------------------ */

enum het_status xdna_exec(struct xdna_dev *d, const struct xdna_hwctx *h, uint32_t cmd_bo, const uint32_t *arg_bos,
                          uint32_t n_args, uint64_t *seq, het_error *err)
{
    struct xdna_exec_cmd ec = { .hwctx = h->handle, .type = XDNA_CMD_SUBMIT_EXEC_BUF, .cmd_handles = cmd_bo,
                                .args = (uint64_t)(uintptr_t)arg_bos, .cmd_count = 1, .arg_count = n_args };
    enum het_status st = xioctl(d, XDNA_IOCTL_EXEC_CMD, &ec, "EXEC_CMD", err);
    if (st == HET_OK) *seq = ec.seq;
    return st;
}

enum het_status xdna_wait(struct xdna_dev *d, const struct xdna_hwctx *h, uint64_t seq, int timeout_ms, het_error *err)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t deadline = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + (int64_t)timeout_ms * 1000000;
    uint32_t handle = h->syncobj;
    uint64_t point = seq;
    int rc = drmSyncobjTimelineWait(d->fd, &handle, &point, 1, deadline,
                                    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL);
    if (rc == 0) return HET_OK;
    const int e = errno;
    if (e == ETIME || e == ETIMEDOUT)
        return het_error_set(err, HET_ERR_TIMEOUT, "amdxdna %s: command %llu did not complete in %d ms", d->node,
                             (unsigned long long)seq, timeout_ms);
    return het_error_set(err, errno_status(e), "amdxdna %s: wait for command %llu: %s", d->node,
                         (unsigned long long)seq, strerror(e));
}
