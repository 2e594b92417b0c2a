/*
 * cmd_devices.c — `hetrun devices`: every device het can use, with its
 * caps; which of them `auto` (the default device set) takes, and why it
 * skips the others. The last line is the memory pool backing a run would
 * get (and why each earlier backing was skipped).
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

#include "het/npu.h"


/* A small pool made the way a run makes its own (HET_POOL order; the NPU
 * provides backing 1 when it runs on hardware). */
static void print_pool(het_device *const *devs, int n)
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
    for (int i = 0; i < n && !p.npu.export_dmabuf; i++) het_npu_pool_provider(devs[i], &p.npu);
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

/* What auto takes (the default device set) and why it skips the others. */
static int print_auto(const struct hr_opts *o, het_device **devs)
{
    struct het_device_candidate c[HET_DEVICE_MAX_CANDIDATES];
    int n = 0, n_c = 0;
    het_error err = { 0 };
    if (hr_open_devices(o, "auto", "hardware", devs, HET_DEVICE_MAX_CANDIDATES, &n, c, &n_c, &err) != HET_OK)
        printf("auto      opens nothing: %s\n", err.msg);
    for (int i = 0; i < n_c; i++) {
        if (c[i].taken) printf("%-9s %s\n", c[i].name, c[i].why);
        else printf("%-9s skipped: %s\n", c[i].spec, c[i].why);
    }
    printf("auto      = ");
    for (int i = 0; i < n; i++) printf("%s%s", i ? "," : "", het_device_name(devs[i]));
    printf(" (the default device set of run, logits, bench, plan and serve)\n");
    for (int i = 0; i < n; i++) {
        const struct het_device_caps *k = het_device_get_caps(devs[i]);
        printf("  %-8s caps:%s%s%s%s%s%s%s\n", het_device_name(devs[i]), k->async ? " async" : " synchronous",
               k->host_mapped ? ", host-mapped" : "", k->lossy ? ", lossy" : "",
               k->shares_cpu_cores ? ", shares the CPU's cores" : "", k->host_timed ? "" : ", emulation (not timed)",
               k->repacks_weights ? ", repacks weights" : "",
               k->own_memory ? ", own memory (weights uploaded once)" : "");
    }
    het_error eerr = { 0 };
    het_device *emu = het_npu_device_init(HET_NPU_EMULATE, &eerr);
    if (emu) printf("%-9s %s (only when named: npu:emulate, --npu emulate or HET_NPU=emulate)\n", "npu:emulate",
                    het_device_description(emu));
    else printf("npu:emulate unavailable: %s\n", eerr.msg);
    het_device_free(emu);
    return n;
}

int cmd_devices(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "devices", "-t --json", argc, argv)) return 2;
    het_device *devs[HET_DEVICE_MAX_CANDIDATES];
    int n = print_auto(&o, devs);
    print_pool(devs, n);
    for (int i = 0; i < n; i++) het_device_free(devs[i]);
    return 0;
}
