/*
 * test_cpu_features.c — which processor the CPU device says it runs on.
 *
 * The family / model / stepping cpuid gives (base and extended fields
 * combined) must be the ones the kernel reports in /proc/cpuinfo, the
 * vendor must be one the kernel names, and the AMD core-design table must
 * give the documented design for family / model pairs at the edges of its
 * ranges (and nothing for Intel or for models outside them). The device's
 * description, which keys calibration profiles, must carry the identity.
 * A device asked for an unknown kernel level (HET_CPU_ISA) or stream hint
 * (HET_CPU_STREAM) is refused with a message naming the value, not run at
 * a level or with a hint it chose instead. het_cpu_largest_cache_bytes is
 * at least the cache size /proc/cpuinfo gives. A process whose HET_CPU_ISA
 * caps the level below amx never asks Linux for the AMX tile state.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "devices/cpu/cpu_ops.h"
#include "het/device.h"
#include "testutil.h"

/* The value of the first "key<blanks>: value" line of /proc/cpuinfo into
 * out; false when there is none. */
static bool cpuinfo_field(const char *key, char *out, size_t size)
{
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) return false;
    char line[4096];
    bool found = false;
    const size_t n = strlen(key);
    while (!found && fgets(line, sizeof line, fp)) {
        const char *colon = strchr(line, ':');
        /* the key, then only blanks up to the colon ("model" is not "model name") */
        if (strncmp(line, key, n) != 0 || !colon || strspn(line + n, " \t") != (size_t)(colon - line) - n) continue;
        snprintf(out, size, "%s", colon + 1 + strspn(colon + 1, " "));
        out[strcspn(out, "\n")] = 0;
        found = true;
    }
    fclose(fp);
    return found;
}

static void check_table(void)
{
    static const struct { const char *vendor; unsigned family, model; const char *want; } cases[] = {
        { "AuthenticAMD", 0x17, 0x01, "Zen 1" },  { "AuthenticAMD", 0x17, 0x08, "Zen 1" },
        { "AuthenticAMD", 0x17, 0x31, "Zen 2" },  { "AuthenticAMD", 0x17, 0x71, "Zen 2" },
        { "AuthenticAMD", 0x17, 0xa0, "Zen 2" },  { "AuthenticAMD", 0x17, 0xb0, NULL },
        { "AuthenticAMD", 0x19, 0x01, "Zen 3" },  { "AuthenticAMD", 0x19, 0x21, "Zen 3" },
        { "AuthenticAMD", 0x19, 0x50, "Zen 3" },  { "AuthenticAMD", 0x19, 0x11, "Zen 4" },
        { "AuthenticAMD", 0x19, 0x61, "Zen 4" },  { "AuthenticAMD", 0x19, 0x74, "Zen 4" },
        { "AuthenticAMD", 0x19, 0xa0, "Zen 4" },  { "AuthenticAMD", 0x19, 0xb0, NULL },
        { "AuthenticAMD", 0x1a, 0x02, "Zen 5" },  { "AuthenticAMD", 0x1a, 0x24, "Zen 5" },
        { "AuthenticAMD", 0x1a, 0x44, "Zen 5" },  { "AuthenticAMD", 0x1a, 0x30, NULL },
        { "AuthenticAMD", 0x15, 0x02, NULL },     { "GenuineIntel", 0x06, 0x8f, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct het_cpu_features f;
        memset(&f, 0, sizeof f);
        snprintf(f.vendor, sizeof f.vendor, "%s", cases[i].vendor);
        f.family = cases[i].family;
        f.model = cases[i].model;
        const char *got = het_cpu_core_name(&f);
        CHECK((got == NULL) == (cases[i].want == NULL) && (!got || strcmp(got, cases[i].want) == 0),
              "%s family %xh model %xh: %s, want %s", cases[i].vendor, cases[i].family, cases[i].model,
              got ? got : "(none)", cases[i].want ? cases[i].want : "(none)");
    }
}

/* var=value refused by the device's init, the message naming it; var as it was after. */
static void refused(const char *var, const char *value)
{
    const char *was = getenv(var);
    char *keep = was ? strdup(was) : NULL;
    setenv(var, value, 1);
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(1, &err);
    char want[96];
    snprintf(want, sizeof want, "%s='%s'", var, value);
    CHECK(!dev && strstr(err.msg, want), "%s=%s: %s", var, value, dev ? "accepted" : err.msg);
    if (dev) het_device_free(dev);
    if (keep) setenv(var, keep, 1);
    else unsetenv(var);
    free(keep);
}

static void refused_env(void)
{
    refused("HET_CPU_ISA", "avx3");
    refused("HET_CPU_ISA", "AVX2");
    refused("HET_CPU_STREAM", "t2");
}

/* Detection with HET_CPU_ISA=avx512vnni leaves the process without the
 * tile-data permission (arch_prctl ARCH_GET_XCOMP_PERM, bit 18) and without
 * amx; it must run before anything else here detects. */
static void capped_asks_nothing(void)
{
    const char *old = getenv("HET_CPU_ISA");
    char *keep = old ? strdup(old) : NULL;
    setenv("HET_CPU_ISA", "avx512vnni", 1);
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    CHECK(!f.amx_int8, "HET_CPU_ISA=avx512vnni, yet amx detected");
#if defined(__linux__) && defined(SYS_arch_prctl)
    uint64_t perm = 0;
    if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &perm) == 0)
        CHECK(!(perm >> 18 & 1), "HET_CPU_ISA=avx512vnni, yet the process holds the AMX tile state (0x%llx)",
              (unsigned long long)perm);
#endif
    if (keep) setenv("HET_CPU_ISA", keep, 1);
    else unsetenv("HET_CPU_ISA");
    free(keep);
}

/* The largest cache sysfs reports: at least the "cache size" /proc/cpuinfo
 * gives (the last level on Intel, L2 on AMD), and none when sysfs lists none. */
static void largest_cache(void)
{
    const size_t got = het_cpu_largest_cache_bytes();
    fprintf(stderr, "largest cache: %zu bytes\n", got);
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index0/size", "r");
    if (f) fclose(f);
    CHECK(f ? got > 0 : got == 0, "largest cache %zu bytes, sysfs %s", got, f ? "lists caches" : "lists none");
    char v[64];
    if (cpuinfo_field("cache size", v, sizeof v))
        CHECK(got >= strtoul(v, NULL, 10) * 1024ul, "largest cache %zu bytes, under /proc/cpuinfo's %s", got, v);
}

int main(void)
{
    capped_asks_nothing();
    check_table();

    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    char who[160];
    het_cpu_identity(&f, who, sizeof who);
    fprintf(stderr, "this machine: vendor %s, %s\n", f.vendor, who);
    CHECK(f.vendor[0] != 0, "cpuid gave no vendor");
    CHECK(f.family != 0, "cpuid gave family 0");

    char v[64];
    if (cpuinfo_field("vendor_id", v, sizeof v)) CHECK(strcmp(v, f.vendor) == 0, "vendor %s, kernel says %s", f.vendor, v);
    if (cpuinfo_field("cpu family", v, sizeof v)) CHECK(f.family == strtoul(v, NULL, 10), "family %u, kernel says %s", f.family, v);
    if (cpuinfo_field("model", v, sizeof v)) CHECK(f.model == strtoul(v, NULL, 10), "model %u, kernel says %s", f.model, v);
    if (cpuinfo_field("stepping", v, sizeof v)) CHECK(f.stepping == strtoul(v, NULL, 10), "stepping %u, kernel says %s", f.stepping, v);

    char fm[64];
    snprintf(fm, sizeof fm, "family %xh model %xh", f.family, f.model);
    CHECK(strstr(who, fm) != NULL, "identity \"%s\" lacks \"%s\"", who, fm);
    largest_cache();
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(1, &err);
    CHECK(dev != NULL, "cpu device: %s", err.msg);
    if (dev) {
        CHECK(strstr(het_device_description(dev), fm) != NULL, "description \"%s\" lacks \"%s\"",
              het_device_description(dev), fm);
        het_device_free(dev);
    }
    refused_env();
    return het_test_finish();
}
