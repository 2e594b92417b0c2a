/*
 * cpu_stream.c — which hint decode's weight stream asks ahead with (NTA or
 * T0, het_cpu_stream), chosen split by split from where the device's
 * threads run.
 *
 * A decode token reads every weight byte once, and each block of a run of
 * panels asks for the lines a few KB ahead of it. Asked for with NTA the
 * lines do not stay in L2 and L3 on their way out, which keeps the KV cache
 * and the small nodes' vectors where they were: on a machine whose two
 * threads share one L3 (one AMD CCD) that was 2-3% a token faster than T0
 * for Q8_0 (session 31). With the threads on two CCDs each has its own
 * link to memory, and there asking with T0 streamed faster: token time
 * T0 / NTA on Zen 5, clean builds alternating, Q8_0 1.07 (23 pairs), Q6_K
 * 1.036 and Q4_K_M 1.022 (49 pairs each), Q4_0 ~1.01 (bench/README.md,
 * sessions 31-32).
 *
 * Where the threads run is not something the device can read from the
 * topology: a VM's vCPUs move between placements its guest cannot see (the
 * Zen 5 VM here changes between one CCD and two within seconds). So the
 * device measures it as it runs: the thread that closes a step stamps the
 * time next to the step word (cpu_sync.c), and a thread spinning on that
 * word takes the time from the stamp to seeing the close. The least of a
 * split's such waits (~100 of them in a Qwen3-0.6B decode token) is the
 * hand-off of a cache line there and back, with the clock's own cost: on
 * the Zen 5 VM 64-75 ns with both threads on one CCD, 230-260 ns on two
 * (a split now and then 100-130: a wait that began as the close landed).
 * The median of the last three splits' measures, HET_CPU_STREAM_FAR_NS or
 * more, has the next split ask with T0, less with NTA; a split with too few
 * spinning waits to tell (one thread, small nodes) leaves the choice as it
 * was. HET_CPU_STREAM=nta or t0 fixes the hint (A/B runs);
 * the arithmetic is the same either way, only the hints differ.
 */
#include "devices/cpu/cpu_stream.h"

#include <string.h>

/* Least close-to-seen time, ns, from which two threads are taken to sit on
 * two last-level caches. */
#define HET_CPU_STREAM_FAR_NS 150
/* Spinning waits a split needs before its measure counts. */
#define HET_CPU_STREAM_MIN_WAITS 8

const char *het_cpu_stream_name(enum het_cpu_stream hint)
{
    switch (hint) {
    case HET_CPU_STREAM_NTA: return "nta";
    case HET_CPU_STREAM_T0: return "t0";
    case HET_CPU_STREAM_COUNT: break;
    }
    return "?";
}

enum het_status het_cpu_stream_init(struct het_cpu_stream_choice *s, const char *env, het_error *err)
{
    memset(s, 0, sizeof *s);
    s->mode = HET_CPU_STREAM_AUTO;
    s->hint = HET_CPU_STREAM_NTA;
    if (!env || !*env || !strcmp(env, "auto")) return HET_OK;
    for (int h = 0; h < HET_CPU_STREAM_COUNT; h++)
        if (!strcmp(env, het_cpu_stream_name((enum het_cpu_stream)h))) {
            s->mode = HET_CPU_STREAM_FIXED;
            s->hint = (enum het_cpu_stream)h;
            return HET_OK;
        }
    return het_error_set(err, HET_ERR_INVALID, "cpu: HET_CPU_STREAM='%s': expected auto, nta or t0", env);
}

double het_cpu_stream_far_ns(void) { return HET_CPU_STREAM_FAR_NS; }

void het_cpu_stream_update(struct het_cpu_stream_choice *s, int64_t min_ns, int n)
{
    s->splits[s->hint]++;
    if (n < HET_CPU_STREAM_MIN_WAITS) return;
    s->last[s->at] = min_ns;
    s->at = (s->at + 1) % 3;
    if (s->n_last < 3) s->n_last++;
    int64_t m = min_ns; /* the median of the last three (of what there is) */
    if (s->n_last >= 3) {
        const int64_t a = s->last[0], b = s->last[1], c = s->last[2];
        m = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
    }
    s->handoff_ns = (double)m;
    if (s->mode == HET_CPU_STREAM_AUTO) s->hint = m >= HET_CPU_STREAM_FAR_NS ? HET_CPU_STREAM_T0 : HET_CPU_STREAM_NTA;
}
