/*
 * profile_json.c — profiles as JSON files, and the per-device cache folder.
 *
 * One profile is one object:
 *   { "format": "het-profile", "version": 1, "het_version": "0.1.0",
 *     "device": { "name", "description", "kind", "emulated" },
 *     "measured": bool, "label": "...",
 *     "costs": { "split_us", "kernel_switch_us", "async", "peak_gbps", "peak_gflops",
 *                "lossy", "shares_cpu_cores" (optional, default false) },
 *     "models": [ { "op": "matmul", "type": "q4_0",
 *                   "fit": { "t0_us", "gbps", "gflops", "m_half", "error",
 *                            "knots": [[m, gflops], ...] (optional) } | null,
 *                   "samples": [ { "m", "flops", "bytes", "us", "spread"[, "calls"] } ] } ],
 *     "handoffs": [ { "to": "vulkan0", "fixed_us", "gbps" } ],
 *     "history": [ { "op", "type", "m_bucket", "size_bucket", "n_obs", "ratios": [...],
 *                    "applied": ratio | null } ] (optional: learned while used, history.c) }
 * A set file is { "format": "het-profile-set", "version": 1, "profiles": [ ... ] }.
 * Errors name the offending field by its path ("models[2].fit.gbps").
 * Files are written to a temporary name and renamed, so a reader never sees
 * half a profile. Built on jansson; without it these calls report
 * HET_ERR_UNSUPPORTED.
 */
#include "policy/profile_impl.h"

#include "policy/cache.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_VERSION 1


/* ---------------------------------------------------------------------------
 * cache paths (no JSON needed)                                              */

enum het_status het_profile_cache_path(const char *dev_name, const char *dev_desc, char *buf, size_t size,
                                       het_error *err)
{
    char dir[3072];
    enum het_status st = het_cache_dir(dir, sizeof dir, "profile cache", err);
    if (st != HET_OK) return st;
    uint64_t h = het_cache_hash(het_cache_hash(het_cache_hash(HET_CACHE_HASH_SEED, dev_name), dev_desc), HET_VERSION);
    char name[40];
    snprintf(name, sizeof name, "%s", dev_name);
    for (char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
            *c = '_';
    int n = snprintf(buf, size, "%s/%s-%016llx.json", dir, name, (unsigned long long)h);
    if (n < 0 || (size_t)n >= size) return het_error_set(err, HET_ERR_INVALID, "profile cache: path too long");
    return HET_OK;
}

het_profile *het_profile_cache_load(const het_device *dev, het_error *err)
{
    char path[4096];
    if (het_profile_cache_path(het_device_name(dev), het_device_description(dev), path, sizeof path, err) != HET_OK)
        return NULL;
    if (access(path, R_OK) != 0) {
        het_error_set(err, HET_ERR_IO, "no profile for %s yet (%s)", het_device_name(dev), path);
        return NULL;
    }
    het_profile *p = het_profile_load(path, err);
    if (p && !het_profile_matches(p, dev)) {
        het_error_set(err, HET_ERR_IO, "profile %s is stale (device or het version changed)", path);
        het_profile_free(p);
        return NULL;
    }
    if (p) het_profile_set_caps(p, het_device_get_caps(dev)); /* the device's word, whatever the file said */
    return p;
}

enum het_status het_profile_cache_store(const het_profile *p, het_error *err)
{
    if (p->noisy[0])
        return het_error_set(err, HET_ERR_INVALID, "profile of %s not cached: %s", p->name, p->noisy);
    char dir[3072], path[4096];
    enum het_status st = het_cache_dir(dir, sizeof dir, "profile cache", err);
    if (st == HET_OK) st = het_cache_mkdir(dir, "profile cache", err);
    if (st == HET_OK) st = het_profile_cache_path(p->name, p->desc, path, sizeof path, err);
    if (st == HET_OK) st = het_profile_save(p, path, err);
    return st;
}

#ifdef HET_HAVE_JANSSON
#include <jansson.h>

static const char *const kind_names[HET_DEVICE_KIND_COUNT] = { "cpu", "vulkan", "npu" };

static enum het_status write_atomically(const char *path, const char *text, het_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return het_error_set(err, HET_ERR_IO, "profile: cannot write %s: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return het_error_set(err, HET_ERR_IO, "profile: cannot write %s: %s", path, strerror(e));
    }
    return HET_OK;
}

static char *read_all(const char *path, size_t *len, het_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        het_error_set(err, HET_ERR_IO, "profile: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        het_error_set(err, bad ? HET_ERR_IO : HET_ERR_NOMEM, "profile: cannot read %s", path);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}


/* ---------------------------------------------------------------------------
 * writing                                                                   */

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *fit_json(const struct het_cost_fit *f)
{
    json_t *knots = json_array();
    for (int i = 0; knots && i < f->n_knots; i++)
        json_array_append_new(knots, json_pack("[f, f]", f->knot_m[i], f->knot_gflops[i]));
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "t0_us", num_or_null(f->t0_us), "gbps", num_or_null(f->gbps),
                     "gflops", num_or_null(f->gflops), "m_half", num_or_null(f->m_half), "error",
                     num_or_null(f->error), "knots", knots);
}

static json_t *model_json(const struct het_profile_model *m)
{
    json_t *samples = json_array();
    for (int i = 0; samples && i < m->n_samples; i++) {
        const struct het_profile_sample *s = &m->samples[i];
        json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o}", "m", num_or_null(s->m), "flops", num_or_null(s->flops),
                              "bytes", num_or_null(s->bytes), "us", num_or_null(s->us), "spread",
                              num_or_null(s->spread));
        if (o && s->calls > 1) json_object_set_new(o, "calls", json_real(s->calls)); /* moe: experts hit */
        json_array_append_new(samples, o);
    }
    return json_pack("{s:s, s:s, s:o, s:o}", "op", het_op_class_name(m->cls), "type", het_type_name(m->wtype),
                     "fit", m->has_fit ? fit_json(&m->fit) : json_null(), "samples", samples);
}

static json_t *profile_json(const het_profile *p)
{
    json_t *models = json_array(), *handoffs = json_array();
    for (int i = 0; models && i < p->n_models; i++) json_array_append_new(models, model_json(&p->models[i]));
    for (int i = 0; handoffs && i < p->n_handoffs; i++) {
        const struct het_handoff *h = &p->handoffs[i];
        json_array_append_new(handoffs, json_pack("{s:s, s:o, s:o}", "to", h->to, "fixed_us",
                                                  num_or_null(h->fixed_us), "gbps", num_or_null(h->gbps)));
    }
    const struct het_profile_device_costs *c = &p->dc;
    json_t *hist = json_array();
    for (int i = 0; hist && i < p->n_hist; i++) {
        const struct het_history_entry *e = &p->hist[i];
        json_t *ratios = json_array();
        /* oldest first, so a reader that appends them restores the ring's order */
        for (int k = 0; ratios && k < e->n_ring; k++) {
            int at = (e->next - e->n_ring + k + 2 * HET_HISTORY_RING) % HET_HISTORY_RING;
            json_array_append_new(ratios, num_or_null(e->ratio[at]));
        }
        json_array_append_new(hist, json_pack("{s:s, s:s, s:i, s:i, s:i, s:o, s:o}", "op", het_op_class_name(e->cls),
                                              "type", het_type_name(e->wtype), "m_bucket", e->m_bucket,
                                              "size_bucket", e->size_bucket, "n_obs", e->n_obs, "ratios", ratios,
                                              "applied", num_or_null(e->applied)));
    }
    json_t *j = json_pack("{s:s, s:i, s:s, s:{s:s, s:s, s:s, s:b}, s:b, s:s, s:{s:o, s:o, s:b, s:o, s:o, s:b, s:b}, s:o, s:o}",
                     "format", "het-profile", "version", FORMAT_VERSION, "het_version", p->het_version, "device",
                     "name", p->name, "description", p->desc, "kind", kind_names[p->kind], "emulated", p->emulated,
                     "measured", p->measured, "label", p->label, "costs", "split_us", num_or_null(c->split_us),
                     "kernel_switch_us", num_or_null(c->kernel_switch_us), "async", c->async, "peak_gbps",
                     num_or_null(c->peak_gbps), "peak_gflops", num_or_null(c->peak_gflops), "lossy", c->lossy,
                     "shares_cpu_cores", c->shares_cpu_cores, "models", models,
                     "handoffs", handoffs);
    if (j && hist && p->n_hist) json_object_set(j, "history", hist);
    json_decref(hist);
    return j;
}

char *het_profile_to_json(const het_profile *p, het_error *err)
{
    json_t *j = profile_json(p);
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    if (!s) het_error_set(err, HET_ERR_NOMEM, "profile %s: cannot serialise", p->name);
    return s;
}

enum het_status het_profile_save(const het_profile *p, const char *path, het_error *err)
{
    char *s = het_profile_to_json(p, err);
    if (!s) return HET_ERR_NOMEM;
    enum het_status st = write_atomically(path, s, err);
    free(s);
    return st;
}

enum het_status het_profile_save_all(het_profile *const *p, int n, const char *path, het_error *err)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) json_array_append_new(arr, profile_json(p[i]));
    json_t *j = json_pack("{s:s, s:i, s:o}", "format", "het-profile-set", "version", FORMAT_VERSION, "profiles", arr);
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    if (!s) return het_error_set(err, HET_ERR_NOMEM, "profile set: cannot serialise");
    enum het_status st = write_atomically(path, s, err);
    free(s);
    return st;
}

/* ---------------------------------------------------------------------------
 * reading: every accessor names the field path on error                     */

struct reader {
    const char *origin;
    het_error  *err;
    bool        failed;
};

static void bad(struct reader *r, const char *path, const char *field, const char *what)
{
    if (r->failed) return;
    r->failed = true;
    het_error_set(r->err, HET_ERR_FORMAT, "profile %s: %s%s%s: %s", r->origin, path, *path ? "." : "", field, what);
}

static json_t *need(struct reader *r, json_t *obj, const char *path, const char *field)
{
    json_t *v = json_object_get(obj, field);
    if (!v) bad(r, path, field, "missing");
    return v;
}

/* a number (or null = NAN when nullable) */
static double get_num(struct reader *r, json_t *obj, const char *path, const char *field, bool nullable, double lo)
{
    json_t *v = need(r, obj, path, field);
    if (!v) return NAN;
    if (json_is_null(v) && nullable) return NAN;
    if (!json_is_number(v)) {
        bad(r, path, field, nullable ? "expected a number or null" : "expected a number");
        return NAN;
    }
    double x = json_number_value(v);
    if (!(x >= lo)) {
        char msg[64];
        snprintf(msg, sizeof msg, "%g is below the minimum %g", x, lo);
        bad(r, path, field, msg);
        return NAN;
    }
    return x;
}

static const char *get_str(struct reader *r, json_t *obj, const char *path, const char *field)
{
    json_t *v = need(r, obj, path, field);
    if (v && !json_is_string(v)) {
        bad(r, path, field, "expected a string");
        return NULL;
    }
    return v ? json_string_value(v) : NULL;
}

static bool get_bool(struct reader *r, json_t *obj, const char *path, const char *field)
{
    json_t *v = need(r, obj, path, field);
    if (v && !json_is_boolean(v)) bad(r, path, field, "expected true or false");
    return v && json_is_true(v);
}

/* an optional boolean: absent is false */
static bool get_opt_bool(struct reader *r, json_t *obj, const char *path, const char *field)
{
    return json_object_get(obj, field) ? get_bool(r, obj, path, field) : false;
}

static json_t *get_array(struct reader *r, json_t *obj, const char *path, const char *field)
{
    json_t *v = need(r, obj, path, field);
    if (v && !json_is_array(v)) {
        bad(r, path, field, "expected an array");
        return NULL;
    }
    return v;
}

static json_t *get_object(struct reader *r, json_t *obj, const char *path, const char *field)
{
    json_t *v = need(r, obj, path, field);
    if (v && !json_is_object(v)) {
        bad(r, path, field, "expected an object");
        return NULL;
    }
    return v;
}

static void read_device(struct reader *r, json_t *root, het_profile *p)
{
    json_t *d = get_object(r, root, "", "device");
    if (!d) return;
    const char *name = get_str(r, d, "device", "name"), *desc = get_str(r, d, "device", "description");
    const char *kind = get_str(r, d, "device", "kind");
    p->emulated = get_bool(r, d, "device", "emulated");
    if (r->failed) return;
    if (!*name || strlen(name) >= sizeof p->name) bad(r, "device", "name", "expected 1..31 characters");
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->desc, sizeof p->desc, "%s", desc);
    int k = -1;
    for (int i = 0; i < HET_DEVICE_KIND_COUNT; i++)
        if (!strcmp(kind, kind_names[i])) k = i;
    if (k < 0) bad(r, "device", "kind", "expected \"cpu\", \"vulkan\" or \"npu\"");
    else p->kind = (enum het_device_kind)k;
}

static void read_costs(struct reader *r, json_t *root, het_profile *p)
{
    json_t *c = get_object(r, root, "", "costs");
    if (!c) return;
    p->dc.split_us = get_num(r, c, "costs", "split_us", false, 0);
    p->dc.kernel_switch_us = get_num(r, c, "costs", "kernel_switch_us", false, 0);
    p->dc.async = get_bool(r, c, "costs", "async");
    p->dc.lossy = get_opt_bool(r, c, "costs", "lossy");
    p->dc.shares_cpu_cores = get_opt_bool(r, c, "costs", "shares_cpu_cores");
    p->dc.peak_gbps = get_num(r, c, "costs", "peak_gbps", true, 0);
    p->dc.peak_gflops = get_num(r, c, "costs", "peak_gflops", true, 0);
}

/* "knots": [[m, gflops], ...] with increasing m (optional: absent = smooth F(M)) */
static void read_knots(struct reader *r, json_t *f, const char *path, struct het_cost_fit *fit)
{
    json_t *arr = json_object_get(f, "knots");
    fit->n_knots = 0;
    if (!arr) return;
    if (!json_is_array(arr) || json_array_size(arr) > HET_FIT_MAX_KNOTS) {
        bad(r, path, "knots", "expected an array of at most 16 [m, gflops] pairs");
        return;
    }
    size_t i;
    json_t *k;
    json_array_foreach(arr, i, k) {
        json_t *m = json_array_get(k, 0), *g = json_array_get(k, 1);
        char field[32];
        snprintf(field, sizeof field, "knots[%zu]", i);
        if (!json_is_array(k) || json_array_size(k) != 2 || !json_is_number(m) || !json_is_number(g) ||
            !(json_number_value(m) > 0) || !(json_number_value(g) > 0) ||
            (i > 0 && !(json_number_value(m) > fit->knot_m[i - 1]))) {
            bad(r, path, field, "expected [m, gflops], positive, m increasing");
            return;
        }
        fit->knot_m[i] = json_number_value(m);
        fit->knot_gflops[i] = json_number_value(g);
        fit->n_knots = (int)i + 1;
    }
}

static void read_fit(struct reader *r, json_t *f, const char *path, struct het_cost_fit *fit)
{
    fit->t0_us = get_num(r, f, path, "t0_us", false, 0);
    fit->gbps = get_num(r, f, path, "gbps", false, 1e-9);
    fit->gflops = get_num(r, f, path, "gflops", false, 1e-9);
    fit->m_half = get_num(r, f, path, "m_half", false, 0);
    fit->error = get_num(r, f, path, "error", true, 0);
    if (!r->failed) read_knots(r, f, path, fit);
}

static void read_samples(struct reader *r, json_t *arr, const char *path, het_profile *p, enum het_op_class cls,
                         enum het_type type)
{
    size_t i;
    json_t *s;
    json_array_foreach(arr, i, s) {
        char sp[96];
        snprintf(sp, sizeof sp, "%s.samples[%zu]", path, i);
        if (!json_is_object(s)) {
            bad(r, sp, "", "expected an object");
            return;
        }
        struct het_profile_sample x = {
            .m = get_num(r, s, sp, "m", false, 0), .flops = get_num(r, s, sp, "flops", false, 0),
            .bytes = get_num(r, s, sp, "bytes", false, 0), .us = get_num(r, s, sp, "us", false, 0),
            .spread = get_num(r, s, sp, "spread", true, 0),
            /* optional: kernel calls (moe: the experts a sample hit) */
            .calls = json_object_get(s, "calls") ? get_num(r, s, sp, "calls", false, 0) : 0,
        };
        if (r->failed) return;
        if (het_profile_add_sample(p, cls, type, &x, r->err) != HET_OK) { r->failed = true; return; }
    }
}

static void read_models(struct reader *r, json_t *root, het_profile *p)
{
    json_t *arr = get_array(r, root, "", "models");
    size_t i;
    json_t *m;
    if (!arr) return;
    json_array_foreach(arr, i, m) {
        char path[48];
        snprintf(path, sizeof path, "models[%zu]", i);
        if (!json_is_object(m)) { bad(r, path, "", "expected an object"); return; }
        const char *op = get_str(r, m, path, "op"), *type = get_str(r, m, path, "type");
        if (r->failed) return;
        enum het_op_class cls = het_op_class_from_name(op);
        enum het_type t = het_type_from_name(type);
        if (cls == HET_OPCLASS_NONE) { bad(r, path, "op", "unknown op class"); return; }
        if (t == HET_TYPE_COUNT) { bad(r, path, "type", "unknown type"); return; }
        if (het_profile_model_get(p, cls, t)) { bad(r, path, "type", "a second model for this op and type"); return; }
        json_t *f = need(r, m, path, "fit"), *samples = get_array(r, m, path, "samples");
        if (r->failed) return;
        if (!json_is_null(f)) {
            char fp[64];
            snprintf(fp, sizeof fp, "%s.fit", path);
            if (!json_is_object(f)) { bad(r, path, "fit", "expected an object or null"); return; }
            struct het_cost_fit fit;
            read_fit(r, f, fp, &fit);
            if (r->failed) return;
            if (het_profile_set_fit(p, cls, t, &fit, r->err) != HET_OK) { r->failed = true; return; }
        }
        read_samples(r, samples, path, p, cls, t);
        if (r->failed) return;
    }
}

static void read_handoffs(struct reader *r, json_t *root, het_profile *p)
{
    json_t *arr = get_array(r, root, "", "handoffs");
    size_t i;
    json_t *h;
    if (!arr) return;
    json_array_foreach(arr, i, h) {
        char path[48];
        snprintf(path, sizeof path, "handoffs[%zu]", i);
        if (!json_is_object(h)) { bad(r, path, "", "expected an object"); return; }
        struct het_handoff x = { .fixed_us = get_num(r, h, path, "fixed_us", false, 0),
                                 .gbps = get_num(r, h, path, "gbps", false, 0) };
        const char *to = get_str(r, h, path, "to");
        if (r->failed) return;
        if (!*to || strlen(to) >= sizeof x.to) { bad(r, path, "to", "expected 1..31 characters"); return; }
        snprintf(x.to, sizeof x.to, "%s", to);
        if (het_profile_set_handoff(p, &x, r->err) != HET_OK) { r->failed = true; return; }
    }
}

static void read_history(struct reader *r, json_t *root, het_profile *p)
{
    json_t *arr = json_object_get(root, "history");
    if (!arr) return; /* optional: profiles not used since calibration have none */
    if (!json_is_array(arr)) { bad(r, "", "history", "expected an array"); return; }
    size_t i;
    json_t *h;
    json_array_foreach(arr, i, h) {
        char path[48];
        snprintf(path, sizeof path, "history[%zu]", i);
        if (!json_is_object(h)) { bad(r, path, "", "expected an object"); return; }
        const char *op = get_str(r, h, path, "op"), *type = get_str(r, h, path, "type");
        double mb = get_num(r, h, path, "m_bucket", false, 0), sb = get_num(r, h, path, "size_bucket", false, 0);
        double n = get_num(r, h, path, "n_obs", false, 0), applied = get_num(r, h, path, "applied", true, 0);
        json_t *ratios = get_array(r, h, path, "ratios");
        if (r->failed) return;
        enum het_op_class cls = het_op_class_from_name(op);
        enum het_type t = het_type_from_name(type);
        if (cls == HET_OPCLASS_NONE) { bad(r, path, "op", "unknown op class"); return; }
        if (t == HET_TYPE_COUNT) { bad(r, path, "type", "unknown type"); return; }
        if (mb > 30 || sb > 60) { bad(r, path, "m_bucket", "out of range"); return; }
        if (json_array_size(ratios) > HET_HISTORY_RING) { bad(r, path, "ratios", "more than the ring holds"); return; }
        struct het_history_entry *e = het_profile_history_add(p, cls, t, (int)mb, (int)sb, r->err);
        if (!e) { r->failed = true; return; }
        size_t k;
        json_t *v;
        json_array_foreach(ratios, k, v) {
            if (!json_is_number(v) || !(json_number_value(v) > 0)) { bad(r, path, "ratios", "expected positive numbers"); return; }
            e->ratio[e->n_ring++] = json_number_value(v);
        }
        e->next = e->n_ring % HET_HISTORY_RING;
        e->n_obs = (int)n;
        e->applied = isnan(applied) || applied > 0 ? applied : NAN;
    }
}

static het_profile *profile_from(struct reader *r, json_t *root)
{
    if (!json_is_object(root)) {
        bad(r, "", "(top level)", "expected an object");
        return NULL;
    }
    const char *format = get_str(r, root, "", "format");
    if (format && strcmp(format, "het-profile")) bad(r, "", "format", "expected \"het-profile\"");
    double version = get_num(r, root, "", "version", false, 0);
    if (!r->failed && version != FORMAT_VERSION) bad(r, "", "version", "unsupported format version (expected 1)");
    const char *hv = get_str(r, root, "", "het_version");
    if (r->failed) return NULL;
    het_profile *p = het_profile_new("?", "", HET_DEVICE_CPU, false);
    if (!p) {
        het_error_set(r->err, HET_ERR_NOMEM, "profile %s: out of memory", r->origin);
        return NULL;
    }
    snprintf(p->het_version, sizeof p->het_version, "%s", hv);
    read_device(r, root, p);
    if (!r->failed) p->measured = get_bool(r, root, "", "measured");
    const char *label = r->failed ? NULL : get_str(r, root, "", "label");
    if (label) snprintf(p->label, sizeof p->label, "%s", label);
    if (!r->failed) read_costs(r, root, p);
    if (!r->failed) read_models(r, root, p);
    if (!r->failed) read_handoffs(r, root, p);
    if (!r->failed) read_history(r, root, p);
    if (r->failed) {
        het_profile_free(p);
        return NULL;
    }
    return p;
}

static json_t *parse(const char *text, size_t len, const char *origin, het_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        het_error_set(err, HET_ERR_FORMAT, "profile %s: line %d column %d: %s", origin, je.line, je.column, je.text);
    return root;
}

het_profile *het_profile_from_json(const char *text, size_t len, const char *origin, het_error *err)
{
    json_t *root = parse(text, len, origin, err);
    if (!root) return NULL;
    struct reader r = { origin, err, false };
    het_profile *p = profile_from(&r, root);
    json_decref(root);
    return p;
}

enum het_status het_profile_load_all(const char *path, het_profile **out, int max, int *n, het_error *err)
{
    *n = 0;
    size_t len = 0;
    char *text = read_all(path, &len, err);
    if (!text) return err ? err->status : HET_ERR_IO;
    json_t *root = parse(text, len, path, err);
    free(text);
    if (!root) return HET_ERR_FORMAT;
    struct reader r = { path, err, false };
    json_t *set = json_is_object(root) ? json_object_get(root, "profiles") : NULL;
    if (!set) {
        het_profile *p = profile_from(&r, root);
        if (p && max >= 1) out[(*n)++] = p;
        else het_profile_free(p);
    } else if (!json_is_array(set)) {
        bad(&r, "", "profiles", "expected an array");
    } else {
        size_t i;
        json_t *e;
        json_array_foreach(set, i, e) {
            char origin[4200];
            snprintf(origin, sizeof origin, "%s: profiles[%zu]", path, i);
            struct reader ri = { origin, err, false };
            het_profile *p = profile_from(&ri, e);
            if (!p) { r.failed = true; break; }
            if (*n >= max) {
                het_profile_free(p);
                het_error_set(err, HET_ERR_INVALID, "profile %s: more than %d profiles", path, max);
                r.failed = true;
                break;
            }
            out[(*n)++] = p;
        }
    }
    json_decref(root);
    if (r.failed || *n == 0) {
        for (int i = 0; i < *n; i++) het_profile_free(out[i]);
        *n = 0;
        if (!r.failed) return het_error_set(err, HET_ERR_FORMAT, "profile %s: no profiles in the file", path);
        return err ? err->status : HET_ERR_FORMAT;
    }
    return HET_OK;
}

#else /* no jansson: profiles cannot be read or written */

char *het_profile_to_json(const het_profile *p, het_error *err)
{
    het_error_set(err, HET_ERR_UNSUPPORTED, "profile %s: built without jansson (apt-get install libjansson-dev)",
                  p->name);
    return NULL;
}

enum het_status het_profile_save(const het_profile *p, const char *path, het_error *err)
{
    return het_error_set(err, HET_ERR_UNSUPPORTED, "profile %s: built without jansson", path);
}

enum het_status het_profile_save_all(het_profile *const *p, int n, const char *path, het_error *err)
{
    return het_error_set(err, HET_ERR_UNSUPPORTED, "profile %s: built without jansson", path);
}

het_profile *het_profile_from_json(const char *text, size_t len, const char *origin, het_error *err)
{
    het_error_set(err, HET_ERR_UNSUPPORTED, "profile %s: built without jansson", origin);
    return NULL;
}

enum het_status het_profile_load_all(const char *path, het_profile **out, int max, int *n, het_error *err)
{
    *n = 0;
    return het_error_set(err, HET_ERR_UNSUPPORTED, "profile %s: built without jansson", path);
}
#endif

het_profile *het_profile_load(const char *path, het_error *err)
{
    het_profile *p[16] = { NULL };
    int n = 0;
    if (het_profile_load_all(path, p, 16, &n, err) != HET_OK) return NULL;
    for (int i = 1; i < n; i++) het_profile_free(p[i]); /* a set: its first */
    return p[0];
}
