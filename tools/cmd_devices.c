/*
 * cmd_devices.c — `hetrun devices`: every device het can use, with what it
 * can do. Devices that cannot be opened are listed with the reason. The
 * last line is the memory pool backing a run would get (and why each
 * earlier backing was skipped).
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

#include "het/npu.h"

#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define HR_VULKAN 1
#endif

/* The NPU: the amdxdna hardware when there is one (else why not), and the
 * emulated NPU, which is always there and always says it is emulated. */
static het_device *print_npu(void)
{
    het_error err = { 0 };
    het_device *hw = het_npu_device_init(HET_NPU_HARDWARE, &err);
    if (hw) printf("%-9s %s\n", het_device_name(hw), het_device_description(hw));
    else printf("npu       hardware unavailable: %s\n", err.msg);
    het_error eerr = { 0 };
    het_device *emu = het_npu_device_init(HET_NPU_EMULATE, &eerr);
    if (emu) printf("%-9s %s (use with --npu emulate or HET_NPU=emulate)\n", "npu", het_device_description(emu));
    else printf("npu       emulation unavailable: %s\n", eerr.msg);
    het_device_free(emu);
    return hw;
}

/* A small pool made the way a run makes its own (HET_POOL order; the NPU
 * provides backing 1 when it runs on hardware). */
static void print_pool(het_device *npu)
{
    struct het_pool_params p = { .size = 4u << 20, .name = "het-pool-probe" };
    het_error err = { 0 };
    const char *env = getenv("HET_POOL");
    if (env && (!strcmp(env, "off") || !strcmp(env, "none") || !strcmp(env, "0"))) {
        printf("pool      off (HET_POOL=%s)\n", env);
        return;
    }
    if (env && *env && het_pool_parse_order(env, &p, &err) != HET_OK) {
        printf("pool      HET_POOL: %s\n", err.msg);
        return;
    }
    if (npu) het_npu_pool_provider(npu, &p.npu);
    het_pool *pool = het_pool_init(&p, &err);
    if (pool) {
        char line[1024];
        het_pool_describe(pool, line, sizeof line);
        printf("pool      %s: %s\n", het_pool_backing_name(het_pool_backing(pool)), line);
    } else {
        printf("pool      unavailable: %s\n", err.msg);
    }
    het_pool_free(pool);
}

int cmd_devices(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "devices", "-t --json", argc, argv)) return 2;
    het_error err = { 0 };
    het_device *cpu = het_cpu_device_init(o.threads, &err);
    if (cpu) {
        printf("cpu       %s\n", het_device_description(cpu));
        het_device_free(cpu);
    } else {
        printf("cpu       unavailable: %s\n", err.msg);
    }
#ifdef HR_VULKAN
    het_device *vk = het_vulkan_device_init(-1, &err);
    if (vk) {
        printf("%-9s %s\n", het_device_name(vk), het_device_description(vk));
        het_device_free(vk);
    } else {
        printf("vulkan    unavailable: %s\n", err.msg);
    }
#else
    printf("vulkan    not built (install libvulkan-dev and glslc, then rebuild)\n");
#endif
    het_device *npu = print_npu();
    print_pool(npu);
    het_device_free(npu);
    return 0;
}
