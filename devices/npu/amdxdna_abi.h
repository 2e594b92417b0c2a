/*
 * amdxdna_abi.h — het's own statement of the amdxdna kernel ABI
 * (Linux include/uapi/drm/amdxdna_accel.h, drivers/accel/amdxdna), facts
 * only: the ioctl numbers, the argument structs with their sizes and
 * offsets, the BO types, and the ERT command packet the firmware reads.
 * No XRT; the structs are ours, laid out to match the kernel byte for byte,
 * and the static assertions below pin every size, offset and ioctl number
 * so a mismatch cannot compile.
 *
 * Command packet (an AMDXDNA_BO_CMD buffer):
 *   u32 header: state [3:0], extra CU masks [11:10], payload word count
 *               [22:12], opcode [27:23];
 *   u32 cu_mask (one word, bit i = CU i; plus extra masks if any);
 *   for opcode ERT_START_NPU (20): u64 instruction-buffer address, u32 its
 *   size in bytes, u32 property count (0), then the kernel's arguments.
 * Without the instruction buffer the firmware reports COMPLETED and the AIE
 * array runs nothing (the design notes' "silent no-op").
 */
#ifndef HET_NPU_AMDXDNA_ABI_H
#define HET_NPU_AMDXDNA_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define XDNA_DRIVER_NAME  "amdxdna"
#define XDNA_DRM_BASE     0x40           /* DRM_COMMAND_BASE */
#define XDNA_IOWR(nr, T)  _IOWR('d', XDNA_DRM_BASE + (nr), T)

enum xdna_ioctl_nr {
    XDNA_NR_CREATE_HWCTX  = 0,
    XDNA_NR_DESTROY_HWCTX = 1,
    XDNA_NR_CONFIG_HWCTX  = 2,
    XDNA_NR_CREATE_BO     = 3,
    XDNA_NR_GET_BO_INFO   = 4,
    XDNA_NR_SYNC_BO       = 5,
    XDNA_NR_EXEC_CMD      = 6,
    XDNA_NR_GET_INFO      = 7,
    XDNA_NR_SET_STATE     = 8,
};

struct xdna_qos_info {
    uint32_t gops, fps, dma_bandwidth, latency, frame_exec_time, priority;
};

struct xdna_create_hwctx {
    uint64_t ext, ext_flags;      /* MBZ                                   */
    uint64_t qos_p;               /* user pointer to struct xdna_qos_info   */
    uint32_t umq_bo, log_buf_bo;
    uint32_t max_opc, num_tiles, mem_size;
    uint32_t umq_doorbell;        /* out                                    */
    uint32_t handle;              /* out                                    */
    uint32_t syncobj_handle;      /* out: timeline syncobj, point = seq     */
};

struct xdna_destroy_hwctx {
    uint32_t handle, pad;
};

struct xdna_cu_config {
    uint32_t cu_bo;               /* AMDXDNA_BO_DEV holding the PDI          */
    uint8_t  cu_func;
    uint8_t  pad[3];
};

struct xdna_hwctx_config_cu {
    uint16_t num_cus;
    uint16_t pad[3];
    struct xdna_cu_config cu_configs[];
};

enum xdna_config_param {
    XDNA_HWCTX_CONFIG_CU = 0,
    XDNA_HWCTX_ASSIGN_DBG_BUF = 1,
    XDNA_HWCTX_REMOVE_DBG_BUF = 2,
};

struct xdna_config_hwctx {
    uint32_t handle, param_type;
    uint64_t param_val;           /* pointer to the parameter (<= 4 KiB)     */
    uint32_t param_val_size, pad;
};

enum xdna_bo_type {
    XDNA_BO_INVALID  = 0,
    XDNA_BO_SHARE    = 1,         /* a.k.a. SHMEM: host pages, mmap-able      */
    XDNA_BO_DEV_HEAP = 2,         /* the per-process device heap (64 MiB)     */
    XDNA_BO_DEV      = 3,         /* carved from the heap; cannot be exported */
    XDNA_BO_CMD      = 4,         /* command packets                          */
};

struct xdna_create_bo {
    uint64_t flags;               /* MBZ                                     */
    uint64_t vaddr;               /* 0, or pointer to struct xdna_va_tbl      */
    uint64_t size;
    uint32_t type;                /* enum xdna_bo_type                       */
    uint32_t handle;              /* out                                     */
};

/* For SHARE BOs over existing memory: a dma-buf fd (num_entries 0) or user
 * pages (newer kernels, amdxdna_ubuf). */
struct xdna_va_entry {
    uint64_t vaddr, len;
};
struct xdna_va_tbl {
    int32_t  dmabuf_fd;
    uint32_t num_entries;
    struct xdna_va_entry va_entries[];
};

struct xdna_get_bo_info {
    uint64_t ext, ext_flags;      /* MBZ                                     */
    uint32_t handle, pad;
    uint64_t map_offset;          /* out: fake offset for mmap on the DRM fd  */
    uint64_t vaddr;               /* out                                      */
    uint64_t xdna_addr;           /* out: address the NPU uses                */
};

#define XDNA_SYNC_TO_DEVICE   0u
#define XDNA_SYNC_FROM_DEVICE 1u
struct xdna_sync_bo {
    uint32_t handle, direction;
    uint64_t offset, size;
};

enum xdna_cmd_type { XDNA_CMD_SUBMIT_EXEC_BUF = 0 };

struct xdna_exec_cmd {
    uint64_t ext, ext_flags;      /* MBZ                                     */
    uint32_t hwctx, type;
    uint64_t cmd_handles;         /* the command BO handle (count 1)          */
    uint64_t args;                /* pointer to u32 argument BO handles       */
    uint32_t cmd_count, arg_count;
    uint64_t seq;                 /* out: timeline point of the hwctx syncobj */
};

struct xdna_query_aie_version {
    uint32_t major, minor;
};

struct xdna_query_tile_metadata {
    uint16_t row_count, row_start, dma_channel_count, lock_count, event_reg_count;
    uint16_t pad[3];
};

struct xdna_query_aie_metadata {
    uint32_t col_size;
    uint16_t cols, rows;
    struct xdna_query_aie_version   version;
    struct xdna_query_tile_metadata core, mem, shim;
};

struct xdna_query_firmware_version {
    uint32_t major, minor, patch, build;
};

enum xdna_get_param {
    XDNA_QUERY_AIE_STATUS        = 0,
    XDNA_QUERY_AIE_METADATA      = 1,
    XDNA_QUERY_AIE_VERSION       = 2,
    XDNA_QUERY_CLOCK_METADATA    = 3,
    XDNA_QUERY_SENSORS           = 4,
    XDNA_QUERY_HW_CONTEXTS       = 5,
    XDNA_QUERY_FIRMWARE_VERSION  = 8,
    XDNA_GET_POWER_MODE          = 9,
};

struct xdna_get_info {
    uint32_t param;               /* enum xdna_get_param                      */
    uint32_t buffer_size;         /* in/out                                   */
    uint64_t buffer;              /* pointer to the query struct              */
};

struct xdna_set_state {
    uint32_t param, buffer_size;
    uint64_t buffer;
};

#define XDNA_IOCTL_CREATE_HWCTX  XDNA_IOWR(XDNA_NR_CREATE_HWCTX,  struct xdna_create_hwctx)
#define XDNA_IOCTL_DESTROY_HWCTX XDNA_IOWR(XDNA_NR_DESTROY_HWCTX, struct xdna_destroy_hwctx)
#define XDNA_IOCTL_CONFIG_HWCTX  XDNA_IOWR(XDNA_NR_CONFIG_HWCTX,  struct xdna_config_hwctx)
#define XDNA_IOCTL_CREATE_BO     XDNA_IOWR(XDNA_NR_CREATE_BO,     struct xdna_create_bo)
#define XDNA_IOCTL_GET_BO_INFO   XDNA_IOWR(XDNA_NR_GET_BO_INFO,   struct xdna_get_bo_info)
#define XDNA_IOCTL_SYNC_BO       XDNA_IOWR(XDNA_NR_SYNC_BO,       struct xdna_sync_bo)
#define XDNA_IOCTL_EXEC_CMD      XDNA_IOWR(XDNA_NR_EXEC_CMD,      struct xdna_exec_cmd)
#define XDNA_IOCTL_GET_INFO      XDNA_IOWR(XDNA_NR_GET_INFO,      struct xdna_get_info)
#define XDNA_IOCTL_SET_STATE     XDNA_IOWR(XDNA_NR_SET_STATE,     struct xdna_set_state)

/* ---- ERT command packet ---- */
enum xdna_ert_opcode {
    XDNA_ERT_START_CU  = 0,
    XDNA_ERT_CMD_CHAIN = 19,
    XDNA_ERT_START_NPU = 20,
};

enum xdna_ert_state {
    XDNA_ERT_STATE_INVALID    = 0,
    XDNA_ERT_STATE_NEW        = 1,
    XDNA_ERT_STATE_QUEUED     = 2,
    XDNA_ERT_STATE_RUNNING    = 3,
    XDNA_ERT_STATE_COMPLETED  = 4,
    XDNA_ERT_STATE_ERROR      = 5,
    XDNA_ERT_STATE_ABORT      = 6,
    XDNA_ERT_STATE_SUBMITTED  = 7,
    XDNA_ERT_STATE_TIMEOUT    = 8,
    XDNA_ERT_STATE_NORESPONSE = 9,
};

#define XDNA_CMD_STATE_SHIFT   0
#define XDNA_CMD_STATE_MASK    0xFu
#define XDNA_CMD_EXTRA_SHIFT   10
#define XDNA_CMD_EXTRA_MASK    0x3u
#define XDNA_CMD_COUNT_SHIFT   12
#define XDNA_CMD_COUNT_MASK    0x7FFu
#define XDNA_CMD_OPCODE_SHIFT  23
#define XDNA_CMD_OPCODE_MASK   0x1Fu

static inline uint32_t xdna_cmd_header(uint32_t opcode, uint32_t count, uint32_t state)
{
    return ((state & XDNA_CMD_STATE_MASK) << XDNA_CMD_STATE_SHIFT) |
           ((count & XDNA_CMD_COUNT_MASK) << XDNA_CMD_COUNT_SHIFT) |
           ((opcode & XDNA_CMD_OPCODE_MASK) << XDNA_CMD_OPCODE_SHIFT);
}
static inline uint32_t xdna_cmd_state(uint32_t header)
{
    return (header >> XDNA_CMD_STATE_SHIFT) & XDNA_CMD_STATE_MASK;
}

/* Payload head of ERT_START_NPU (after the CU mask). */
struct xdna_cmd_start_npu {
    uint64_t buffer;              /* instruction buffer (NPU address)         */
    uint32_t buffer_size;         /* bytes                                    */
    uint32_t prop_count;          /* 0                                        */
};

/* ---- the layout, pinned ---- */
_Static_assert(sizeof(struct xdna_qos_info) == 24, "amdxdna_qos_info");
_Static_assert(sizeof(struct xdna_create_hwctx) == 56, "amdxdna_drm_create_hwctx");
_Static_assert(offsetof(struct xdna_create_hwctx, qos_p) == 16, "create_hwctx.qos_p");
_Static_assert(offsetof(struct xdna_create_hwctx, max_opc) == 32, "create_hwctx.max_opc");
_Static_assert(offsetof(struct xdna_create_hwctx, handle) == 48, "create_hwctx.handle");
_Static_assert(offsetof(struct xdna_create_hwctx, syncobj_handle) == 52, "create_hwctx.syncobj_handle");
_Static_assert(sizeof(struct xdna_destroy_hwctx) == 8, "amdxdna_drm_destroy_hwctx");
_Static_assert(sizeof(struct xdna_cu_config) == 8, "amdxdna_cu_config");
_Static_assert(sizeof(struct xdna_hwctx_config_cu) == 8, "amdxdna_hwctx_param_config_cu");
_Static_assert(sizeof(struct xdna_config_hwctx) == 24, "amdxdna_drm_config_hwctx");
_Static_assert(offsetof(struct xdna_config_hwctx, param_val) == 8, "config_hwctx.param_val");
_Static_assert(sizeof(struct xdna_create_bo) == 32, "amdxdna_drm_create_bo");
_Static_assert(offsetof(struct xdna_create_bo, type) == 24, "create_bo.type");
_Static_assert(sizeof(struct xdna_va_entry) == 16, "amdxdna_drm_va_entry");
_Static_assert(sizeof(struct xdna_va_tbl) == 8, "amdxdna_drm_va_tbl");
_Static_assert(sizeof(struct xdna_get_bo_info) == 48, "amdxdna_drm_get_bo_info");
_Static_assert(offsetof(struct xdna_get_bo_info, map_offset) == 24, "get_bo_info.map_offset");
_Static_assert(offsetof(struct xdna_get_bo_info, xdna_addr) == 40, "get_bo_info.xdna_addr");
_Static_assert(sizeof(struct xdna_sync_bo) == 24, "amdxdna_drm_sync_bo");
_Static_assert(sizeof(struct xdna_exec_cmd) == 56, "amdxdna_drm_exec_cmd");
_Static_assert(offsetof(struct xdna_exec_cmd, cmd_handles) == 24, "exec_cmd.cmd_handles");
_Static_assert(offsetof(struct xdna_exec_cmd, cmd_count) == 40, "exec_cmd.cmd_count");
_Static_assert(offsetof(struct xdna_exec_cmd, seq) == 48, "exec_cmd.seq");
_Static_assert(sizeof(struct xdna_query_aie_version) == 8, "amdxdna_drm_query_aie_version");
_Static_assert(sizeof(struct xdna_query_tile_metadata) == 16, "amdxdna_drm_query_aie_tile_metadata");
_Static_assert(sizeof(struct xdna_query_aie_metadata) == 64, "amdxdna_drm_query_aie_metadata");
_Static_assert(offsetof(struct xdna_query_aie_metadata, core) == 16, "aie_metadata.core");
_Static_assert(sizeof(struct xdna_query_firmware_version) == 16, "amdxdna_drm_query_firmware_version");
_Static_assert(sizeof(struct xdna_get_info) == 16, "amdxdna_drm_get_info");
_Static_assert(sizeof(struct xdna_set_state) == 16, "amdxdna_drm_set_state");
_Static_assert(sizeof(struct xdna_cmd_start_npu) == 16, "amdxdna_cmd_start_npu");
/* ioctl numbers: dir RW (3) << 30 | size << 16 | 'd' << 8 | 0x40 + nr */
_Static_assert(XDNA_IOCTL_CREATE_HWCTX == 0xC0386440u, "DRM_IOCTL_AMDXDNA_CREATE_HWCTX");
_Static_assert(XDNA_IOCTL_DESTROY_HWCTX == 0xC0086441u, "DRM_IOCTL_AMDXDNA_DESTROY_HWCTX");
_Static_assert(XDNA_IOCTL_CONFIG_HWCTX == 0xC0186442u, "DRM_IOCTL_AMDXDNA_CONFIG_HWCTX");
_Static_assert(XDNA_IOCTL_CREATE_BO == 0xC0206443u, "DRM_IOCTL_AMDXDNA_CREATE_BO");
_Static_assert(XDNA_IOCTL_GET_BO_INFO == 0xC0306444u, "DRM_IOCTL_AMDXDNA_GET_BO_INFO");
_Static_assert(XDNA_IOCTL_SYNC_BO == 0xC0186445u, "DRM_IOCTL_AMDXDNA_SYNC_BO");
_Static_assert(XDNA_IOCTL_EXEC_CMD == 0xC0386446u, "DRM_IOCTL_AMDXDNA_EXEC_CMD");
_Static_assert(XDNA_IOCTL_GET_INFO == 0xC0106447u, "DRM_IOCTL_AMDXDNA_GET_INFO");
_Static_assert(XDNA_IOCTL_SET_STATE == 0xC0106448u, "DRM_IOCTL_AMDXDNA_SET_STATE");

#endif /* HET_NPU_AMDXDNA_ABI_H */
