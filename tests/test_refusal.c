/*
 * test_refusal.c — refused calibrations remembered in the profile cache
 * (policy/refusal.c): the back-off schedule, the record's text round trip,
 * every truncation and a set of damaged records rejected with the line at
 * fault, and record / load / clear on a real cache folder (the count goes
 * on for the same needs and starts again for other needs).
 * The CLI side (run, plan, calibrate) is tests/test_calibrate_refused.sh.
 */
#include "het/profile.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_backoff(void)
{
    CHECK(het_calibrate_backoff_s(1) == 600, "first back-off %lld", (long long)het_calibrate_backoff_s(1));
    CHECK(het_calibrate_backoff_s(2) == 1200, "second %lld", (long long)het_calibrate_backoff_s(2));
    CHECK(het_calibrate_backoff_s(4) == 4800, "fourth %lld", (long long)het_calibrate_backoff_s(4));
    CHECK(het_calibrate_backoff_s(8) == 76800, "eighth %lld", (long long)het_calibrate_backoff_s(8));
    CHECK(het_calibrate_backoff_s(9) == 86400, "ninth capped %lld", (long long)het_calibrate_backoff_s(9));
    CHECK(het_calibrate_backoff_s(1000000) == 86400, "capped");
    CHECK(het_calibrate_backoff_s(0) == 600, "count 0 is the first");
}

static void test_keys(void)
{
    struct het_calibrate_needs a = { .n_shapes = 1, .shapes = { { HET_TYPE_Q4_0, 1024, 3072, false } },
                                     .row_width = 1024, .head_dim = 128, .n_head = 16, .n_head_kv = 8 };
    struct het_calibrate_needs b = a;
    CHECK(het_calibrate_needs_key(&a) == het_calibrate_needs_key(&b), "same needs, same key");
    b.shapes[0].type = HET_TYPE_Q8_0;
    CHECK(het_calibrate_needs_key(&a) != het_calibrate_needs_key(&b), "another weight type, another key");
    b = a;
    b.row_width = 2048;
    CHECK(het_calibrate_needs_key(&a) != het_calibrate_needs_key(&b), "another width, another key");
    CHECK(het_calibrate_needs_key(NULL) != het_calibrate_needs_key(&a), "the generic set has its own key");
}

static void test_text(void)
{
    struct het_calibrate_refusal r = { .needs_key = 0x0123456789abcdefull, .count = 3, .first_s = 1700000000,
                                       .last_s = 1700003000, .retry_s = 1700003000 + 2400 };
    snprintf(r.why, sizeof r.why, "12 of 40 samples\nstayed disturbed");
    char text[1024];
    het_error err = { 0 };
    CHECK(het_calibrate_refusal_format(&r, text, sizeof text, &err) == HET_OK, "format: %s", err.msg);
    struct het_calibrate_refusal back;
    CHECK(het_calibrate_refusal_parse(text, strlen(text), &back, &err) == HET_OK, "parse: %s", err.msg);
    CHECK(back.needs_key == r.needs_key && back.count == 3 && back.first_s == r.first_s && back.last_s == r.last_s &&
          back.retry_s == r.retry_s, "round trip");
    CHECK(!strcmp(back.why, "12 of 40 samples stayed disturbed"), "why kept on one line: '%s'", back.why);

    /* every truncation short of the last field's end is refused, never read past */
    size_t len = strlen(text), cut_ok = 0;
    for (size_t n = 0; n < len; n++) {
        char *copy = malloc(n ? n : 1); /* exact size: ASan sees a read past it */
        memcpy(copy, text, n);
        het_error e = { 0 };
        if (het_calibrate_refusal_parse(copy, n, &back, &e) == HET_OK) cut_ok++;
        else CHECK(e.msg[0] != 0, "a refused truncation says why");
        free(copy);
    }
    /* only cuts inside the final "why" text (a shorter reason) can parse */
    const char *why_at = strstr(text, "\nwhy ") + 5;
    CHECK(cut_ok == len - (size_t)(why_at - text), "%zu truncations parsed", cut_ok);

    static const struct { const char *text, *expect; } bad[] = {
        { "het-calibration-refused 2\n", "line 1" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 0\nfirst 1\nlast 1\nretry 1\nwhy x\n", "line 3: bad count" },
        { "het-calibration-refused 1\nneeds 0123456789ABCDEF\ncount 1\nfirst 1\nlast 1\nretry 1\nwhy x\n", "line 2: bad needs" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst 1\nlast 1\nretry 1\nwhy x\ncount 2\n", "line 8: count given twice" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst 1\nlast 1\nretry 1\nwhy x\nwhen 3\n", "line 8: unknown field" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst 1\nlast 1\nretry 1\n", "why missing" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst 1\nlast 1\nretry 999999\nwhy x\n", "out of order" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst 5\nlast 1\nretry 1\nwhy x\n", "out of order" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1\nfirst -1\nlast 1\nretry 1\nwhy x\n", "line 4: bad first" },
        { "het-calibration-refused 1\nneeds 0123456789abcdef\ncount 1x\nfirst 1\nlast 1\nretry 1\nwhy x\n", "line 3: bad count" },
        { "", "empty" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        het_error e = { 0 };
        enum het_status st = het_calibrate_refusal_parse(bad[i].text, strlen(bad[i].text), &back, &e);
        CHECK(st == HET_ERR_INVALID && strstr(e.msg, bad[i].expect), "bad record %zu: '%s' (expected '%s')", i, e.msg,
              bad[i].expect);
    }
}

static void test_cache(void)
{
    char dir[] = "/tmp/het-test-refusal-XXXXXX";
    if (!mkdtemp(dir)) het_test_skip("mkdtemp failed");
    setenv("XDG_CACHE_HOME", dir, 1);
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(1, &err);
    if (!dev) het_test_skip("no CPU device: %s", err.msg);
    struct het_calibrate_refusal r;
    bool found = true;
    CHECK(het_calibrate_refusal_load(dev, &r, &found, &err) == HET_OK && !found, "no record yet: %s", err.msg);
    CHECK(het_calibrate_refusal_record(dev, 42, "busy", 1000, &r, &err) == HET_OK, "record: %s", err.msg);
    CHECK(r.count == 1 && r.first_s == 1000 && r.retry_s == 1600, "first refusal: count %d retry %lld", r.count,
          (long long)r.retry_s);
    CHECK(het_calibrate_refusal_record(dev, 42, "busy again", 2000, &r, &err) == HET_OK, "record: %s", err.msg);
    CHECK(r.count == 2 && r.first_s == 1000 && r.retry_s == 3200, "second in a row: count %d retry %lld", r.count,
          (long long)r.retry_s);
    struct het_calibrate_refusal l;
    CHECK(het_calibrate_refusal_load(dev, &l, &found, &err) == HET_OK && found, "load: %s", err.msg);
    CHECK(found && l.count == 2 && l.last_s == 2000 && !strcmp(l.why, "busy again"), "loaded as stored");
    CHECK(het_calibrate_refusal_record(dev, 43, "other model", 2100, &r, &err) == HET_OK && r.count == 1,
          "other needs start again at 1 (%d)", r.count);

    /* a damaged file: one error naming it, no record */
    char path[4096];
    CHECK(het_profile_cache_path(het_device_name(dev), het_device_description(dev), path, sizeof path, &err) == HET_OK,
          "path");
    strcpy(strstr(path, ".json"), ".refused");
    FILE *f = fopen(path, "r+");
    CHECK(f && ftruncate(fileno(f), 40) == 0, "truncate %s", path);
    if (f) fclose(f);
    err = (het_error){ 0 };
    CHECK(het_calibrate_refusal_load(dev, &l, &found, &err) == HET_ERR_INVALID && !found && strstr(err.msg, path) &&
          !strchr(err.msg, '\n'), "truncated record: '%s'", err.msg);
    CHECK(het_calibrate_refusal_record(dev, 43, "busy", 3000, &r, &err) == HET_OK && r.count == 1,
          "a damaged record is replaced");

    CHECK(het_calibrate_refusal_clear(dev, &err) == HET_OK, "clear: %s", err.msg);
    CHECK(het_calibrate_refusal_load(dev, &l, &found, &err) == HET_OK && !found, "cleared");
    CHECK(het_calibrate_refusal_clear(dev, &err) == HET_OK, "clearing nothing is fine");
    het_device_free(dev);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void)
{
    test_backoff();
    test_keys();
    test_text();
    test_cache();
    return het_test_finish();
}
