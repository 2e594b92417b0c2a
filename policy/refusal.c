/*
 * refusal.c — calibrations the profile cache refused, remembered so that
 * later runs back off (het/profile.h: het_calibrate_refusal).
 *
 * On a machine that is always busy every first-use calibration stays noisy
 * and is refused; without a memory of it every run would measure again
 * (10-25 s for a Vulkan device on lavapipe) and be refused again. The
 * record sits beside the profile it would have been, as a few lines of
 * text:
 *   het-calibration-refused 1
 *   needs 0123456789abcdef        (het_calibrate_needs_key, hex)
 *   count 2                       (refusals in a row)
 *   first 1764646000              (unix seconds)
 *   last 1764646600
 *   retry 1764647800              (last + het_calibrate_backoff_s(count))
 *   why 40 of 40 samples stayed disturbed ...
 * The file is untrusted input: every field is checked, in range and present
 * exactly once (fuzz/fuzz_profile_cache.c).
 *
 * Back-off: 10 min after the first refusal, doubling with each one in a
 * row, at most 24 h. A calibration costs 10-25 s here, so ten minutes keeps
 * its share of back-to-back runs under 5%; doubling lets a machine that is
 * never idle pay eight attempts in the first day (10 min .. 21 h after the
 * first), then one a day: the cap, so that a machine that became idle is
 * found within a day. `hetrun calibrate` always tries.
 */
#include "het/profile.h"
#include "policy/cache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "het-calibration-refused 1"

int64_t het_calibrate_backoff_s(int count)
{
    int64_t s = HET_CALIBRATE_BACKOFF_FIRST_S;
    for (int i = 1; i < count && s < HET_CALIBRATE_BACKOFF_MAX_S; i++) s *= 2;
    return s < HET_CALIBRATE_BACKOFF_MAX_S ? s : HET_CALIBRATE_BACKOFF_MAX_S;
}

static uint64_t hash_int(uint64_t h, long long v)
{
    char s[32];
    snprintf(s, sizeof s, "%lld", v);
    return het_cache_hash(h, s);
}

static uint64_t hash_shape(uint64_t h, const struct het_calibrate_shape *sh)
{
    h = hash_int(h, sh->type);
    h = hash_int(h, (long long)sh->k);
    h = hash_int(h, (long long)sh->n);
    return hash_int(h, sh->output);
}

uint64_t het_calibrate_needs_key(const struct het_calibrate_needs *n)
{
    uint64_t h = het_cache_hash(HET_CACHE_HASH_SEED, n ? "needs" : "generic");
    if (!n) return h;
    const int ns = n->n_shapes < HET_CALIBRATE_MAX_SHAPES ? n->n_shapes : HET_CALIBRATE_MAX_SHAPES;
    const int nm = n->n_moe_shapes < 4 ? n->n_moe_shapes : 4;
    for (int i = 0; i < ns; i++) h = hash_shape(h, &n->shapes[i]);
    const long long v[] = { n->row_width, n->head_dim, n->n_head, n->n_head_kv, n->max_rows, n->n_expert,
                            n->n_expert_used, n->no_softmax };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = hash_int(h, v[i]);
    for (int i = 0; i < nm; i++) h = hash_shape(h, &n->moe_shapes[i]);
    return h;
}

/* ---------------------------------------------------------------------------
 * the text                                                                  */

enum field { F_NEEDS, F_COUNT, F_FIRST, F_LAST, F_RETRY, F_WHY, F_COUNT_ };
static const char *const field_names[F_COUNT_] = { "needs", "count", "first", "last", "retry", "why" };

/* a decimal integer filling v[0..n), in [lo, hi] */
static bool parse_int(const char *v, size_t n, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end || end == buf || buf[0] == ' ' || buf[0] == '+' || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static bool parse_hex64(const char *v, size_t n, uint64_t *out)
{
    if (n != 16) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    return true;
}

#define MAX_TIME_S ((int64_t)1 << 40) /* beyond any clock */

enum het_status het_calibrate_refusal_parse(const char *text, size_t len, struct het_calibrate_refusal *out,
                                            het_error *err)
{
    memset(out, 0, sizeof *out);
    bool seen[F_COUNT_] = { false };
    size_t at = 0;
    for (int line = 1; at < len; line++) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + (nl != NULL);
        if (line == 1) {
            if (n != strlen(MAGIC) || memcmp(s, MAGIC, n))
                return het_error_set(err, HET_ERR_INVALID, "line 1: not a refusal record (expected '%s')", MAGIC);
            continue;
        }
        if (n == 0 && at >= len) break; /* the final newline */
        const char *sp = memchr(s, ' ', n);
        if (!sp) return het_error_set(err, HET_ERR_INVALID, "line %d: expected 'field value'", line);
        size_t kn = (size_t)(sp - s), vn = n - kn - 1;
        const char *v = sp + 1;
        int f = 0;
        while (f < F_COUNT_ && !(strlen(field_names[f]) == kn && !memcmp(s, field_names[f], kn))) f++;
        if (f == F_COUNT_) return het_error_set(err, HET_ERR_INVALID, "line %d: unknown field", line);
        if (seen[f]) return het_error_set(err, HET_ERR_INVALID, "line %d: %s given twice", line, field_names[f]);
        seen[f] = true;
        int64_t x = 0;
        bool ok = true;
        switch ((enum field)f) {
        case F_NEEDS: ok = parse_hex64(v, vn, &out->needs_key); break;
        case F_COUNT: ok = parse_int(v, vn, 1, 1000000, &x); out->count = (int)x; break;
        case F_FIRST: ok = parse_int(v, vn, 0, MAX_TIME_S, &out->first_s); break;
        case F_LAST:  ok = parse_int(v, vn, 0, MAX_TIME_S, &out->last_s); break;
        case F_RETRY: ok = parse_int(v, vn, 0, MAX_TIME_S, &out->retry_s); break;
        case F_WHY:
            ok = vn < sizeof out->why && !memchr(v, 0, vn);
            if (ok) memcpy(out->why, v, vn);
            break;
        case F_COUNT_: break;
        }
        if (!ok) return het_error_set(err, HET_ERR_INVALID, "line %d: bad %s", line, field_names[f]);
    }
    if (at == 0) return het_error_set(err, HET_ERR_INVALID, "empty");
    for (int f = 0; f < F_COUNT_; f++)
        if (!seen[f]) return het_error_set(err, HET_ERR_INVALID, "%s missing (truncated?)", field_names[f]);
    if (out->first_s > out->last_s || out->retry_s < out->last_s ||
        out->retry_s - out->last_s > HET_CALIBRATE_BACKOFF_MAX_S)
        return het_error_set(err, HET_ERR_INVALID, "first, last and retry out of order");
    return HET_OK;
}

enum het_status het_calibrate_refusal_format(const struct het_calibrate_refusal *r, char *buf, size_t size,
                                             het_error *err)
{
    char why[sizeof r->why];
    snprintf(why, sizeof why, "%s", r->why);
    for (char *c = why; *c; c++)
        if (*c == '\n') *c = ' '; /* one line */
    int n = snprintf(buf, size, MAGIC "\nneeds %016" PRIx64 "\ncount %d\nfirst %" PRId64 "\nlast %" PRId64
                     "\nretry %" PRId64 "\nwhy %s\n", r->needs_key, r->count, r->first_s, r->last_s, r->retry_s, why);
    if (n < 0 || (size_t)n >= size) return het_error_set(err, HET_ERR_INVALID, "refusal record: buffer too small");
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * the file                                                                  */

static enum het_status record_path(const het_device *dev, char *buf, size_t size, het_error *err)
{
    enum het_status st = het_profile_cache_path(het_device_name(dev), het_device_description(dev), buf, size, err);
    if (st != HET_OK) return st;
    size_t n = strlen(buf);
    if (n < 5 || strcmp(buf + n - 5, ".json") || n + 3 >= size)
        return het_error_set(err, HET_ERR_INVALID, "refusal record: unexpected cache path %s", buf);
    snprintf(buf + n - 5, size - (n - 5), ".refused");
    return HET_OK;
}

enum het_status het_calibrate_refusal_load(const het_device *dev, struct het_calibrate_refusal *out, bool *found,
                                           het_error *err)
{
    *found = false;
    memset(out, 0, sizeof *out);
    char path[4096];
    enum het_status st = record_path(dev, path, sizeof path, err);
    if (st != HET_OK) return st;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return HET_OK;
        return het_error_set(err, HET_ERR_IO, "refusal record %s: %s", path, strerror(errno));
    }
    char text[2048];
    size_t n = fread(text, 1, sizeof text, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad) return het_error_set(err, HET_ERR_IO, "refusal record %s: cannot read it", path);
    if (n == sizeof text) return het_error_set(err, HET_ERR_INVALID, "refusal record %s: too long", path);
    het_error perr = { 0 };
    if (het_calibrate_refusal_parse(text, n, out, &perr) != HET_OK) {
        memset(out, 0, sizeof *out);
        return het_error_set(err, HET_ERR_INVALID, "refusal record %s: %s", path, perr.msg);
    }
    *found = true;
    return HET_OK;
}

enum het_status het_calibrate_refusal_record(const het_device *dev, uint64_t needs_key, const char *why, int64_t now_s,
                                             struct het_calibrate_refusal *out, het_error *err)
{
    struct het_calibrate_refusal r, prev;
    bool found = false;
    het_error lerr = { 0 };
    if (het_calibrate_refusal_load(dev, &prev, &found, &lerr) != HET_OK) found = false; /* replaced below */
    if (found && prev.needs_key == needs_key && prev.last_s <= now_s) {
        r = prev;
        r.count = prev.count < 1000000 ? prev.count + 1 : prev.count;
    } else {
        memset(&r, 0, sizeof r);
        r.needs_key = needs_key;
        r.count = 1;
        r.first_s = now_s;
    }
    r.last_s = now_s;
    r.retry_s = now_s + het_calibrate_backoff_s(r.count);
    snprintf(r.why, sizeof r.why, "%s", why ? why : "");
    if (out) *out = r;
    char dir[3072], path[4096], tmp[4200], text[1024];
    enum het_status st = het_cache_dir(dir, sizeof dir, "profile cache", err);
    if (st == HET_OK) st = het_cache_mkdir(dir, "profile cache", err);
    if (st == HET_OK) st = record_path(dev, path, sizeof path, err);
    if (st == HET_OK) st = het_calibrate_refusal_format(&r, text, sizeof text, err);
    if (st != HET_OK) return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return het_error_set(err, HET_ERR_IO, "refusal record: cannot write %s: %s", tmp, strerror(errno));
    bool ok = fputs(text, f) != EOF;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) { /* readers never see half a record */
        int e = errno;
        unlink(tmp);
        return het_error_set(err, HET_ERR_IO, "refusal record: cannot write %s: %s", path, strerror(e));
    }
    return HET_OK;
}

enum het_status het_calibrate_refusal_clear(const het_device *dev, het_error *err)
{
    char path[4096];
    enum het_status st = record_path(dev, path, sizeof path, err);
    if (st != HET_OK) return st;
    if (unlink(path) != 0 && errno != ENOENT)
        return het_error_set(err, HET_ERR_IO, "refusal record: cannot remove %s: %s", path, strerror(errno));
    return HET_OK;
}
