/*
 * cpu_stream.c — which hint decode's weight stream asks ahead with (NTA,
 * T0 or T1, het_cpu_stream), chosen by racing them on the device's own
 * decode splits, once for each placement of its threads.
 *
 * A decode token reads every weight byte once, and each block of a run of
 * panels asks for the lines a few KB ahead of it. Which hint streams
 * fastest is a property of the machine, not of the code, and the machines
 * disagree by large factors:
 *   - Zen 5 VM, two threads on one CCD: NTA 2-3% a token faster than T0
 *     (Q8_0, session 31; NTA keeps the lines out of L2 and L3 on their way
 *     out, so the KV cache and the small nodes' vectors stay); on two CCDs
 *     T0 faster than NTA: token time T0 / NTA 1/1.07 (Q8_0), 1/1.036 (Q6_K),
 *     1/1.022 (Q4_K_M), ~1/1.01 (Q4_0) (bench/README.md, sessions 31-32).
 *   - Intel Xeon VM (AVX-512 FP16, AMX; session 38), Q4_0, two threads:
 *     NTA 31.1, T0 49.5, T1 63.0, T2 62.6, no hint 54.0 tok/s (NTA there
 *     fills L1 only, and a core's few L1 miss buffers cap its stream at
 *     about a third of what the L2's take).
 * A rule written from one machine (session 31's: T0 when the threads sit
 * far apart, NTA otherwise) ran the Xeon at 38% of its read bandwidth. So
 * the device measures: its split's wall time per streamed byte (the decode
 * matmuls' weights) under each hint, in rounds of interleaved splits, and
 * runs the rest with the fastest. A round gives each hint still racing two
 * splits, in the order best, others, others reversed, best (a drift in the
 * machine's speed falls on every hint alike) and keeps each hint's least
 * time of the two (another tenant's burst only slows); a race's first
 * round gives each one split (on the Xeon a 128-token run raced on 2 NTA
 * and 2 T0 splits took 2-3% longer than with T1 fixed: `hetrun run -n 32`
 * pays that every time); a hint more than
 * HET_CPU_STREAM_DROP slower than the best leaves the rounds, which come
 * every HET_CPU_STREAM_ROUND_EVERY timed splits, and every
 * HET_CPU_STREAM_READMIT-th round all hints race again. On the Xeon that
 * is 2 splits at NTA's 2x and 2 at T0's 1.3x once in 8 x 256 tokens.
 *
 * The placement is still measured, because it changes the answer and a
 * VM's vCPUs move between placements its guest cannot see (the Zen 5 VM
 * changes between one CCD and two within seconds): the thread that closes a
 * step stamps the time next to the step word (cpu_sync.c), and a thread
 * spinning on that word takes the time from the stamp to seeing the close.
 * The least of a split's such waits (~100 of them in a Qwen3-0.6B decode
 * token) is the hand-off of a cache line there and back, with the clock's
 * own cost: on the Zen 5 VM 64-75 ns with both threads on one CCD, 230-260
 * ns on two, on the Xeon 58-133 ns. The median of the last three splits'
 * measures, HET_CPU_STREAM_FAR_NS or more, is far. Each placement has its
 * own race; a split's time counts for the placement its hint was chosen
 * for, and only when its own measure (if it has one) agrees; one that does
 * not agree still takes its place in the round (on the Xeon, whose
 * hand-offs of 58-142 ns straddle the threshold now and then, a far round
 * that waited for far splits ran NTA on 16 of 134 decode splits). A split
 * with too few spinning waits to tell leaves the placement as it was.
 * HET_CPU_STREAM=nta, t0 or t1 fixes the hint (A/B runs); the arithmetic is
 * the same every way, only the hints differ.
 */
#include "devices/cpu/cpu_stream.h"

#include <string.h>

/* Least close-to-seen time, ns, from which two threads are taken to sit on
 * two last-level caches. */
#define HET_CPU_STREAM_FAR_NS 150
/* Spinning waits a split needs before its measure counts. */
#define HET_CPU_STREAM_MIN_WAITS 8
/* Timed splits between rounds, a placement's; every READMIT-th round
 * races every hint again; a hint whose best time of a round is more than
 * DROP times the best hint's leaves the rounds until then. */
#define HET_CPU_STREAM_ROUND_EVERY 256
#define HET_CPU_STREAM_READMIT     8
#define HET_CPU_STREAM_DROP        1.15
/* Streamed decode weights a split needs for its time to count: below it
 * the hint is too small a part of the time to tell. */
#define HET_CPU_STREAM_MIN_BYTES (4.0 * 1024 * 1024)

const char *het_cpu_stream_name(enum het_cpu_stream hint)
{
    switch (hint) {
    case HET_CPU_STREAM_NTA: return "nta";
    case HET_CPU_STREAM_T0: return "t0";
    case HET_CPU_STREAM_T1: return "t1";
    case HET_CPU_STREAM_COUNT: break;
    }
    return "?";
}

double het_cpu_stream_far_ns(void) { return HET_CPU_STREAM_FAR_NS; }
int    het_cpu_stream_round_every(void) { return HET_CPU_STREAM_ROUND_EVERY; }
double het_cpu_stream_min_bytes(void) { return HET_CPU_STREAM_MIN_BYTES; }

/* A race that has not run: its first timed split starts a round with every
 * hint; until then the placement's earlier rule (session 31) stands. */
static void race_init(struct het_cpu_stream_race *r, bool far)
{
    memset(r, 0, sizeof *r);
    r->best = far ? HET_CPU_STREAM_T0 : HET_CPU_STREAM_NTA;
    r->at = -1;
    r->since = HET_CPU_STREAM_ROUND_EVERY;
}

/* The hint at place `at` of the round: best, others, others reversed, best. */
static enum het_cpu_stream round_hint(const struct het_cpu_stream_race *r)
{
    const int n = r->n_order;
    return r->order[r->at < n ? r->at : 2 * n - 1 - r->at];
}

/* A round begins if two hints or more are racing; counts it either way. */
static void round_begin(struct het_cpu_stream_choice *s, struct het_cpu_stream_race *r)
{
    if (r->rounds++ % HET_CPU_STREAM_READMIT == 0)
        for (int h = 0; h < HET_CPU_STREAM_COUNT; h++) r->in[h] = true;
    r->in[r->best] = true;
    r->since = 0;
    r->n_order = 0;
    r->order[r->n_order++] = r->best;
    for (int h = 0; h < HET_CPU_STREAM_COUNT; h++)
        if (r->in[h] && h != (int)r->best) r->order[r->n_order++] = (enum het_cpu_stream)h;
    if (r->n_order < 2) return;
    for (int h = 0; h < HET_CPU_STREAM_COUNT; h++) r->least[h] = 0;
    r->reps = r->rounds == 1 ? 1 : 2; /* the first round costs the slow hints one split each */
    r->at = 0;
    s->races++;
}

/* The best of the hints timed in the round (one without a time can be
 * neither best nor dropped; none timed: the best stays). */
static void round_end(struct het_cpu_stream_race *r)
{
    enum het_cpu_stream best = r->best;
    for (int i = 0; i < r->n_order; i++) {
        const enum het_cpu_stream h = r->order[i];
        if (r->least[h] > 0 && (r->least[best] == 0 || r->least[h] < r->least[best])) best = h;
    }
    r->best = best;
    for (int i = 0; i < r->n_order; i++) {
        const enum het_cpu_stream h = r->order[i];
        r->in[h] = h == best || r->least[h] == 0 || r->least[h] <= HET_CPU_STREAM_DROP * r->least[best];
    }
    r->at = -1;
}

/* A split of this placement that streamed enough to time, run with hint h:
 * its time per MB, or 0 where it does not count (its own measure said the
 * other placement). Such a split still takes its place in the round, so
 * that a round never waits on splits that cannot count. */
static void race_add(struct het_cpu_stream_race *r, enum het_cpu_stream h, double ns_per_mb)
{
    if (r->at < 0) {
        r->since++;
        return;
    }
    if (h != round_hint(r)) return; /* not the round's (it began after the hint was chosen) */
    if (ns_per_mb > 0 && (r->least[h] == 0 || ns_per_mb < r->least[h])) r->least[h] = ns_per_mb;
    if (++r->at == r->reps * r->n_order) round_end(r);
}

enum het_status het_cpu_stream_init(struct het_cpu_stream_choice *s, const char *env, het_error *err)
{
    memset(s, 0, sizeof *s);
    s->mode = HET_CPU_STREAM_AUTO;
    race_init(&s->race[0], false);
    race_init(&s->race[1], true);
    s->hint = s->race[0].best;
    if (!env || !*env || !strcmp(env, "auto")) {
        round_begin(s, &s->race[0]); /* the first split is the near race's first */
        s->hint = round_hint(&s->race[0]);
        return HET_OK;
    }
    for (int h = 0; h < HET_CPU_STREAM_COUNT; h++)
        if (!strcmp(env, het_cpu_stream_name((enum het_cpu_stream)h))) {
            s->mode = HET_CPU_STREAM_FIXED;
            s->hint = (enum het_cpu_stream)h;
            return HET_OK;
        }
    return het_error_set(err, HET_ERR_INVALID, "cpu: HET_CPU_STREAM='%s': expected auto, nta, t0 or t1", env);
}

void het_cpu_stream_update(struct het_cpu_stream_choice *s, int64_t min_ns, int n, double split_ns,
                           double stream_bytes)
{
    const enum het_cpu_stream ran = s->hint;
    const bool ran_far = s->far;
    s->splits[ran]++;
    const bool measured = n >= HET_CPU_STREAM_MIN_WAITS;
    if (measured) {
        s->last[s->at] = min_ns;
        s->at = (s->at + 1) % 3;
        if (s->n_last < 3) s->n_last++;
        int64_t m = min_ns; /* the median of the last three (of what there is) */
        if (s->n_last >= 3) {
            const int64_t a = s->last[0], b = s->last[1], c = s->last[2];
            m = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
        }
        s->handoff_ns = (double)m;
        s->far = m >= HET_CPU_STREAM_FAR_NS;
    }
    if (s->mode == HET_CPU_STREAM_FIXED) return;
    if (stream_bytes >= HET_CPU_STREAM_MIN_BYTES && split_ns > 0) {
        const bool agrees = !measured || (min_ns >= HET_CPU_STREAM_FAR_NS) == ran_far;
        race_add(&s->race[ran_far], ran, agrees ? split_ns / (stream_bytes / (1024.0 * 1024.0)) : 0);
    }
    struct het_cpu_stream_race *r = &s->race[s->far];
    if (r->at < 0 && r->since >= HET_CPU_STREAM_ROUND_EVERY) round_begin(s, r);
    s->hint = r->at >= 0 ? round_hint(r) : r->best;
}
