/*
 * registry.c — devices by name (see het/device.h): one spec ("cpu",
 * "vulkan", "vulkan:N", "npu", "npu:MODE") to one device, and a list of
 * specs, where "auto" stands for every usable device, to a device set.
 * The only place that knows which backends exist and how each is opened.
 */
#include "het/device.h"

#include "het/npu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define REG_VULKAN 1
#endif

static const struct het_device_spec_params no_params = { 0 };

static het_device *open_cpu(const struct het_device_spec_params *p, het_error *err)
{
    het_device *d = het_cpu_device_init(p->n_threads, err);
    if (d && p->f32_activations && het_cpu_device_set_f32_activations(d, true, err) != HET_OK) {
        het_device_free(d);
        return NULL;
    }
    return d;
}

/* The NPU's mode: the spec's ":MODE", else params->npu_mode, else $HET_NPU,
 * else params->npu_default, else the hardware. */
static het_device *open_npu(const char *spec_mode, const struct het_device_spec_params *p, het_error *err)
{
    enum het_npu_mode mode = HET_NPU_OFF;
    const char *word = spec_mode ? spec_mode : p->npu_mode;
    if (word) {
        if (het_npu_parse_mode(word, &mode, err) != HET_OK) return NULL;
    } else if (het_npu_mode_from_env(&mode, err) != HET_OK) {
        return NULL;
    }
    if (mode == HET_NPU_OFF && p->npu_default && het_npu_parse_mode(p->npu_default, &mode, err) != HET_OK)
        return NULL;
    if (mode == HET_NPU_OFF) mode = HET_NPU_HARDWARE;
    struct het_npu_params np;
    het_npu_params_default(&np, mode);
    np.model_key = p->model_key;
    np.n_threads = p->n_threads;
    return het_npu_device_init_params(&np, err);
}

static het_device *open_vulkan(const char *spec, het_error *err)
{
    int index = -1;
    if (spec[6] == ':') {
        char *end;
        long v = strtol(spec + 7, &end, 10);
        if (*end || end == spec + 7 || v < 0 || v > 1000) {
            het_error_set(err, HET_ERR_INVALID, "bad device '%s' (expected vulkan or vulkan:N)", spec);
            return NULL;
        }
        index = (int)v;
    } else if (spec[6]) {
        het_error_set(err, HET_ERR_INVALID, "unknown device '%s' (devices: cpu, vulkan, vulkan:N, npu, npu:MODE, auto)",
                      spec);
        return NULL;
    }
#ifdef REG_VULKAN
    return het_vulkan_device_init(index, err);
#else
    (void)index;
    het_error_set(err, HET_ERR_NO_DEVICE, "this build has no Vulkan backend (install libvulkan-dev glslc, rebuild)");
    return NULL;
#endif
}

het_device *het_device_init_by_spec(const char *spec, const struct het_device_spec_params *params, het_error *err)
{
    const struct het_device_spec_params *p = params ? params : &no_params;
    if (!spec || !*spec) {
        het_error_set(err, HET_ERR_INVALID, "empty device name");
        return NULL;
    }
    if (!strcmp(spec, "cpu")) return open_cpu(p, err);
    if (!strncmp(spec, "npu", 3) && (!spec[3] || spec[3] == ':')) return open_npu(spec[3] ? spec + 4 : NULL, p, err);
    if (!strncmp(spec, "vulkan", 6)) return open_vulkan(spec, err);
    if (!strcmp(spec, "auto"))
        het_error_set(err, HET_ERR_INVALID, "'auto' is a device set, not one device (het_devices_open)");
    else
        het_error_set(err, HET_ERR_INVALID, "unknown device '%s' (devices: cpu, vulkan, vulkan:N, npu, npu:MODE, auto)",
                      spec);
    return NULL;
}

/* ---------------------------------------------------------------------------
 * device sets                                                               */

struct set {
    het_device                 **out;
    int                          max, n;
    struct het_device_candidate *cands;
    int                          n_cands;
};

static void note(struct set *s, const char *spec, const het_device *d, const char *why)
{
    if (!s->cands || s->n_cands >= HET_DEVICE_MAX_CANDIDATES) return;
    struct het_device_candidate *c = &s->cands[s->n_cands++];
    memset(c, 0, sizeof *c);
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    if (d) snprintf(c->name, sizeof c->name, "%s", het_device_name(d));
    c->taken = d != NULL;
    snprintf(c->why, sizeof c->why, "%s", why);
}

static enum het_status add(struct set *s, het_device *d, het_error *err)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(het_device_name(s->out[i]), het_device_name(d))) {
            het_error_set(err, HET_ERR_INVALID, "device %s is in the set twice", het_device_name(d));
            het_device_free(d);
            return HET_ERR_INVALID;
        }
    if (s->n == s->max) {
        het_error_set(err, HET_ERR_INVALID, "more than %d devices", s->max);
        het_device_free(d);
        return HET_ERR_INVALID;
    }
    s->out[s->n++] = d;
    return HET_OK;
}

/* Open spec for auto: taken (added), or skipped with the reason noted;
 * a device every machine has (the CPU) that does not open is an error, not
 * skipped: the cause is the settings (HET_CPU_ISA, HET_CPU_STREAM), and a
 * set without it would run what the user asked on other devices. */
static enum het_status auto_one(struct set *s, const char *spec, const char *skip_note, bool required,
                                const struct het_device_spec_params *p, het_error *err)
{
    het_error e = { 0 };
    het_device *d = het_device_init_by_spec(spec, p, &e);
    if (!d && required) return het_error_set(err, e.status != HET_OK ? e.status : HET_ERR_INVALID, "%s", e.msg);
    if (!d) {
        char why[224];
        snprintf(why, sizeof why, "%.160s%s", e.msg, skip_note ? skip_note : "");
        note(s, spec, NULL, why);
        return HET_OK;
    }
    note(s, spec, d, het_device_description(d));
    return add(s, d, err);
}

static enum het_status expand_auto(struct set *s, const struct het_device_spec_params *p, het_error *err)
{
    enum het_status st = auto_one(s, "cpu", NULL, true, p, err);
#ifdef REG_VULKAN
    struct het_vulkan_device_info info[8];
    int n_vk = 0;
    het_error e = { 0 };
    if (st == HET_OK && het_vulkan_device_list(info, 8, &n_vk, &e) != HET_OK) note(s, "vulkan", NULL, e.msg);
    for (int i = 0; st == HET_OK && i < n_vk && i < 8; i++) {
        char spec[16];
        snprintf(spec, sizeof spec, "vulkan:%d", info[i].index);
        if (!info[i].usable) note(s, spec, NULL, "not usable (needs Vulkan 1.2 and a compute queue)");
        else st = auto_one(s, spec, NULL, false, p, err);
    }
#else
    if (st == HET_OK) note(s, "vulkan", NULL, "this build has no Vulkan backend");
#endif
    /* the NPU only on its hardware: an emulation is taken only when named */
    struct het_device_spec_params hw = *p;
    hw.npu_mode = "hardware";
    if (st == HET_OK) st = auto_one(s, "npu", " (the emulation only when named: npu:emulate)", false, &hw, err);
    return st;
}

enum het_status het_devices_open(const char *list, const struct het_device_spec_params *params, het_device **out,
                                 int max, int *n, struct het_device_candidate *cands, int *n_cands, het_error *err)
{
    const struct het_device_spec_params *p = params ? params : &no_params;
    struct set s = { out, max, 0, cands, 0 };
    char buf[256];
    enum het_status st = HET_OK;
    if (!list || !*list) list = "auto";
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        st = het_error_set(err, HET_ERR_INVALID, "device list too long");
    char *save = NULL;
    for (char *tok = st == HET_OK ? strtok_r(buf, ",", &save) : NULL; tok && st == HET_OK;
         tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "auto")) {
            st = expand_auto(&s, p, err);
            continue;
        }
        het_device *d = het_device_init_by_spec(tok, p, err);
        if (!d) {
            if (err) het_error_prefix(err, "device '%s'", tok);
            st = err && err->status != HET_OK ? err->status : HET_ERR_INVALID;
        } else {
            st = add(&s, d, err);
        }
    }
    if (st == HET_OK && s.n == 0) st = het_error_set(err, HET_ERR_NO_DEVICE, "no usable device in '%s'", list);
    if (st != HET_OK) {
        for (int i = 0; i < s.n; i++) het_device_free(out[i]);
        s.n = 0;
    }
    *n = s.n;
    if (n_cands) *n_cands = s.n_cands;
    return st;
}
