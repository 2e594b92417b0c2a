/*
 * cpu_stream.c — which hint decode's weight stream asks ahead with (NTA,
 * T0 or T1, het_cpu_stream), chosen by racing them on the device's own
 * decode splits.
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
 *     NTA 31.1, T0 49.5, T1 63.0, T2 62.6, no hint 54.0 tok/s (why is not
 *     measured; likely NTA fills L1 only there, and a core's few L1 miss
 *     buffers cap what its stream has in flight).
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
 * pays that every time), drops only a hint 1.5x behind (one sample each)
 * and is followed by a full round after 32 timed splits; a hint more than
 * HET_CPU_STREAM_DROP slower than the best leaves the rounds, which come
 * every HET_CPU_STREAM_ROUND_EVERY timed splits, and every
 * HET_CPU_STREAM_READMIT-th round all hints race again. On the Xeon that
 * is 2 splits at NTA's 2x and 2 at T0's 1.3x once in 8 x 256 tokens.
 * Every split that streams decode weights counts, the ones a lone thread
 * runs without the pool included: at first only the pool's were timed,
 * and `-t 1` on the Xeon ran the first round's NTA for good, decode at 39%
 * of a thread's read instead of 84%.
 * A round compares like with like: it times only the splits like its
 * first (the same weights and rows; race_add), and the device passes no
 * split that holds a probe (HET_TENSOR_FLAG_PROBE: calibration's
 * matmuls, run over and over with their weights in the caches, won the
 * race for T0 on the Xeon on every model's first run, and its decode ran
 * at 62% of the read).
 *
 * One race for the device, whatever the placement of its threads. Session
 * 38's first version ran one race per placement (one last-level cache or
 * two, by the hand-off below), but the hint moves that measure: on the
 * Xeon the splits that asked with NTA measured 167-174 ns, those with T1
 * 90-140, so an NTA split made the threads look far apart, a far split ran
 * T1 and looked near again, and half a run's splits took NTA's 2x. A
 * placement that changes (the Zen 5 VM moves between one CCD and two within
 * seconds) is followed by the rounds every 256 splits instead.
 *
 * The hand-off is still measured and reported (`hetrun bench`): the thread
 * that closes a step stamps the time next to the step word (cpu_sync.c),
 * and a thread spinning on that word takes the time from the stamp to
 * seeing the close. The least of a split's such waits (~100 of them in a
 * Qwen3-0.6B decode token) is the hand-off of a cache line there and back,
 * with the clock's own cost: on the Zen 5 VM 64-75 ns with both threads on
 * one CCD, 230-260 ns on two, on the Xeon 58-174 ns by the hint. The median
 * of the last three splits' measures is reported, and HET_CPU_STREAM_FAR_NS
 * or more reads as far apart; a split with too few spinning waits leaves it
 * as it was.
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
/* Timed splits between rounds; every READMIT-th round
 * races every hint again; a hint whose best time of a round is more than
 * DROP times the best hint's leaves the rounds until then. */
#define HET_CPU_STREAM_ROUND_EVERY 256
#define HET_CPU_STREAM_READMIT     8
#define HET_CPU_STREAM_DROP        1.15
/* A race's first round (one split a hint) drops only a hint this far
 * behind, and the second round comes after SECOND_AFTER timed splits: one
 * split is one sample, and a burst on it must not cost 2048 splits. */
#define HET_CPU_STREAM_DROP_FIRST   1.5
#define HET_CPU_STREAM_SECOND_AFTER 32
/* Timed splits not like the round's in a row after which it begins again
 * on the splits that come (the ones it was timing have stopped coming). */
#define HET_CPU_STREAM_STRAYS 8
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
int    het_cpu_stream_second_after(void) { return HET_CPU_STREAM_SECOND_AFTER; }
double het_cpu_stream_min_bytes(void) { return HET_CPU_STREAM_MIN_BYTES; }

/* A race that has not run: its first round races every hint, T1 first.
 * The first hint is also what a process's first splits run with before any
 * decode split has raced, a prompt's included (its last token's output
 * matrix streams 128 MB for Qwen3-0.6B): NTA (session 31's default, the Zen
 * 5 VM's best on one CCD by 2-3%) streamed it at half T1's rate on the Xeon
 * VM (Q4_K_M pp512 under HET_CPU_PROFILE: 9.2 ms at 13.9 GB/s against 4.6 ms
 * at 27.6 with HET_CPU_STREAM=t1); T1 is within a few per cent of the best
 * everywhere it was measured. */
static void race_init(struct het_cpu_stream_race *r)
{
    memset(r, 0, sizeof *r);
    r->best = HET_CPU_STREAM_T1;
    r->at = -1;
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
    if (r->n_order < 2) { /* nothing to race: the best runs on to the next round */
        r->wait = HET_CPU_STREAM_ROUND_EVERY;
        return;
    }
    for (int h = 0; h < HET_CPU_STREAM_COUNT; h++) r->least[h] = 0;
    r->like = 0;
    r->strays = 0;
    r->reps = r->rounds == 1 ? 1 : 2; /* the first round costs the slow hints one split each */
    r->at = 0;
    s->races++;
}

/* The round's fastest hint is the best; a hint too far behind it sits out
 * until a readmitting round. */
static void round_end(struct het_cpu_stream_race *r)
{
    r->at = -1;
    r->wait = r->reps == 1 ? HET_CPU_STREAM_SECOND_AFTER : HET_CPU_STREAM_ROUND_EVERY;
    enum het_cpu_stream best = r->best;
    for (int i = 0; i < r->n_order; i++) {
        const enum het_cpu_stream h = r->order[i];
        if (r->least[h] < r->least[best]) best = h;
    }
    r->best = best;
    for (int i = 0; i < r->n_order; i++) {
        const enum het_cpu_stream h = r->order[i];
        const double drop = r->reps == 1 ? HET_CPU_STREAM_DROP_FIRST : HET_CPU_STREAM_DROP;
        r->in[h] = h == best || r->least[h] <= drop * r->least[best];
    }
}

/* A split that streamed enough to time, run with hint h, its time per MB
 * (h is the round's hint at `at` while a round runs: update chose it). A
 * round times only splits like its first one (`like`: the same weights and
 * rows, as a decode token runs them). Splits of other weights cost other
 * times per byte (a lone matmul against a layer with its attention and
 * norms), and calibration's, whose matmuls run as splits of their own, had
 * the Xeon pick T0 over T1 (1.25x faster) on a model's first run. */
static void race_add(struct het_cpu_stream_race *r, enum het_cpu_stream h, double ns_per_mb, uint64_t like)
{
    if (r->at < 0) {
        r->since++;
        return;
    }
    if (r->at == 0) r->like = like;
    if (like != r->like) {
        if (++r->strays < HET_CPU_STREAM_STRAYS) return;
        for (int i = 0; i < HET_CPU_STREAM_COUNT; i++) r->least[i] = 0; /* begin again on what comes now */
        r->at = 0;
        r->like = 0;
        r->strays = 0;
        return;
    }
    r->strays = 0;
    if (r->least[h] == 0 || ns_per_mb < r->least[h]) r->least[h] = ns_per_mb;
    if (++r->at == r->reps * r->n_order) round_end(r);
}

enum het_status het_cpu_stream_init(struct het_cpu_stream_choice *s, const char *env, het_error *err)
{
    memset(s, 0, sizeof *s);
    s->mode = HET_CPU_STREAM_AUTO;
    race_init(&s->race);
    s->hint = s->race.best;
    if (!env || !*env || !strcmp(env, "auto")) {
        round_begin(s, &s->race); /* the first split is the race's first */
        s->hint = round_hint(&s->race);
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
                           double stream_bytes, uint64_t like)
{
    const enum het_cpu_stream ran = s->hint;
    if (stream_bytes > 0) s->splits[ran]++;
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
    }
    if (s->mode == HET_CPU_STREAM_FIXED) return;
    if (stream_bytes >= HET_CPU_STREAM_MIN_BYTES && split_ns > 0) {
        race_add(&s->race, ran, split_ns / (stream_bytes / (1024.0 * 1024.0)), like);
    }
    struct het_cpu_stream_race *r = &s->race;
    if (r->at < 0 && r->since >= r->wait) round_begin(s, r);
    s->hint = r->at >= 0 ? round_hint(r) : r->best;
}
