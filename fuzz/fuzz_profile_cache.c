/*
 * fuzz_profile_cache.c — libFuzzer target for what het reads back from its
 * profile cache folder: a device profile (JSON, het_profile_from_json) and
 * a refused-calibration record (text, het_calibrate_refusal_parse). The
 * first byte picks the reader; the rest is the file, in an exactly sized
 * buffer. A profile that parses is used as the planner uses it (every
 * model's fit, a prediction per model, the hand-offs, the history) and
 * written back and read again; a record that parses is formatted and read
 * again, and must come back equal. Any read past what a reader validated
 * shows up under ASan; a round trip that changes a record aborts.
 * Seeds: fuzz/corpus/profile/ (first byte 'r': a record, else a profile).
 *
 *   CC=clang cmake -S . -B build-fuzz -DHET_FUZZ=ON -DHET_VULKAN=OFF
 *   cmake --build build-fuzz --target fuzz_profile_cache
 *   build-fuzz/fuzz_profile_cache -max_total_time=60 /tmp/profile-corpus fuzz/corpus/profile
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "het/profile.h"

static void use_profile(const char *text, size_t len)
{
    het_error err = { 0 };
    het_profile *p = het_profile_from_json(text, len, "fuzz", &err);
    if (!p) return;
    volatile double sink = 0;
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        enum het_type t;
        struct het_cost_fit fit;
        int n = 0;
        if (!het_profile_model_at(p, i, &cls, &t, &fit, &n)) continue;
        struct het_op_cost c = { .cls = cls, .wtype = t, .flops = 2e6, .bytes = 1e6, .m = 4 };
        sink += het_profile_predict_cost(p, &c) + het_profile_predict_roofline(p, &c);
        het_profile_samples(p, cls, t, &n);
    }
    for (int i = 0; i < het_profile_n_handoffs(p); i++) sink += het_profile_handoff_at(p, i)->fixed_us;
    for (int i = 0; i < het_profile_n_history(p); i++) {
        struct het_history_info hi;
        if (het_profile_history_at(p, i, &hi)) sink += hi.estimate;
    }
    sink += strlen(het_profile_label(p)) + strlen(het_profile_device_name(p));
    (void)sink;
    char *again = het_profile_to_json(p, &err);
    if (again) {
        het_profile *q = het_profile_from_json(again, strlen(again), "fuzz round trip", &err);
        if (!q) abort(); /* what het writes, it must read */
        het_profile_free(q);
        free(again);
    }
    het_profile_free(p);
}

static void use_record(const char *text, size_t len)
{
    struct het_calibrate_refusal r, back;
    het_error err = { 0 };
    if (het_calibrate_refusal_parse(text, len, &r, &err) != HET_OK) return;
    char buf[1024];
    if (het_calibrate_refusal_format(&r, buf, sizeof buf, &err) != HET_OK) abort();
    if (het_calibrate_refusal_parse(buf, strlen(buf), &back, &err) != HET_OK) abort();
    if (back.needs_key != r.needs_key || back.count != r.count || back.first_s != r.first_s ||
        back.last_s != r.last_s || back.retry_s != r.retry_s || strcmp(back.why, r.why))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *text = malloc(size - 1 ? size - 1 : 1); /* exact size: no terminator to lean on */
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    if (data[0] == 'r') use_record(text, size - 1);
    else use_profile(text, size - 1);
    free(text);
    return 0;
}
