/*
 * test_cpu_stream.c — the CPU device's choice of hint for decode's weight
 * stream (devices/cpu/cpu_stream.c), from the hand-off it measures between
 * its threads:
 *   - HET_CPU_STREAM's values: auto (also unset or empty), nta and t0 fix
 *     the hint, anything else is refused with a message naming the value;
 *   - in auto: far measures (two last-level caches) choose T0, near ones
 *     NTA, by the median of the last three splits, so one split's odd
 *     measure does not flip the choice; a split with too few waits to tell
 *     leaves it; every split is counted under the hint it ran with;
 *   - a fixed hint never moves, whatever the measures.
 */
#include <string.h>

#include "devices/cpu/cpu_stream.h"
#include "testutil.h"

static void parse(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    CHECK(het_cpu_stream_init(&s, NULL, &err) == HET_OK && s.mode == HET_CPU_STREAM_AUTO &&
          s.hint == HET_CPU_STREAM_NTA, "unset: auto, starting with NTA");
    CHECK(het_cpu_stream_init(&s, "", &err) == HET_OK && s.mode == HET_CPU_STREAM_AUTO, "empty: auto");
    CHECK(het_cpu_stream_init(&s, "auto", &err) == HET_OK && s.mode == HET_CPU_STREAM_AUTO, "auto");
    CHECK(het_cpu_stream_init(&s, "t0", &err) == HET_OK && s.mode == HET_CPU_STREAM_FIXED &&
          s.hint == HET_CPU_STREAM_T0, "t0: fixed T0");
    CHECK(het_cpu_stream_init(&s, "nta", &err) == HET_OK && s.mode == HET_CPU_STREAM_FIXED &&
          s.hint == HET_CPU_STREAM_NTA, "nta: fixed NTA");
    CHECK(het_cpu_stream_init(&s, "T1", &err) == HET_ERR_INVALID && strstr(err.msg, "HET_CPU_STREAM='T1'"),
          "an unknown value refused, naming it: '%s'", err.msg);
}

static void choose(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int64_t far = (int64_t)het_cpu_stream_far_ns(), near = far / 3;
    CHECK(far > 0, "a threshold");
    het_cpu_stream_init(&s, "auto", &err);
    het_cpu_stream_update(&s, far * 2, 3); /* too few waits: nothing learnt */
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.handoff_ns == 0, "3 waits: the choice stays");
    het_cpu_stream_update(&s, far * 2, 100);
    CHECK(s.hint == HET_CPU_STREAM_T0 && s.handoff_ns == (double)(far * 2), "far: T0");
    het_cpu_stream_update(&s, near, 100); /* fewer than three measures: the last one */
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.handoff_ns == (double)near, "far, near: NTA");
    het_cpu_stream_update(&s, far + 10, 100);
    CHECK(s.hint == HET_CPU_STREAM_T0, "far, near, far: T0 (median %.0f ns)", s.handoff_ns);
    het_cpu_stream_update(&s, near, 100);
    CHECK(s.hint == HET_CPU_STREAM_NTA, "near, far, near: NTA (median %.0f ns)", s.handoff_ns);
    het_cpu_stream_update(&s, near, 100);
    het_cpu_stream_update(&s, far * 3, 100); /* one odd split */
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.handoff_ns == (double)near, "near, near, one far: NTA");
    het_cpu_stream_update(&s, far, 100);
    CHECK(s.hint == HET_CPU_STREAM_T0, "near, far, far (at the threshold): T0");
    /* the 8 splits ran with NTA, NTA, T0, NTA, T0, NTA, NTA, NTA (each with the hint chosen before it) */
    CHECK(s.splits[HET_CPU_STREAM_NTA] == 6 && s.splits[HET_CPU_STREAM_T0] == 2,
          "splits counted by the hint they ran with: NTA %llu, T0 %llu", (unsigned long long)s.splits[0],
          (unsigned long long)s.splits[1]);
    het_cpu_stream_init(&s, "nta", &err);
    for (int i = 0; i < 5; i++) het_cpu_stream_update(&s, far * 4, 100);
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.splits[HET_CPU_STREAM_NTA] == 5 && s.handoff_ns == (double)(far * 4),
          "fixed: NTA whatever the measure (which is still kept)");
}

int main(void)
{
    parse();
    choose();
    return het_test_finish();
}
