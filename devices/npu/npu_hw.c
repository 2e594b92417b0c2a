/*
 * npu_hw.c — the amdxdna executor behind the NPU device: the device heap,
 * kernels from the kernel pack loaded into a hardware context when the plan
 * first needs them (switching costs milliseconds and is counted), weights
 * reachable through the imported pool dma-buf or user-page BOs, command
 * packets with the instruction buffer, waiting with a timeout, and the
 * first-use self-check of every kernel.
 *
 * Self-check: the first call of each kernel runs with its output pre-filled
 * with a sentinel NaN pattern; afterwards every output must have been
 * written and must match the emulator (the contract in npu_kernel.h) on the
 * same inputs. A command that reports COMPLETED without writing (the known
 * failure when the instruction buffer is missing) is therefore an error,
 * as are timeouts and lost devices: all of them mark the device unusable so
 * supports_op turns false and the scheduler falls back.
 *
 * Activations: the host quantises with the activation group of the kernel
 * it runs (the pack states it per kernel, het_npu_params.act_group selects
 * it), so the act buffer (scales [Mpad][K/act_group], int8 values, group
 * sums) is what that kernel expects; an "act_group" argument word passes
 * the group to kernels that take it at run time.
 *
 * Nothing here has run on hardware (see devices/npu/README.md).
 */
#include "devices/npu/npu_drv.h"
#include "devices/npu/npu_internal.h"
#include "devices/npu/npu_manifest.h"

#include "sched/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HEAP_BYTES   ((size_t)64 << 20)   /* one device heap per process */
#define CMD_BYTES    4096u
#define SENTINEL     0x7FC0DEADu          /* a quiet NaN no kernel produces */

struct hw_kernel {
    struct npu_kbin   bin;
    bool              loaded;     /* bin read, PDI and instructions in the heap */
    bool              checked;    /* first-use self-check passed                */
    struct xdna_bo    pdi_bo, instr_bo;
};

/* What the command in flight needs for its wait and self-check. */
struct hw_pending {
    bool                   active, check;
    int                    kidx;
    struct het_npu_wdesc   d;
    const void            *host_plane;
    struct het_npu_actbuf  a;
    float                 *out;
    size_t                 ldo;
    uint64_t               out_off, out_bytes;
};

struct npu_hw {
    struct npu_ctx     *c;
    struct xdna_dev     dev;
    struct npu_kpack    pack;
    struct hw_kernel   *k;          /* parallel to pack.k                         */
    int                 cur;        /* kernel whose context is live, -1: none     */
    struct xdna_hwctx   ctx;
    struct xdna_bo      heap, cmd, act, out, stage[2], pool_bo, export_bo;
    struct xdna_bo     *wbos;       /* user-page BOs of resident weights          */
    int                 n_wbos;
    struct hw_pending   pend;
    bool                lost;
    int                 timeout_ms;
    double              switch_us_sum;
};


static enum het_status lose(struct npu_hw *hw, enum het_status st)
{
    if (st == HET_ERR_TIMEOUT || st == HET_ERR_DEVICE_LOST || st == HET_ERR_DEVICE) hw->lost = true;
    return st;
}

/* ---- open / close --------------------------------------------------------------- */

enum het_status npu_hw_open(struct npu_ctx *c, het_error *err)
{
    struct npu_hw *hw = calloc(1, sizeof *hw);
    if (!hw) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
    hw->c = c;
    hw->cur = -1;
    hw->dev.fd = -1;
    hw->timeout_ms = c->params.timeout_ms > 0 ? c->params.timeout_ms : 10000;
    c->hw = hw;
    enum het_status st = xdna_open(&hw->dev, NULL, err);
    if (st == HET_OK) st = xdna_query(&hw->dev, err);
    if (st != HET_OK) return st;
    if (!c->params.gen) het_npu_profile_default(hw->dev.meta.cols > 5 ? HET_NPU_XDNA2 : HET_NPU_XDNA1, &c->profile);
    c->profile.emulated = false;
    if (!c->kernel_pack[0])
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: %s found, but hardware mode needs a kernel pack "
                             "(HET_NPU_KERNELS=<dir with manifest.json>)", hw->dev.node);
    st = npu_kpack_load(c->kernel_pack, &hw->pack, err);
    if (st != HET_OK) return st;
    if (hw->pack.switch_us >= 0) c->profile.switch_us = hw->pack.switch_us;
    hw->k = calloc((size_t)hw->pack.n, sizeof *hw->k);
    if (!hw->k) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
    st = xdna_bo_create(&hw->dev, XDNA_BO_DEV_HEAP, HEAP_BYTES, &hw->heap, err);
    if (st == HET_OK) st = xdna_bo_create(&hw->dev, XDNA_BO_CMD, CMD_BYTES, &hw->cmd, err);
    if (st == HET_OK && (!hw->heap.map || !hw->cmd.map))
        st = het_error_set(err, HET_ERR_DEVICE, "npu: heap or command BO could not be mapped");
    return st;
}

void npu_hw_close(struct npu_hw *hw)
{
    if (!hw) return;
    if (hw->dev.fd >= 0) {
        xdna_hwctx_destroy(&hw->dev, &hw->ctx);
        for (int i = 0; hw->k && i < hw->pack.n; i++) {
            xdna_bo_free(&hw->dev, &hw->k[i].pdi_bo);
            xdna_bo_free(&hw->dev, &hw->k[i].instr_bo);
        }
        for (int i = 0; i < hw->n_wbos; i++) xdna_bo_free(&hw->dev, &hw->wbos[i]);
        struct xdna_bo *bos[] = { &hw->cmd, &hw->act, &hw->out, &hw->stage[0], &hw->stage[1], &hw->pool_bo,
                                  &hw->export_bo, &hw->heap };
        for (size_t i = 0; i < sizeof bos / sizeof bos[0]; i++) xdna_bo_free(&hw->dev, bos[i]);
        xdna_close(&hw->dev);
    }
    for (int i = 0; hw->k && i < hw->pack.n; i++) npu_kbin_free(&hw->k[i].bin);
    free(hw->k);
    free(hw->wbos);
    npu_kpack_free(&hw->pack);
    free(hw);
}

bool npu_hw_get_info(const struct npu_hw *hw, struct het_npu_hw_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->node, sizeof o->node, "%s", hw->dev.node);
    snprintf(o->driver, sizeof o->driver, "%s", hw->dev.driver);
    o->drv_major = hw->dev.drv_major;
    o->drv_minor = hw->dev.drv_minor;
    o->drv_patch = hw->dev.drv_patch;
    o->fw_major = hw->dev.fw.major;
    o->fw_minor = hw->dev.fw.minor;
    o->fw_patch = hw->dev.fw.patch;
    o->fw_build = hw->dev.fw.build;
    o->aie_major = hw->dev.aie.major;
    o->aie_minor = hw->dev.aie.minor;
    o->cols = hw->dev.meta.cols;
    o->rows = hw->dev.meta.rows;
    o->core_rows = hw->dev.meta.core.row_count;
    o->mem_rows = hw->dev.meta.mem.row_count;
    o->shim_rows = hw->dev.meta.shim.row_count;
    o->col_size = hw->dev.meta.col_size;
    return true;
}

bool npu_hw_usable(const struct npu_hw *hw) { return hw && !hw->lost; }

/* ---- kernels ------------------------------------------------------------------------ */

static int find_kernel(const struct npu_hw *hw, const struct het_npu_wdesc *d, int64_t M, enum het_npu_act act,
                       int64_t act_group)
{
    const struct npu_kernel_desc *k = npu_kpack_find(&hw->pack, d->fmt, act, act_group, d->K, d->Npad, M);
    return k ? (int)(k - hw->pack.k) : -1;
}

int64_t npu_hw_m_tile(const struct npu_hw *hw, const struct het_npu_wdesc *d, int64_t M, enum het_npu_act act,
                      int64_t act_group)
{
    const int i = find_kernel(hw, d, M, act, act_group);
    return i < 0 ? 0 : hw->pack.k[i].m_tile;
}

int64_t npu_hw_chunk_tiles(const struct npu_hw *hw, const struct het_npu_wdesc *d, int64_t M, enum het_npu_act act,
                           int64_t act_group, size_t slot_bytes)
{
    int64_t best = 0;
    for (int i = 0; i < hw->pack.n; i++) {
        const struct npu_kernel_desc *k = &hw->pack.k[i];
        if (k->wfmt != d->fmt || k->act != act || k->act_group != act_group || k->K != d->K || k->N > d->Npad ||
            d->Npad % k->N)
            continue;
        struct het_npu_wdesc sub;
        const int64_t ne[4] = { d->K, k->N, 1, 1 };
        if (het_npu_layout_plan(&sub, d->src_type, ne, NULL) != HET_OK || sub.total_bytes > slot_bytes) continue;
        if (k->N / HET_NPU_NTILE > best) best = k->N / HET_NPU_NTILE;
    }
    (void)M;
    return best;
}

/* Host address of a DEV BO (inside the mapped heap). */
static uint8_t *dev_bo_ptr(const struct npu_hw *hw, const struct xdna_bo *bo)
{
    return (uint8_t *)hw->heap.map + (bo->xdna_addr - hw->heap.xdna_addr);
}

static enum het_status heap_put(struct npu_hw *hw, const void *data, size_t size, struct xdna_bo *bo, het_error *err)
{
    enum het_status st = xdna_bo_create(&hw->dev, XDNA_BO_DEV, size, bo, err);
    if (st != HET_OK) return st;
    if (bo->xdna_addr < hw->heap.xdna_addr || bo->xdna_addr - hw->heap.xdna_addr + size > hw->heap.size)
        return het_error_set(err, HET_ERR_DEVICE, "npu: device BO at 0x%llx is outside the heap",
                             (unsigned long long)bo->xdna_addr);
    memcpy(dev_bo_ptr(hw, bo), data, size);
    return xdna_bo_sync(&hw->dev, &hw->heap, XDNA_SYNC_TO_DEVICE, bo->xdna_addr - hw->heap.xdna_addr, size, err);
}

/* Kernel i in the live hardware context (loading and switching as needed). */
static enum het_status use_kernel(struct npu_hw *hw, int i, het_error *err)
{
    if (hw->cur == i) return HET_OK;
    struct hw_kernel *k = &hw->k[i];
    const struct npu_kernel_desc *kd = &hw->pack.k[i];
    const double t0 = het_now_us();
    enum het_status st = HET_OK;
    if (!k->loaded) {
        st = npu_kbin_load(kd, &k->bin, err);
        if (st == HET_OK) st = heap_put(hw, k->bin.pdi, k->bin.pdi_size, &k->pdi_bo, err);
        if (st == HET_OK) st = heap_put(hw, k->bin.insts, k->bin.n_insts * 4, &k->instr_bo, err);
        if (st != HET_OK) return st;
        k->loaded = true;
    }
    xdna_hwctx_destroy(&hw->dev, &hw->ctx);
    hw->cur = -1;
    uint32_t cols = k->bin.column_width ? k->bin.column_width : hw->dev.meta.cols;
    uint32_t tiles = kd->tiles ? kd->tiles : cols * hw->dev.meta.core.row_count;
    st = xdna_hwctx_create(&hw->dev, tiles, k->bin.max_opc, &hw->ctx, err);
    if (st == HET_OK) st = xdna_hwctx_config_cu(&hw->dev, &hw->ctx, k->pdi_bo.handle, 0, err);
    if (st != HET_OK) {
        xdna_hwctx_destroy(&hw->dev, &hw->ctx);
        het_error_prefix(err, "npu: loading kernel '%s'", kd->name);
        return lose(hw, st);
    }
    hw->cur = i;
    const double dt = het_now_us() - t0;
    hw->c->stats.kernel_switches++;
    hw->switch_us_sum += dt;
    if (hw->pack.switch_us < 0)   /* measured switch cost feeds the cost model */
        hw->c->profile.switch_us = hw->switch_us_sum / (double)hw->c->stats.kernel_switches;
    return HET_OK;
}

/* ---- memory ------------------------------------------------------------------------- */

enum het_status npu_hw_register(struct npu_hw *hw, void *base, size_t size, het_error *err)
{
    /* Activations are quantised by the host into the NPU's own act BO and
     * results copied out of its out BO, so scheduler regions need no import;
     * weights are bound one by one (npu_hw_bind_weight). */
    (void)hw; (void)base; (void)size; (void)err;
    return HET_OK;
}

void npu_hw_unregister(struct npu_hw *hw, void *base) { (void)hw; (void)base; }

static enum het_status bind_pool(struct npu_hw *hw, het_error *err)
{
    if (hw->pool_bo.handle) return HET_OK;
    het_pool *pool = hw->c->pool;
    const int fd = het_pool_dmabuf_fd(pool);
    if (fd >= 0) return xdna_bo_import(&hw->dev, fd, het_pool_size(pool), &hw->pool_bo, err);
    /* memfd pool: its pages as a user-page BO */
    return xdna_bo_userptr(&hw->dev, het_pool_base(pool), (het_pool_size(pool) + 4095) & ~(size_t)4095, &hw->pool_bo,
                           err);
}

enum het_status npu_hw_bind_weight(struct npu_hw *hw, struct npu_wrec *w, het_error *err)
{
    enum het_status st;
    if (w->in_pool) {
        st = bind_pool(hw, err);
        if (st != HET_OK) return st;
        w->bo = hw->pool_bo.handle;
        w->bo_offset = w->slice.offset;
        return xdna_bo_sync(&hw->dev, &hw->pool_bo, XDNA_SYNC_TO_DEVICE, w->slice.offset, w->d.total_bytes, err);
    }
    struct xdna_bo *nb = realloc(hw->wbos, sizeof *nb * (size_t)(hw->n_wbos + 1));
    if (!nb) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
    hw->wbos = nb;
    st = xdna_bo_userptr(&hw->dev, w->data, (w->d.total_bytes + 4095) & ~(size_t)4095, &hw->wbos[hw->n_wbos], err);
    if (st != HET_OK) return st;
    const struct xdna_bo *bo = &hw->wbos[hw->n_wbos++];
    w->bo = bo->handle;
    w->bo_offset = 0;
    return xdna_bo_sync(&hw->dev, bo, XDNA_SYNC_TO_DEVICE, 0, w->d.total_bytes, err);
}

static const struct xdna_bo *bo_by_handle(const struct npu_hw *hw, uint32_t h)
{
    if (h == hw->pool_bo.handle) return &hw->pool_bo;
    for (int i = 0; i < hw->n_wbos; i++)
        if (hw->wbos[i].handle == h) return &hw->wbos[i];
    return NULL;
}

static enum het_status ensure_bo(struct npu_hw *hw, struct xdna_bo *bo, size_t need, het_error *err)
{
    if (bo->handle && bo->size >= need) return HET_OK;
    xdna_bo_free(&hw->dev, bo);
    need = (need + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    enum het_status st = xdna_bo_create(&hw->dev, XDNA_BO_SHARE, need, bo, err);
    if (st == HET_OK && !bo->map) st = het_error_set(err, HET_ERR_DEVICE, "npu: shared BO could not be mapped");
    return st;
}

enum het_status npu_hw_io(struct npu_hw *hw, size_t act_bytes, size_t out_bytes, void **act, float **out, het_error *err)
{
    enum het_status st = ensure_bo(hw, &hw->act, act_bytes, err);
    if (st == HET_OK) st = ensure_bo(hw, &hw->out, out_bytes, err);
    *act = hw->act.map;
    *out = hw->out.map;
    return st;
}

enum het_status npu_hw_staging(struct npu_hw *hw, size_t slot_bytes, void **slot0, void **slot1, het_error *err)
{
    enum het_status st = ensure_bo(hw, &hw->stage[0], slot_bytes, err);
    if (st == HET_OK) st = ensure_bo(hw, &hw->stage[1], slot_bytes, err);
    *slot0 = hw->stage[0].map;
    *slot1 = hw->stage[1].map;
    return st;
}

/* ---- the pool's NPU backing ------------------------------------------------------- */

static int export_dmabuf(void *ctx, size_t size, het_error *err)
{
    struct npu_hw *hw = ctx;
    if (hw->export_bo.handle) {
        het_error_set(err, HET_ERR_INVALID, "npu: the NPU already backs a pool");
        return -1;
    }
    if (xdna_bo_create(&hw->dev, XDNA_BO_SHARE, (size + 4095) & ~(size_t)4095, &hw->export_bo, err) != HET_OK) return -1;
    int fd = -1;
    if (xdna_bo_export(&hw->dev, &hw->export_bo, &fd, err) != HET_OK) {
        xdna_bo_free(&hw->dev, &hw->export_bo);
        return -1;
    }
    return fd;
}

static void export_release(void *ctx)
{
    struct npu_hw *hw = ctx;
    xdna_bo_free(&hw->dev, &hw->export_bo);
}

bool npu_hw_pool_provider(struct npu_hw *hw, struct het_pool_npu_provider *out)
{
    out->export_dmabuf = export_dmabuf;
    out->release = export_release;
    out->ctx = hw;
    return true;
}

/* ---- commands ------------------------------------------------------------------------ */

static void put64(uint32_t *w, int *n, uint64_t v)
{
    w[(*n)++] = (uint32_t)v;
    w[(*n)++] = (uint32_t)(v >> 32);
}

/* The ERT_START_NPU packet: header, CU mask, instruction buffer, arguments. */
static enum het_status build_cmd(struct npu_hw *hw, int ki, uint64_t act_addr, uint64_t w_addr, uint64_t out_addr,
                                 het_error *err)
{
    const struct npu_kernel_desc *kd = &hw->pack.k[ki];
    const struct hw_kernel *k = &hw->k[ki];
    uint32_t *w = hw->cmd.map;
    int n = 1;
    w[n++] = 1u;                                    /* CU mask: CU 0 */
    const uint64_t instr = k->instr_bo.xdna_addr;
    put64(w, &n, instr);                            /* struct xdna_cmd_start_npu */
    w[n++] = (uint32_t)(k->bin.n_insts * 4);
    w[n++] = 0;                                     /* properties */
    for (int i = 0; i < kd->n_args; i++) {
        const struct npu_karg *a = &kd->args[i];
        switch (a->kind) {
        case NPU_ARG_OPCODE:
        case NPU_ARG_U64:     put64(w, &n, a->value); break;
        case NPU_ARG_U32:     w[n++] = (uint32_t)a->value; break;
        case NPU_ARG_INSTR:   put64(w, &n, instr); break;
        case NPU_ARG_NINSTR:  w[n++] = (uint32_t)k->bin.n_insts; break;
        case NPU_ARG_ACT:     put64(w, &n, act_addr); break;
        case NPU_ARG_WEIGHTS: put64(w, &n, w_addr); break;
        case NPU_ARG_OUT:     put64(w, &n, out_addr); break;
        case NPU_ARG_ACT_GROUP: w[n++] = (uint32_t)kd->act_group; break;
        }
    }
    if ((size_t)n * 4 > CMD_BYTES) return het_error_set(err, HET_ERR_INVALID, "npu: command packet too long");
    w[0] = xdna_cmd_header(XDNA_ERT_START_NPU, (uint32_t)(n - 1), XDNA_ERT_STATE_NEW);
    return xdna_bo_sync(&hw->dev, &hw->cmd, XDNA_SYNC_TO_DEVICE, 0, (uint64_t)n * 4, err);
}

static uint64_t act_offset(const struct npu_hw *hw, const struct het_npu_actbuf *a)
{
    const void *p = a->fmt == HET_NPU_ACT_BF16 ? (const void *)a->bf : (const void *)a->scale;
    return (uint64_t)((const uint8_t *)p - (const uint8_t *)hw->act.map);
}

static void fill_sentinel(float *out, size_t ldo, int64_t rows, int64_t cols)
{
    for (int64_t m = 0; m < rows; m++)
        for (int64_t n = 0; n < cols; n++) memcpy(&out[(size_t)m * ldo + (size_t)n], &(uint32_t){SENTINEL}, 4);
}

enum het_status npu_hw_run(struct npu_hw *hw, const struct het_npu_wdesc *d, const void *host_plane, uint32_t bo,
                           uint64_t bo_off, int slot, const struct het_npu_actbuf *a, float *out, size_t ldo,
                           uint64_t *token, het_error *err)
{
    if (hw->lost) return het_error_set(err, HET_ERR_DEVICE_LOST, "npu: device unusable after an earlier failure");
    const int ki = find_kernel(hw, d, a->Mpad, a->fmt, a->group);
    if (ki < 0 || hw->pack.k[ki].m_tile != a->Mpad)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: no kernel for K %lld N %lld M tile %lld act_group %lld",
                             (long long)d->K, (long long)d->Npad, (long long)a->Mpad, (long long)a->group);
    enum het_status st = use_kernel(hw, ki, err);
    if (st != HET_OK) return st;
    uint64_t w_addr;
    uint32_t w_handle;
    if (slot >= 0) {
        const struct xdna_bo *sb = &hw->stage[slot];
        st = xdna_bo_sync(&hw->dev, sb, XDNA_SYNC_TO_DEVICE, 0, d->total_bytes, err);
        w_addr = sb->xdna_addr;
        w_handle = sb->handle;
    } else {
        const struct xdna_bo *wb = bo_by_handle(hw, bo);
        if (!wb) return het_error_set(err, HET_ERR_INVALID, "npu: weight BO %u is unknown", bo);
        w_addr = wb->xdna_addr + bo_off;
        w_handle = wb->handle;
    }
    const uint64_t aoff = act_offset(hw, a), abytes = het_npu_act_bytes(a->fmt, a->Mpad, a->K, a->group);
    const uint64_t ooff = (uint64_t)((uint8_t *)out - (uint8_t *)hw->out.map);
    const uint64_t obytes = ((uint64_t)(a->Mpad - 1) * ldo + (uint64_t)d->Npad) * sizeof(float);
    const bool check = !hw->k[ki].checked;
    if (check) fill_sentinel(out, ldo, a->Mpad, d->Npad);
    if (st == HET_OK) st = xdna_bo_sync(&hw->dev, &hw->act, XDNA_SYNC_TO_DEVICE, aoff, abytes, err);
    if (st == HET_OK) st = xdna_bo_sync(&hw->dev, &hw->out, XDNA_SYNC_TO_DEVICE, ooff, obytes, err);
    if (st == HET_OK) st = build_cmd(hw, ki, hw->act.xdna_addr + aoff, w_addr, hw->out.xdna_addr + ooff, err);
    const uint32_t args[] = { hw->k[ki].instr_bo.handle, hw->act.handle, w_handle, hw->out.handle };
    if (st == HET_OK) st = xdna_exec(&hw->dev, &hw->ctx, hw->cmd.handle, args, 4, token, err);
    if (st != HET_OK) return lose(hw, st);
    hw->pend = (struct hw_pending){ .active = true, .check = check, .kidx = ki, .d = *d, .host_plane = host_plane,
                                    .a = *a, .out = out, .ldo = ldo, .out_off = ooff, .out_bytes = obytes };
    return HET_OK;
}

/* Every output written, and equal to the emulator's within float reordering. */
static enum het_status self_check(struct npu_hw *hw, het_error *err)
{
    const struct hw_pending *p = &hw->pend;
    const int64_t rows = p->a.Mpad, cols = p->d.Npad;
    int64_t unwritten = 0;
    for (int64_t m = 0; m < rows; m++)
        for (int64_t n = 0; n < cols; n++) {
            uint32_t bits;
            memcpy(&bits, &p->out[(size_t)m * p->ldo + (size_t)n], 4);
            unwritten += bits == SENTINEL;
        }
    const char *name = hw->pack.k[p->kidx].name;
    if (unwritten)
        return het_error_set(err, HET_ERR_DEVICE_LOST, "npu: self-check of kernel '%s': the command completed but %lld "
                             "of %lld outputs were never written (instruction stream not executed?)", name,
                             (long long)unwritten, (long long)(rows * cols));
    float *ref = malloc(sizeof(float) * (size_t)(rows * cols));
    if (!ref) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory (self-check)");
    het_npu_kernel_run(&p->d, p->host_plane, &p->a, ref, (size_t)cols, 0, p->d.n_tiles);
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < rows * cols; i++) scale = fmax(scale, fabs(ref[i]));
    for (int64_t m = 0; m < rows; m++)
        for (int64_t n = 0; n < cols; n++) {
            const double v = p->out[(size_t)m * p->ldo + (size_t)n], r = ref[m * cols + n];
            const double e = isfinite(v) ? fabs(v - r) : INFINITY;
            if (e > worst) worst = e;
        }
    free(ref);
    if (worst > 1e-3 * scale + 1e-5)
        return het_error_set(err, HET_ERR_DEVICE_LOST, "npu: self-check of kernel '%s': max |NPU - emulator| = %g "
                             "(outputs up to %g)", name, worst, scale);
    hw->k[p->kidx].checked = true;
    hw->c->stats.self_check_done = true;
    hw->c->stats.self_check_ok = true;
    return HET_OK;
}

enum het_status npu_hw_wait(void *user, uint64_t token, het_error *err)
{
    struct npu_hw *hw = user;
    if (!hw->pend.active) return HET_OK;
    enum het_status st = xdna_wait(&hw->dev, &hw->ctx, token, hw->timeout_ms, err);
    hw->pend.active = false;
    if (st != HET_OK) return lose(hw, st);
    st = xdna_bo_sync(&hw->dev, &hw->cmd, XDNA_SYNC_FROM_DEVICE, 0, 4, err);
    const uint32_t state = xdna_cmd_state(((const uint32_t *)hw->cmd.map)[0]);
    if (st == HET_OK && state != XDNA_ERT_STATE_COMPLETED)
        st = het_error_set(err, state == XDNA_ERT_STATE_ERROR ? HET_ERR_DEVICE : HET_ERR_DEVICE_LOST,
                           "npu: command %llu ended in ERT state %u (kernel '%s')", (unsigned long long)token, state,
                           hw->pack.k[hw->pend.kidx].name);
    if (st == HET_OK) st = xdna_bo_sync(&hw->dev, &hw->out, XDNA_SYNC_FROM_DEVICE, hw->pend.out_off, hw->pend.out_bytes, err);
    if (st == HET_OK && hw->pend.check) {
        st = self_check(hw, err);
        if (st != HET_OK) {
            hw->c->stats.self_check_done = true;
            hw->c->stats.self_check_ok = false;
        }
    }
    return st == HET_OK ? HET_OK : lose(hw, st == HET_ERR_DEVICE ? HET_ERR_DEVICE_LOST : st);
}
