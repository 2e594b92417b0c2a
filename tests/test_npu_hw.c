/*
 * test_npu_hw.c — the NPU driver path on real hardware.
 *
 * Runs only where /dev/accel/accel0 exists and its driver is amdxdna;
 * otherwise it exits 77 (skipped) saying what it found. On such a machine:
 *   - device discovery, driver version, AIE metadata / version and firmware
 *     version (DRM_IOCTL_AMDXDNA_GET_INFO);
 *   - BOs: shared (mapped, synced both ways), the device heap, a device BO
 *     inside it, a command BO, export as dma-buf and import back
 *     (drmPrimeFDToHandle), user pages (newer kernels);
 *   - a hardware context created and destroyed;
 *   - with a kernel pack (HET_NPU_KERNELS=<dir>): the hardware device runs
 *     one MUL_MAT per int8 kernel of the pack through the device vtable,
 *     with the kernel's activation group (act_group 32 or per-row); its
 *     first-use self-check (sentinel output compared with the emulator) must
 *     pass and its results must match the emulated device's (same group);
 *   - the pool's NPU backing (an amdxdna BO exported as the pool's dma-buf).
 * Nothing in this file has been run by its author: there is no NPU on the
 * development machine (devices/npu/README.md, "Hardware status").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/npu/npu_drv.h"
#include "devices/npu/npu_manifest.h"
#include "het/npu.h"
#include "het/pool.h"
#include "sched/device_impl.h"
#include "testutil.h"

static void check_driver(void)
{
    struct xdna_dev d;
    het_error err = {0};
    enum het_status st = xdna_open(&d, NULL, &err);
    CHECK(st == HET_OK, "open: %s", err.msg);
    if (st != HET_OK) return;
    st = xdna_query(&d, &err);
    CHECK(st == HET_OK, "GET_INFO: %s", err.msg);
    printf("%s: %s %d.%d.%d, firmware %u.%u.%u.%u, AIE %u.%u, %u cols x %u rows (core %u, mem %u, shim %u)\n", d.node,
           d.driver, d.drv_major, d.drv_minor, d.drv_patch, d.fw.major, d.fw.minor, d.fw.patch, d.fw.build, d.aie.major,
           d.aie.minor, d.meta.cols, d.meta.rows, d.meta.core.row_count, d.meta.mem.row_count, d.meta.shim.row_count);
    CHECK(d.meta.cols > 0 && d.meta.rows > 0 && d.meta.core.row_count > 0, "AIE metadata empty");

    struct xdna_bo sh = {0}, heap = {0}, dev = {0}, cmd = {0}, imp = {0}, up = {0};
    st = xdna_bo_create(&d, XDNA_BO_SHARE, 1 << 20, &sh, &err);
    CHECK(st == HET_OK && sh.map && sh.xdna_addr, "shared BO: %s", err.msg);
    if (st == HET_OK && sh.map) {
        memset(sh.map, 0x5A, 1 << 20);
        CHECK(xdna_bo_sync(&d, &sh, XDNA_SYNC_TO_DEVICE, 0, 1 << 20, &err) == HET_OK, "sync to device: %s", err.msg);
        CHECK(xdna_bo_sync(&d, &sh, XDNA_SYNC_FROM_DEVICE, 4096, 4096, &err) == HET_OK, "sync from device: %s",
              err.msg);
        CHECK(((uint8_t *)sh.map)[5000] == 0x5A, "shared BO contents changed by syncs");
    }
    st = xdna_bo_create(&d, XDNA_BO_DEV_HEAP, (size_t)64 << 20, &heap, &err);
    CHECK(st == HET_OK && heap.map, "device heap: %s", err.msg);
    st = xdna_bo_create(&d, XDNA_BO_DEV, 4096, &dev, &err);
    CHECK(st == HET_OK && dev.xdna_addr >= heap.xdna_addr && dev.xdna_addr + 4096 <= heap.xdna_addr + heap.size,
          "device BO inside the heap: %s", err.msg);
    st = xdna_bo_create(&d, XDNA_BO_CMD, 4096, &cmd, &err);
    CHECK(st == HET_OK && cmd.map, "command BO: %s", err.msg);
    int fd = -1;
    if (sh.handle) {
        st = xdna_bo_export(&d, &sh, &fd, &err);
        CHECK(st == HET_OK && fd >= 0, "export dma-buf: %s", err.msg);
        if (fd >= 0) {
            st = xdna_bo_import(&d, fd, 1 << 20, &imp, &err);
            CHECK(st == HET_OK && imp.xdna_addr, "import dma-buf: %s", err.msg);
            close(fd);
        }
    }
    void *mem = aligned_alloc(4096, 1 << 20);
    st = xdna_bo_userptr(&d, mem, 1 << 20, &up, &err);
    if (st != HET_OK) printf("note: user-page BOs refused by this kernel (%s); pools then need a dma-buf backing\n", err.msg);
    struct xdna_hwctx h;
    st = xdna_hwctx_create(&d, d.meta.core.row_count, 0, &h, &err);
    CHECK(st == HET_OK && h.handle && h.syncobj, "hardware context: %s", err.msg);
    if (st == HET_OK) xdna_hwctx_destroy(&d, &h);
    if (imp.handle == sh.handle) imp.handle = 0;   /* PRIME import of our own BO returns the same handle */
    struct xdna_bo *all[] = { &up, &imp, &cmd, &dev, &sh, &heap };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) xdna_bo_free(&d, all[i]);
    free(mem);
    xdna_close(&d);
}

/* One MUL_MAT with kernel k of the pack: hardware vs emulated (same act_group). */
static void run_kernel(het_device *hw, het_device *em, const struct npu_kernel_desc *k)
{
    het_error err = {0};
    const enum het_type type = k->wfmt == HET_NPU_W_Q4 ? HET_TYPE_Q4_0 : HET_TYPE_Q8_0;
    const int64_t K = k->K, N = k->N, M = k->m_tile;
    const int64_t wne[2] = { K, N }, xne[2] = { K, M }, yne[2] = { N, M };
    struct het_tensor w, x, y1, y2;
    het_tensor_init(&w, type, 2, wne);
    het_tensor_set_name(&w, "hwtest.%s", k->name);
    w.flags = HET_TENSOR_FLAG_WEIGHT;
    het_tensor_init(&x, HET_TYPE_F32, 2, xne);
    het_tensor_init(&y1, HET_TYPE_F32, 2, yne);
    const size_t rs = het_type_row_size(type, K);
    uint8_t *wb = malloc(rs * (size_t)N);
    float *tmp = malloc(sizeof(float) * (size_t)K), *xb = malloc(sizeof(float) * (size_t)(K * M));
    float *o1 = malloc(sizeof(float) * (size_t)(N * M)), *o2 = malloc(sizeof(float) * (size_t)(N * M));
    for (int64_t r = 0; r < N; r++) {
        het_test_fill_normal(tmp, (size_t)K, 1.0f);
        het_quantize_row(type, tmp, wb + (size_t)r * rs, K);
    }
    het_test_fill_normal(xb, (size_t)(K * M), 1.0f);
    w.data = wb;
    x.data = xb;
    y1.data = o1;
    y1.op = HET_OP_MUL_MAT;
    y1.src[0] = &w;
    y1.src[1] = &x;
    y2 = y1;
    y2.data = o2;
    struct het_tensor *wp = &w, *n1 = &y1, *n2 = &y2;
    enum het_status st = het_device_prepare_weights(hw, &wp, 1, &err);
    if (st == HET_OK) st = het_device_run_split(hw, &n1, 1, &err);
    CHECK(st == HET_OK, "kernel %s on the NPU: %s", k->name, err.msg);
    w.extra = NULL;
    if (st == HET_OK) st = het_device_run_split(em, &n2, 1, &err);
    double worst = 0, scale = 0;
    for (int64_t i2 = 0; st == HET_OK && i2 < N * M; i2++) {
        worst = fmax(worst, isfinite(o1[i2]) ? fabs(o1[i2] - o2[i2]) : INFINITY);
        scale = fmax(scale, fabs(o2[i2]));
    }
    CHECK(st == HET_OK && worst <= 1e-3 * scale + 1e-5, "kernel %s: max |NPU - emulated| %g (outputs up to %g)",
          k->name, worst, scale);
    free(wb); free(tmp); free(xb); free(o1); free(o2);
}

/* The pool on an NPU-owned buffer. */
static void check_pool_backing(het_device *hw)
{
    het_error err = {0};
    struct het_pool_params pp = { .size = (size_t)16 << 20, .n_order = 1, .order = { HET_POOL_BACKING_NPU } };
    CHECK(het_npu_pool_provider(hw, &pp.npu), "no pool provider in hardware mode");
    het_pool *pool = het_pool_init(&pp, &err);
    CHECK(pool && het_pool_backing(pool) == HET_POOL_BACKING_NPU, "NPU-backed pool: %s", err.msg);
    het_pool_free(pool);
}

/* Every int8 kernel of the pack with activation group g (32 or per-row),
 * on a hardware and an emulated device of that group (one hardware device
 * open at a time). Returns the number of kernels run. */
static int check_group(const struct npu_kpack *p, int g, bool with_pool)
{
    struct het_npu_params hp, ep;
    het_npu_params_default(&hp, HET_NPU_HARDWARE);
    het_npu_params_default(&ep, HET_NPU_EMULATE);
    hp.act_group = ep.act_group = g;
    ep.no_cache = true;
    het_error err = {0};
    het_device *hw = het_npu_device_init_params(&hp, &err);
    CHECK(hw != NULL, "hardware device: %s", err.msg);
    het_device *em = het_npu_device_init_params(&ep, &err);
    CHECK(em != NULL, "emulated device: %s", err.msg);
    int n = 0;
    for (int i = 0; hw && em && i < p->n; i++) {
        const struct npu_kernel_desc *k = &p->k[i];
        if (k->act != HET_NPU_ACT_INT8 || (k->act_group == HET_NPU_ACT_GROUP_32) != (g == HET_NPU_ACT_GROUP_32)) continue;
        run_kernel(hw, em, k);
        n++;
    }
    if (hw && n) {
        struct het_npu_stats s;
        het_npu_get_stats(hw, &s);
        printf("%s\n", het_device_description(hw));
        CHECK(s.self_check_done && s.self_check_ok, "self-check done %d ok %d", s.self_check_done, s.self_check_ok);
        printf("kernel switches %llu, measured switch cost %.0f us\n", (unsigned long long)s.kernel_switches,
               het_npu_get_profile(hw)->switch_us);
    }
    if (hw && with_pool) check_pool_backing(hw);
    het_device_free(hw);
    het_device_free(em);
    return n;
}

static void check_kernels(const char *pack)
{
    struct npu_kpack p;
    het_error err = {0};
    if (npu_kpack_load(pack, &p, &err) != HET_OK) {
        CHECK(false, "kernel pack: %s", err.msg);
        return;
    }
    const int n = check_group(&p, HET_NPU_ACT_GROUP_32, true) + check_group(&p, HET_NPU_ACT_GROUP_ROW, false);
    CHECK(n > 0, "the pack has no int8 kernel");
    npu_kpack_free(&p);
}

int main(void)
{
    char why[256];
    if (!xdna_present(why, sizeof why))
        het_test_skip("no AMD NPU here (%s); this test needs /dev/accel/accel0 with driver amdxdna", why);
    het_test_seed(5);
    check_driver();
    const char *pack = getenv("HET_NPU_KERNELS");
    if (pack && *pack) check_kernels(pack);
    else printf("HET_NPU_KERNELS not set: kernel execution, self-check and the NPU pool backing not tested\n");
    return het_test_finish();
}
