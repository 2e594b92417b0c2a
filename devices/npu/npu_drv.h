/*
 * npu_drv.h — thin, checked calls into the amdxdna driver through libdrm
 * (internal): finding the device, queries, buffer objects, hardware
 * contexts, command submission and waiting. Every call returns het_status
 * with one line naming the ioctl and errno; nothing here knows about
 * kernels or weights (npu_hw.c does).
 */
#ifndef HET_NPU_DRV_H
#define HET_NPU_DRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/npu/amdxdna_abi.h"
#include "het/status.h"

struct xdna_dev {
    int      fd;
    char     node[64];
    char     driver[32];
    int      drv_major, drv_minor, drv_patch;
    struct xdna_query_aie_metadata     meta;
    struct xdna_query_firmware_version fw;
    struct xdna_query_aie_version      aie;
};

struct xdna_bo {
    uint32_t handle;          /* 0: none                                     */
    uint32_t type;            /* enum xdna_bo_type                           */
    size_t   size;
    uint64_t xdna_addr;       /* what the NPU uses                           */
    void    *map;             /* host mapping (ours), or NULL                */
    size_t   map_size;
};

struct xdna_hwctx {
    uint32_t handle;          /* 0: none                                     */
    uint32_t syncobj;         /* timeline syncobj the driver signals per seq  */
};

/* Open node, or scan /dev/accel/accel0..15 for driver "amdxdna" when node is
 * NULL. HET_ERR_NO_DEVICE (saying what was found) when there is none. */
enum het_status xdna_open(struct xdna_dev *d, const char *node, het_error *err);
void            xdna_close(struct xdna_dev *d);
/* Whether /dev/accel/accel0 exists and its driver is amdxdna (for tests). */
bool            xdna_present(char *why, size_t cap);

/* AIE metadata, AIE version, firmware version (DRM_IOCTL_AMDXDNA_GET_INFO). */
enum het_status xdna_query(struct xdna_dev *d, het_error *err);

/* New BO of a type; SHARE, CMD and DEV_HEAP BOs are mapped (bo->map). */
enum het_status xdna_bo_create(struct xdna_dev *d, enum xdna_bo_type type, size_t size, struct xdna_bo *bo,
                               het_error *err);
/* A BO over a dma-buf (drmPrimeFDToHandle, else CREATE_BO with a va table). */
enum het_status xdna_bo_import(struct xdna_dev *d, int dmabuf_fd, size_t size, struct xdna_bo *bo, het_error *err);
/* A BO over page-aligned user memory (CREATE_BO SHARE with one va entry). */
enum het_status xdna_bo_userptr(struct xdna_dev *d, void *p, size_t size, struct xdna_bo *bo, het_error *err);
enum het_status xdna_bo_info(struct xdna_dev *d, struct xdna_bo *bo, het_error *err);
enum het_status xdna_bo_sync(struct xdna_dev *d, const struct xdna_bo *bo, uint32_t dir, uint64_t off, uint64_t size,
                             het_error *err);
enum het_status xdna_bo_export(struct xdna_dev *d, const struct xdna_bo *bo, int *fd, het_error *err);
void            xdna_bo_free(struct xdna_dev *d, struct xdna_bo *bo);   /* none is a no-op */

enum het_status xdna_hwctx_create(struct xdna_dev *d, uint32_t num_tiles, uint32_t max_opc, struct xdna_hwctx *h,
                                  het_error *err);
enum het_status xdna_hwctx_config_cu(struct xdna_dev *d, const struct xdna_hwctx *h, uint32_t pdi_bo, uint8_t func,
                                     het_error *err);
void            xdna_hwctx_destroy(struct xdna_dev *d, struct xdna_hwctx *h);

/* Submit the command BO with its argument BOs; *seq is the completion point. */
enum het_status xdna_exec(struct xdna_dev *d, const struct xdna_hwctx *h, uint32_t cmd_bo, const uint32_t *arg_bos,
                          uint32_t n_args, uint64_t *seq, het_error *err);
/* Wait for seq; HET_ERR_TIMEOUT after timeout_ms. */
enum het_status xdna_wait(struct xdna_dev *d, const struct xdna_hwctx *h, uint64_t seq, int timeout_ms,
                          het_error *err);

#endif /* HET_NPU_DRV_H */
