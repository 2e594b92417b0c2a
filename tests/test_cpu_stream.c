/*
 * test_cpu_stream.c — the CPU device's choice of hint for decode's weight
 * stream (devices/cpu/cpu_stream.c), raced on its own splits:
 *   - HET_CPU_STREAM's values: auto (also unset or empty), nta, t0 and t1
 *     fix the hint, anything else is refused with a message naming the value;
 *   - the placement (near / far) by the median of the last three splits'
 *     hand-off measures, so one split's odd measure does not flip it; a split
 *     with too few waits to tell leaves it; without timed splits each
 *     placement keeps its first hint (near NTA, far T0);
 *   - a race: the first timed splits run every hint once, later rounds twice
 *     (best, others, others reversed, best), the fastest by its least time
 *     per byte wins,
 *     hints more than the margin slower sit out until every few rounds all
 *     race again; a burst on one split does not lose a hint its race;
 *     splits that stream too little, or whose own measure says the other
 *     placement, are not timed; each placement races on its own;
 *   - every split is counted under the hint it ran with; a fixed hint never
 *     moves, whatever the measures and times.
 */
#include <string.h>

#include "devices/cpu/cpu_stream.h"
#include "testutil.h"

#define MB (1024.0 * 1024.0)

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
    CHECK(het_cpu_stream_init(&s, "t1", &err) == HET_OK && s.mode == HET_CPU_STREAM_FIXED &&
          s.hint == HET_CPU_STREAM_T1, "t1: fixed T1");
    CHECK(het_cpu_stream_init(&s, "nta", &err) == HET_OK && s.mode == HET_CPU_STREAM_FIXED &&
          s.hint == HET_CPU_STREAM_NTA, "nta: fixed NTA");
    CHECK(het_cpu_stream_init(&s, "T1", &err) == HET_ERR_INVALID && strstr(err.msg, "HET_CPU_STREAM='T1'"),
          "an unknown value refused, naming it: '%s'", err.msg);
}

/* placement only: splits that stream nothing worth timing */
static void placement(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int64_t far = (int64_t)het_cpu_stream_far_ns(), near = far / 3;
    CHECK(far > 0, "a threshold");
    het_cpu_stream_init(&s, "auto", &err);
    het_cpu_stream_update(&s, far * 2, 3, 0, 0); /* too few waits: nothing learnt */
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.handoff_ns == 0 && !s.far, "3 waits: the choice stays");
    het_cpu_stream_update(&s, far * 2, 100, 0, 0);
    CHECK(s.hint == HET_CPU_STREAM_T0 && s.far && s.handoff_ns == (double)(far * 2), "far: T0 (far's first)");
    het_cpu_stream_update(&s, near, 100, 0, 0); /* fewer than three measures: the last one */
    CHECK(s.hint == HET_CPU_STREAM_NTA && !s.far && s.handoff_ns == (double)near, "far, near: NTA");
    het_cpu_stream_update(&s, far + 10, 100, 0, 0);
    CHECK(s.hint == HET_CPU_STREAM_T0, "far, near, far: T0 (median %.0f ns)", s.handoff_ns);
    het_cpu_stream_update(&s, near, 100, 0, 0);
    CHECK(s.hint == HET_CPU_STREAM_NTA, "near, far, near: NTA (median %.0f ns)", s.handoff_ns);
    het_cpu_stream_update(&s, near, 100, 0, 0);
    het_cpu_stream_update(&s, far * 3, 100, 0, 0); /* one odd split */
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.handoff_ns == (double)near, "near, near, one far: NTA");
    het_cpu_stream_update(&s, far, 100, 0, 0);
    CHECK(s.hint == HET_CPU_STREAM_T0, "near, far, far (at the threshold): T0");
    /* the 8 splits ran with NTA, NTA, T0, NTA, T0, NTA, NTA, NTA (each with the hint chosen before it) */
    CHECK(s.splits[HET_CPU_STREAM_NTA] == 6 && s.splits[HET_CPU_STREAM_T0] == 2 && s.races == 2 &&
              s.race[0].at == 0 && s.race[1].at == 0,
          "splits counted by the hint they ran with: NTA %llu, T0 %llu; each race begun, none timed",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1]);
}

/* A machine where each hint costs cost[h] ns per MB streamed. */
struct machine {
    double cost[HET_CPU_STREAM_COUNT];
    int64_t handoff;
};

static void run(struct het_cpu_stream_choice *s, const struct machine *m, int n)
{
    for (int i = 0; i < n; i++) het_cpu_stream_update(s, m->handoff, 100, m->cost[s->hint] * 64, 64 * MB);
}

static void race(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int every = het_cpu_stream_round_every();
    const int64_t near = (int64_t)het_cpu_stream_far_ns() / 3;
    struct machine xeon = { { [HET_CPU_STREAM_NTA] = 2.0, [HET_CPU_STREAM_T0] = 1.3, [HET_CPU_STREAM_T1] = 1.0 },
                            near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &xeon, 3); /* the first round, one split each: NTA T0 T1 */
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.splits[0] == 1 && s.splits[1] == 1 && s.splits[2] == 1 && s.races == 1,
          "the first three timed splits race all three once; T1 wins (NTA %llu, T0 %llu, T1 %llu splits)",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.splits[2]);
    run(&s, &xeon, 7 * every + 3); /* rounds 2-8 have only T1 in them: no race */
    CHECK(s.splits[0] == 1 && s.splits[1] == 1 && s.races == 1,
          "the losers (2x, 1.3x) sit out seven rounds: NTA %llu, T0 %llu splits, %llu races",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.races);
    run(&s, &xeon, every + 3); /* the ninth: T1 NTA T0 T0 NTA T1 */
    CHECK(s.splits[0] == 3 && s.splits[1] == 3 && s.races == 2 && s.race[0].at == -1 && s.hint == HET_CPU_STREAM_T1,
          "every eighth round races all again, two splits each: NTA %llu, T0 %llu splits, %llu races",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.races);

    /* the machine changes: T0 becomes the fastest; the next full round finds it */
    xeon.cost[HET_CPU_STREAM_T0] = 0.7;
    run(&s, &xeon, 8 * every + 6);
    CHECK(s.hint == HET_CPU_STREAM_T0, "a new fastest hint found within eight rounds (hint %s)",
          het_cpu_stream_name(s.hint));

    /* close hints all keep racing, a round every `every` timed splits */
    struct machine zen = { { [HET_CPU_STREAM_NTA] = 1.0, [HET_CPU_STREAM_T0] = 1.03, [HET_CPU_STREAM_T1] = 1.05 },
                           near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &zen, 3 + 3 * (every + 6));
    CHECK(s.races == 4 && s.hint == HET_CPU_STREAM_NTA && s.splits[1] == 7 && s.splits[2] == 7,
          "hints within the margin race every round: %llu races, NTA the best", (unsigned long long)s.races);

    /* a burst on one of a hint's two splits does not lose it the race */
    const struct machine close = { { [HET_CPU_STREAM_NTA] = 1.1, [HET_CPU_STREAM_T0] = 1.05,
                                     [HET_CPU_STREAM_T1] = 1.0 },
                                   near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &close, 3 + every); /* the first round, then the second begins: T1 NTA T0 T0 NTA T1 */
    for (int i = 0; i < 6; i++) {
        const double c = i == 0 ? 5.0 : close.cost[s.hint]; /* T1's first, in a burst */
        het_cpu_stream_update(&s, near, 100, c * 64, 64 * MB);
    }
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.race[0].at == -1,
          "a hint's least time of two decides, not their mean (hint %s)", het_cpu_stream_name(s.hint));

    /* splits that stream too little, or measure the other placement, are not timed */
    het_cpu_stream_init(&s, "auto", &err);
    const double small = het_cpu_stream_min_bytes() / 2;
    for (int i = 0; i < 10; i++) het_cpu_stream_update(&s, near, 100, 1e9, small);
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.race[0].at == 0, "splits under %.0f bytes leave the round where it was",
          het_cpu_stream_min_bytes());
    const int64_t far = (int64_t)het_cpu_stream_far_ns() * 2;
    het_cpu_stream_update(&s, near, 100, 1.0 * 64, 64 * MB); /* NTA's first, counted */
    const double nta = s.race[0].least[HET_CPU_STREAM_NTA];
    het_cpu_stream_update(&s, far, 100, 9.0 * 64, 64 * MB);  /* T0's first, its own measure far: not timed */
    CHECK(s.race[0].at == 2 && !s.far && nta == 1.0 && s.race[0].least[HET_CPU_STREAM_T0] == 0,
          "a split measured far is not timed for near, but takes its place (place %d)", s.race[0].at);
    het_cpu_stream_update(&s, far, 100, 0, 0);
    het_cpu_stream_update(&s, far, 100, 0, 0);
    CHECK(s.far && s.hint == HET_CPU_STREAM_T0 && s.race[1].at == 0 && s.race[0].at == 2,
          "far: its own race, from T0; near's round waits where it was");
    /* a far split whose own measure says near: not timed, the far round goes on */
    het_cpu_stream_update(&s, far, 100, 0, 0);
    het_cpu_stream_update(&s, near, 100, 2.0 * 64, 64 * MB); /* far, far, near: still far */
    CHECK(s.far && s.race[1].at == 1 && s.race[1].least[HET_CPU_STREAM_T0] == 0,
          "a far split measured near takes its place in the far round untimed (place %d)", s.race[1].at);
    /* the rest of the round (NTA, T1), alike (too few waits to measure: timed): it ends; T0, without a time,
     * can be neither best nor dropped; of the tie the first in the round's order wins */
    struct het_cpu_stream_race r = s.race[1];
    for (int i = 1; i < r.reps * r.n_order; i++) het_cpu_stream_update(&s, far, 4, 5.0 * 64, 64 * MB);
    CHECK(s.race[1].at == -1 && s.race[1].best == HET_CPU_STREAM_NTA && s.race[1].in[HET_CPU_STREAM_T0] &&
              s.race[1].in[HET_CPU_STREAM_T1],
          "the round ends: NTA best on the tie, T0 (untimed) and T1 still in (%s)",
          het_cpu_stream_name(s.race[1].best));
}

static void fixed(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int64_t far = (int64_t)het_cpu_stream_far_ns();
    het_cpu_stream_init(&s, "nta", &err);
    for (int i = 0; i < 5; i++) het_cpu_stream_update(&s, far * 4, 100, 64e6, 64 * MB);
    CHECK(s.hint == HET_CPU_STREAM_NTA && s.splits[HET_CPU_STREAM_NTA] == 5 && s.handoff_ns == (double)(far * 4) &&
              s.races == 0,
          "fixed: NTA whatever the measure (which is still kept) and times");
}

int main(void)
{
    parse();
    placement();
    race();
    fixed();
    return het_test_finish();
}
