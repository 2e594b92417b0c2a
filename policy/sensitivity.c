/*
 * sensitivity.c — sensitivity tables (see het/accuracy.h): how much KL each
 * group of nodes costs on a lossy device, as JSON files in the profile
 * cache folder, so that a measurement (`hetrun plan --sensitivity measure`)
 * is made once per model and device and read by every later plan.
 * The planner only reads the struct; this file is the only one that knows
 * the file format. Built on jansson; without it load/save report
 * HET_ERR_UNSUPPORTED.
 */
#include "het/accuracy.h"

#include "policy/cache.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_NAME    "het-sensitivity"
#define FORMAT_VERSION 1

enum het_status het_sensitivity_add(struct het_sensitivity *s, const char *pattern, double kl, double top1,
                                    int32_t n_nodes, het_error *err)
{
    if (s->n_groups >= HET_SENSITIVITY_MAX)
        return het_error_set(err, HET_ERR_INVALID, "sensitivity: more than %d groups", HET_SENSITIVITY_MAX);
    struct het_sensitivity_group *g = &s->groups[s->n_groups];
    if (snprintf(g->pattern, sizeof g->pattern, "%s", pattern) >= (int)sizeof g->pattern || !pattern[0])
        return het_error_set(err, HET_ERR_INVALID, "sensitivity: pattern '%s' empty or longer than %zu", pattern,
                             sizeof g->pattern - 1);
    if (!(kl >= 0) || !isfinite(kl))
        return het_error_set(err, HET_ERR_INVALID, "sensitivity: group '%s': KL %g is not a finite number >= 0",
                             pattern, kl);
    g->kl = kl;
    g->top1 = top1;
    g->n_nodes = n_nodes;
    s->n_groups++;
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * cache path                                                                */

enum het_status het_sensitivity_cache_path(const char *model_id, const char *device, char *buf, size_t size,
                                           het_error *err)
{
    char dir[3072];
    enum het_status st = het_cache_dir(dir, sizeof dir, "sensitivity cache", err);
    if (st != HET_OK) return st;
    uint64_t h = het_cache_hash(het_cache_hash(het_cache_hash(HET_CACHE_HASH_SEED, model_id), device), HET_VERSION);
    int n = snprintf(buf, size, "%s/sensitivity-%016llx.json", dir, (unsigned long long)h);
    if (n < 0 || (size_t)n >= size) return het_error_set(err, HET_ERR_INVALID, "sensitivity cache: path too long");
    return HET_OK;
}

enum het_status het_sensitivity_cache_store(const struct het_sensitivity *s, const char *model_id, het_error *err)
{
    char dir[3072], path[4096];
    enum het_status st = het_cache_dir(dir, sizeof dir, "sensitivity cache", err);
    if (st == HET_OK) st = het_cache_mkdir(dir, "sensitivity cache", err);
    if (st == HET_OK) st = het_sensitivity_cache_path(model_id, s->device, path, sizeof path, err);
    if (st == HET_OK) st = het_sensitivity_save(s, path, err);
    return st;
}

#ifdef HET_HAVE_JANSSON
#include <jansson.h>

/* ---------------------------------------------------------------------------
 * writing                                                                   */

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *to_json(const struct het_sensitivity *s)
{
    json_t *groups = json_array();
    for (int i = 0; groups && i < s->n_groups; i++) {
        const struct het_sensitivity_group *g = &s->groups[i];
        json_array_append_new(groups, json_pack("{s:s, s:o, s:o, s:i}", "pattern", g->pattern, "kl",
                                                num_or_null(g->kl), "top1", num_or_null(g->top1), "nodes",
                                                (json_int_t)g->n_nodes));
    }
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:b, s:s, s:i, s:o}", "format", FORMAT_NAME, "version",
                     FORMAT_VERSION, "het_version", HET_VERSION, "model", s->model, "device", s->device, "measured",
                     s->measured, "label", s->label, "positions", (json_int_t)s->n_positions, "groups", groups);
}

enum het_status het_sensitivity_save(const struct het_sensitivity *s, const char *path, het_error *err)
{
    json_t *root = to_json(s);
    char *text = root ? json_dumps(root, JSON_INDENT(1)) : NULL;
    json_decref(root);
    if (!text) return het_error_set(err, HET_ERR_NOMEM, "sensitivity %s: out of memory", path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    enum het_status st = HET_OK;
    if (!f) {
        st = het_error_set(err, HET_ERR_IO, "sensitivity: cannot write %s: %s", tmp, strerror(errno));
    } else {
        size_t len = strlen(text);
        bool ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            st = het_error_set(err, HET_ERR_IO, "sensitivity: cannot write %s: %s", path, strerror(errno));
            unlink(tmp);
        }
    }
    free(text);
    return st;
}

/* ---------------------------------------------------------------------------
 * reading                                                                   */

struct reader { const char *origin; het_error *err; };

static enum het_status bad(const struct reader *r, const char *field, const char *what)
{
    return het_error_set(r->err, HET_ERR_FORMAT, "sensitivity %s: %s: %s", r->origin, field, what);
}

static enum het_status get_str(const struct reader *r, json_t *obj, const char *key, char *buf, size_t size,
                               bool required)
{
    json_t *v = json_object_get(obj, key);
    if (!v && !required) return HET_OK;
    if (!json_is_string(v)) return bad(r, key, "expected a string");
    if (snprintf(buf, size, "%s", json_string_value(v)) >= (int)size) return bad(r, key, "too long");
    return HET_OK;
}

static enum het_status read_group(const struct reader *r, json_t *g, int i, struct het_sensitivity *out)
{
    char field[64];
    static const char *const known[] = { "pattern", "kl", "top1", "nodes" };
    const char *key;
    json_t *v;
    json_object_foreach(g, key, v) {
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) ok |= !strcmp(key, known[k]);
        snprintf(field, sizeof field, "groups[%d].%s", i, key);
        if (!ok) return bad(r, field, "unknown field");
    }
    json_t *pat = json_object_get(g, "pattern"), *kl = json_object_get(g, "kl"), *top = json_object_get(g, "top1"),
           *nodes = json_object_get(g, "nodes");
    snprintf(field, sizeof field, "groups[%d].pattern", i);
    if (!json_is_string(pat) || !json_string_value(pat)[0]) return bad(r, field, "expected a non-empty string");
    snprintf(field, sizeof field, "groups[%d].kl", i);
    if (!json_is_number(kl) || !(json_number_value(kl) >= 0)) return bad(r, field, "expected a number >= 0");
    snprintf(field, sizeof field, "groups[%d].top1", i);
    if (top && !json_is_null(top) && !json_is_number(top)) return bad(r, field, "expected a number or null");
    snprintf(field, sizeof field, "groups[%d].nodes", i);
    if (nodes && !json_is_integer(nodes)) return bad(r, field, "expected an integer");
    het_error e2 = { 0 };
    if (het_sensitivity_add(out, json_string_value(pat), json_number_value(kl),
                            json_is_number(top) ? json_number_value(top) : NAN,
                            nodes ? (int32_t)json_integer_value(nodes) : 0, &e2) != HET_OK) {
        snprintf(field, sizeof field, "groups[%d]", i);
        return bad(r, field, e2.msg);
    }
    return HET_OK;
}

static enum het_status from_root(const struct reader *r, json_t *root, struct het_sensitivity *out)
{
    if (!json_is_object(root)) return bad(r, "(top level)", "expected an object");
    json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), FORMAT_NAME))
        return bad(r, "format", "expected \"" FORMAT_NAME "\"");
    if (!json_is_integer(ver) || json_integer_value(ver) != FORMAT_VERSION) return bad(r, "version", "expected 1");
    enum het_status st = get_str(r, root, "model", out->model, sizeof out->model, false);
    if (st == HET_OK) st = get_str(r, root, "device", out->device, sizeof out->device, true);
    if (st == HET_OK) st = get_str(r, root, "label", out->label, sizeof out->label, false);
    if (st != HET_OK) return st;
    json_t *meas = json_object_get(root, "measured"), *pos = json_object_get(root, "positions");
    if (meas && !json_is_boolean(meas)) return bad(r, "measured", "expected true or false");
    if (pos && (!json_is_integer(pos) || json_integer_value(pos) < 0))
        return bad(r, "positions", "expected an integer >= 0");
    out->measured = json_is_true(meas);
    out->n_positions = pos ? (int32_t)json_integer_value(pos) : 0;
    json_t *groups = json_object_get(root, "groups");
    if (!json_is_array(groups)) return bad(r, "groups", "expected an array");
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g) {
        if (!json_is_object(g)) {
            char field[32];
            snprintf(field, sizeof field, "groups[%zu]", i);
            return bad(r, field, "expected an object");
        }
        st = read_group(r, g, (int)i, out);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

enum het_status het_sensitivity_from_json(const char *text, size_t len, const char *origin,
                                          struct het_sensitivity *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        return het_error_set(err, HET_ERR_FORMAT, "sensitivity %s: line %d: %s", origin, je.line, je.text);
    struct reader r = { origin, err };
    enum het_status st = from_root(&r, root, out);
    json_decref(root);
    if (st != HET_OK) memset(out, 0, sizeof *out);
    return st;
}

enum het_status het_sensitivity_load(const char *path, struct het_sensitivity *out, het_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return het_error_set(err, HET_ERR_IO, "sensitivity: cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap >= (64u << 20)) break;
        char *nb = realloc(buf, 2 * cap);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (!buf || failed) {
        free(buf);
        return het_error_set(err, failed ? HET_ERR_IO : HET_ERR_NOMEM, "sensitivity: cannot read %s", path);
    }
    enum het_status st = het_sensitivity_from_json(buf, n, path, out, err);
    free(buf);
    return st;
}

#else /* no jansson */

enum het_status het_sensitivity_save(const struct het_sensitivity *s, const char *path, het_error *err)
{
    (void)s;
    return het_error_set(err, HET_ERR_UNSUPPORTED, "sensitivity %s: built without jansson", path);
}

enum het_status het_sensitivity_from_json(const char *text, size_t len, const char *origin,
                                          struct het_sensitivity *out, het_error *err)
{
    (void)text;
    (void)len;
    memset(out, 0, sizeof *out);
    return het_error_set(err, HET_ERR_UNSUPPORTED, "sensitivity %s: built without jansson", origin);
}

enum het_status het_sensitivity_load(const char *path, struct het_sensitivity *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    return het_error_set(err, HET_ERR_UNSUPPORTED, "sensitivity %s: built without jansson", path);
}
#endif
