/*
 * test_cpu_stream.c — the CPU device's choice of hint for decode's weight
 * stream (devices/cpu/cpu_stream.c), raced on its own splits:
 *   - HET_CPU_STREAM's values: auto (also unset or empty), nta, t0 and t1
 *     fix the hint, anything else is refused with a message naming the value;
 *   - the hand-off measure (near / far) by the median of the last three
 *     splits' measures, so one split's odd measure does not flip it; a split
 *     with too few waits to tell leaves it; it is reported, and does not
 *     choose the hint (the hint moves it);
 *   - a race: the first timed splits run every hint once (dropping only a
 *     hint far behind), the second round soon after and later ones twice
 *     (best, others, others reversed, best), the fastest by its least time
 *     per byte wins, hints more than the margin slower sit out until every
 *     few rounds all race again; a burst on one split does not lose a hint
 *     its race; splits that stream too little are not timed;
 *   - every split is counted under the hint it ran with; a fixed hint never
 *     moves, whatever the measures and times.
 */
#include <string.h>

#include "devices/cpu/cpu_stream.h"
#include "testutil.h"

#define MB (1024.0 * 1024.0)

/* a split that streams `bytes` (the caller's key: splits of equal bytes are alike) */
static void upd(struct het_cpu_stream_choice *s, int64_t min_ns, int n, double split_ns, double bytes)
{
    het_cpu_stream_update(s, min_ns, n, split_ns, bytes, (uint64_t)bytes);
}

static void parse(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    CHECK(het_cpu_stream_init(&s, NULL, &err) == HET_OK && s.mode == HET_CPU_STREAM_AUTO &&
          s.hint == HET_CPU_STREAM_T1, "unset: auto, starting with T1");
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

/* Whether the threads' hand-off reads as two last-level caches. */
static bool far_apart(const struct het_cpu_stream_choice *s) { return s->handoff_ns >= het_cpu_stream_far_ns(); }

/* the hand-off measure only: splits that stream nothing worth timing */
static void placement(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int64_t far = (int64_t)het_cpu_stream_far_ns(), near = far / 3;
    CHECK(far > 0, "a threshold");
    het_cpu_stream_init(&s, "auto", &err);
    upd(&s, far * 2, 3, 0, 0); /* too few waits: nothing learnt */
    CHECK(s.handoff_ns == 0 && !far_apart(&s), "3 waits: no measure");
    upd(&s, far * 2, 100, 0, 0);
    CHECK(far_apart(&s) && s.handoff_ns == (double)(far * 2), "far");
    upd(&s, near, 100, 0, 0); /* fewer than three measures: the last one */
    CHECK(!far_apart(&s) && s.handoff_ns == (double)near, "far, near: near");
    upd(&s, far + 10, 100, 0, 0);
    CHECK(far_apart(&s), "far, near, far: far (median %.0f ns)", s.handoff_ns);
    upd(&s, near, 100, 0, 0);
    CHECK(!far_apart(&s), "near, far, near: near (median %.0f ns)", s.handoff_ns);
    upd(&s, near, 100, 0, 0);
    upd(&s, far * 3, 100, 0, 0); /* one odd split */
    CHECK(!far_apart(&s) && s.handoff_ns == (double)near, "near, near, one far: near");
    upd(&s, far, 100, 0, 0);
    CHECK(far_apart(&s), "near, far, far (at the threshold): far");
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.splits[HET_CPU_STREAM_T1] == 0 && s.races == 1 && s.race.at == 0,
          "the measure does not move the hint: the round's first (T1) still to run, no decode split counted");
}

/* A machine where each hint costs cost[h] ns per MB streamed. */
struct machine {
    double cost[HET_CPU_STREAM_COUNT];
    int64_t handoff;
};

static void run(struct het_cpu_stream_choice *s, const struct machine *m, int n)
{
    for (int i = 0; i < n; i++) upd(s, m->handoff, 100, m->cost[s->hint] * 64, 64 * MB);
}

static void race(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int every = het_cpu_stream_round_every(), second = het_cpu_stream_second_after();
    const int64_t near = (int64_t)het_cpu_stream_far_ns() / 3;
    struct machine xeon = { { [HET_CPU_STREAM_NTA] = 2.0, [HET_CPU_STREAM_T0] = 1.3, [HET_CPU_STREAM_T1] = 1.0 },
                            near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &xeon, 3); /* the first round, one split each: T1 NTA T0 */
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.splits[0] == 1 && s.splits[1] == 1 && s.splits[2] == 1 && s.races == 1,
          "the first three timed splits race all three once; T1 wins (NTA %llu, T0 %llu, T1 %llu splits)",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.splits[2]);
    run(&s, &xeon, second + 4); /* the second round, soon after: T1 T0 T0 T1 */
    CHECK(s.splits[0] == 1 && s.splits[1] == 3 && s.races == 2 && s.race.at == -1 && s.hint == HET_CPU_STREAM_T1,
          "one split each drops only NTA (2x); %d splits later two each drop T0 (1.3x): NTA %llu, T0 %llu splits",
          second, (unsigned long long)s.splits[0], (unsigned long long)s.splits[1]);
    run(&s, &xeon, 7 * every - 1); /* rounds 3-8 have only T1 in them: no race */
    CHECK(s.splits[0] == 1 && s.splits[1] == 3 && s.races == 2,
          "the losers sit out the rounds up to the eighth: NTA %llu, T0 %llu splits, %llu races",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.races);
    run(&s, &xeon, 1 + 6); /* the ninth: T1 NTA T0 T0 NTA T1 */
    CHECK(s.splits[0] == 3 && s.splits[1] == 5 && s.races == 3 && s.race.at == -1 && s.hint == HET_CPU_STREAM_T1,
          "every eighth round races all again, two splits each: NTA %llu, T0 %llu splits, %llu races",
          (unsigned long long)s.splits[0], (unsigned long long)s.splits[1], (unsigned long long)s.races);

    /* a first round that leaves one hint: no race until the eighth round after it, every `every` splits */
    struct machine alone = { { [HET_CPU_STREAM_NTA] = 2.0, [HET_CPU_STREAM_T0] = 1.6, [HET_CPU_STREAM_T1] = 1.0 },
                             near };
    struct het_cpu_stream_choice a;
    het_cpu_stream_init(&a, "auto", &err);
    run(&a, &alone, 3 + second); /* both others dropped; the second round has only T1 */
    CHECK(a.race.rounds == 2 && a.races == 1 && a.race.at == -1 && a.hint == HET_CPU_STREAM_T1,
          "one hint left after one split each (2x, 1.6x): the second round races nothing (%u rounds)",
          a.race.rounds);
    run(&a, &alone, every - 1);
    CHECK(a.race.rounds == 2, "the next round %d timed splits later, not %d (%u rounds)", every, second,
          a.race.rounds);
    run(&a, &alone, 1);
    CHECK(a.race.rounds == 3 && a.races == 1, "the third round then (%u)", a.race.rounds);

    /* the machine changes: T0 becomes the fastest; the next full round finds it */
    xeon.cost[HET_CPU_STREAM_T0] = 0.7;
    run(&s, &xeon, 8 * every + 6);
    CHECK(s.hint == HET_CPU_STREAM_T0, "a new fastest hint found within eight rounds (hint %s)",
          het_cpu_stream_name(s.hint));

    /* close hints all keep racing, a round every `every` timed splits */
    struct machine zen = { { [HET_CPU_STREAM_NTA] = 1.0, [HET_CPU_STREAM_T0] = 1.03, [HET_CPU_STREAM_T1] = 1.05 },
                           near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &zen, 3 + (second + 6) + 2 * (every + 6));
    CHECK(s.races == 4 && s.hint == HET_CPU_STREAM_NTA && s.splits[1] == 7 && s.splits[2] == 7,
          "hints within the margin race every round: %llu races, NTA the best", (unsigned long long)s.races);

    /* a burst on one of a hint's two splits does not lose it the race */
    const struct machine close = { { [HET_CPU_STREAM_NTA] = 1.1, [HET_CPU_STREAM_T0] = 1.05,
                                     [HET_CPU_STREAM_T1] = 1.0 },
                                   near };
    het_cpu_stream_init(&s, "auto", &err);
    run(&s, &close, 3 + second); /* the first round, then the second begins: T1 NTA T0 T0 NTA T1 */
    for (int i = 0; i < 6; i++) {
        const double c = i == 0 ? 5.0 : close.cost[s.hint]; /* T1's first, in a burst */
        upd(&s, near, 100, c * 64, 64 * MB);
    }
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.race.at == -1,
          "a hint's least time of two decides, not their mean (hint %s)", het_cpu_stream_name(s.hint));

    /* a round times only splits of the bytes its first streamed: others (a
     * lone matmul of calibration, at a cost per byte that favours T0) run
     * with the round's hint and are not compared with them */
    const struct machine x = { { [HET_CPU_STREAM_NTA] = 2.0, [HET_CPU_STREAM_T0] = 1.3, [HET_CPU_STREAM_T1] = 1.0 },
                               near };
    het_cpu_stream_init(&s, "auto", &err);
    for (int i = 0; i < 3; i++) {
        upd(&s, near, 100, x.cost[s.hint] * 64, 64 * MB); /* the token's split */
        const double lone = s.hint == HET_CPU_STREAM_T0 ? 0.5 : 1.0;
        upd(&s, near, 100, lone * 16, 16 * MB); /* another split */
    }
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.race.at == -1 && s.races == 1,
          "splits of other bytes between a round's are not raced (hint %s)", het_cpu_stream_name(s.hint));
    /* a round whose splits stop coming begins again on the ones that come */
    het_cpu_stream_init(&s, "auto", &err);
    upd(&s, near, 100, 64, 64 * MB); /* T1, 64 MB: the round's bytes */
    for (int i = 0; i < 7; i++) upd(&s, near, 100, 16, 16 * MB);
    CHECK(s.race.at == 1 && s.hint == HET_CPU_STREAM_NTA, "seven splits of other bytes wait (at %d)", s.race.at);
    upd(&s, near, 100, 16, 16 * MB);
    CHECK(s.race.at == 0 && s.hint == HET_CPU_STREAM_T1 && s.race.least[HET_CPU_STREAM_T1] == 0,
          "the eighth begins the round again (at %d, hint %s)", s.race.at, het_cpu_stream_name(s.hint));
    run(&s, &x, 3);
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.race.at == -1, "and it runs on the splits that come (hint %s)",
          het_cpu_stream_name(s.hint));

    /* splits that stream too little are not timed */
    het_cpu_stream_init(&s, "auto", &err);
    const double small = het_cpu_stream_min_bytes() / 2;
    for (int i = 0; i < 10; i++) upd(&s, near, 100, 1e9, small);
    CHECK(s.hint == HET_CPU_STREAM_T1 && s.race.at == 0, "splits under %.0f bytes leave the round where it was",
          het_cpu_stream_min_bytes());
    upd(&s, near, 100, 1.0 * 64, 64 * MB);
    CHECK(s.race.at == 1 && s.race.least[HET_CPU_STREAM_T1] == 1.0, "a split of 64 MB is timed");
}

static void fixed(void)
{
    struct het_cpu_stream_choice s;
    het_error err = { 0 };
    const int64_t far = (int64_t)het_cpu_stream_far_ns();
    het_cpu_stream_init(&s, "nta", &err);
    for (int i = 0; i < 5; i++) upd(&s, far * 4, 100, 64e6, 64 * MB);
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
