/*
 * test_cpu_sync.c — the CPU device's work sharing (devices/cpu/cpu_sync.c):
 * parts handed out (each thread's own run first), steps that end when every part is
 * done. Checked for correctness only, never for time:
 *   - every part of every step runs exactly once, and no part starts before
 *     the previous step's parts are all done (each part checks the previous
 *     step's count), every thread's loop over a step's parts ends only when
 *     the step is done, with more threads than this machine has cores, part
 *     counts from 0 to several per thread, and now and then a thread that
 *     sleeps inside a part (the others wait past the spin, on the futex) or
 *     between steps (it falls behind and must skip the steps that ended
 *     without it);
 *   - a thread that does not run at all is not needed: the others finish
 *     every step, and when it finally walks the same steps it runs no part
 *     and ends in the same step;
 *   - the static split (no worker: tests' own parallel regions) runs every
 *     part once as well;
 *   - a thread that spins until another closes a step takes the time from
 *     the close's stamp to seeing it (the hand-off the device chooses its
 *     stream hints by, cpu_stream.c): some were taken, each under the
 *     bound a wait's measure must stay under, and the stamp names the
 *     last step closed.
 */
#include <omp.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "devices/cpu/cpu_ops.h"
#include "testutil.h"

#define NTH   6
#define STEPS 2000
#define MAXP  40

static _Atomic int hits[STEPS][MAXP];
static _Atomic int done[STEPS];

static void nap_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* Parts of step s: 0 now and then (no step), 1, a few, several per thread. */
static int64_t parts_of(int s)
{
    static const int64_t n[] = { 1, 3, 0, 7, 2, MAXP, 1, 13, 6, 0, 25, 12, 36, 32 };
    return n[s % (int)(sizeof n / sizeof n[0])];
}

static void clear(void)
{
    for (int s = 0; s < STEPS; s++) {
        atomic_store(&done[s], 0);
        for (int k = 0; k < MAXP; k++) atomic_store(&hits[s][k], 0);
    }
}

/* One part: the previous step (with parts) must be complete. */
static void run_part(int s, int64_t k, _Atomic int *bad)
{
    for (int q = s - 1; q >= 0; q--) {
        if (!parts_of(q)) continue;
        if (atomic_load(&done[q]) != parts_of(q)) atomic_fetch_add(bad, 1);
        break;
    }
    atomic_fetch_add(&hits[s][k], 1);
    atomic_fetch_add(&done[s], 1);
}

/* Every part of every step ran exactly once. */
static int count_wrong(void)
{
    int wrong = 0;
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < MAXP; k++) wrong += atomic_load(&hits[s][k]) != (k < parts_of(s));
    return wrong;
}

static unsigned steps_with_parts(void)
{
    unsigned n = 0;
    for (int s = 0; s < STEPS; s++) n += parts_of(s) > 0;
    return n;
}

/* nth threads share STEPS steps; with sleepers, some sleep now and then. */
static void shared_steps(bool sleepers, bool workers, int nth)
{
    clear();
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    _Atomic int bad = 0, ran = 0, wrong_step = 0, early = 0;
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        const struct het_compute_params p = {
            .ith = omp_get_thread_num(), .nth = omp_get_num_threads(), .worker = workers ? &w : NULL,
        };
        atomic_fetch_add(&ran, 1);
        for (int s = 0; s < STEPS; s++) {
            /* thread 1 now and then falls behind between steps */
            if (sleepers && p.ith == 1 && s % 211 == 5) nap_us(3000);
            const int64_t n = parts_of(s);
            for (int64_t k = het_cpu_part_first(&p, n); k < n; k = het_cpu_part_next(&p, n, k)) {
                /* and a part now and then outlasts the spin */
                if (sleepers && s % 97 == 3 && k == 0) nap_us(s % 2 ? 2000 : 100);
                run_part(s, k, &bad);
            }
            /* the loop ends only once the step is done */
            if (atomic_load(&done[s]) != n) atomic_fetch_add(&early, 1);
        }
        if (workers && w.step != steps_with_parts()) atomic_fetch_add(&wrong_step, 1);
    }
    const char *what = workers ? (sleepers ? "shared, with sleepers" : "shared") : "static";
    if (atomic_load(&ran) != nth) {
        het_test_skip("OpenMP gave fewer than %d threads", nth);
    }
    CHECK(count_wrong() == 0, "%s: %d parts did not run exactly once", what, count_wrong());
    CHECK(atomic_load(&bad) == 0, "%s: %d parts started before the previous step was done", what, atomic_load(&bad));
    CHECK(atomic_load(&early) == 0, "%s: a step's loop ended %d times before its parts were done", what,
          atomic_load(&early));
    CHECK(atomic_load(&wrong_step) == 0, "%s: %d threads ended in another step than %u", what,
          atomic_load(&wrong_step), steps_with_parts());
    if (workers) {
        const uint64_t v = atomic_load(&sync.work);
        CHECK((unsigned)(v >> 32) == steps_with_parts() && (v & 0xffffffffu) == 0,
              "%s: work word %#llx after %u steps", what, (unsigned long long)v, steps_with_parts());
        CHECK(atomic_load(&sync.sleepers) == 0, "%s: %d sleepers left", what, atomic_load(&sync.sleepers));
    }
}

/* Thread 0 starts only once the others have finished every step. */
static void absent_thread(void)
{
    clear();
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    const int last = STEPS - 1;
    _Atomic int bad = 0, late_parts = 0, ran = 0;
    unsigned late_step = 0;
#pragma omp parallel num_threads(3)
    {
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        const struct het_compute_params p = { .ith = omp_get_thread_num(), .nth = omp_get_num_threads(), .worker = &w };
        atomic_fetch_add(&ran, 1);
        if (p.ith == 0)
            while (atomic_load(&done[last]) != parts_of(last)) nap_us(200);
        for (int s = 0; s < STEPS; s++) {
            const int64_t n = parts_of(s);
            for (int64_t k = het_cpu_part_first(&p, n); k < n; k = het_cpu_part_next(&p, n, k)) {
                if (p.ith == 0) atomic_fetch_add(&late_parts, 1);
                run_part(s, k, &bad);
            }
        }
        if (p.ith == 0) late_step = w.step;
    }
    if (atomic_load(&ran) != 3) {
        het_test_skip("OpenMP gave fewer than 3 threads");
    }
    CHECK(count_wrong() == 0, "absent thread: %d parts did not run exactly once", count_wrong());
    CHECK(atomic_load(&bad) == 0, "absent thread: %d parts out of order", atomic_load(&bad));
    CHECK(atomic_load(&late_parts) == 0, "absent thread: it ran %d parts of steps already over",
          atomic_load(&late_parts));
    CHECK(late_step == steps_with_parts(), "absent thread: it ended in step %u, not %u", late_step,
          steps_with_parts());
}

/* Two threads, steps of one part that takes ~20 us: the thread without the
 * part spins (50 us before it would sleep) until the other closes the step,
 * when both run at once. On a machine too busy for that (the suite beside
 * other tests on two cores) a round may have no wait that ended while
 * spinning: rounds go on until 10 such waits or 2 s; with fewer, the check
 * that they were measured says so on stderr and does not count (the others
 * in this file still run). */
static void handoff_measured(void)
{
    const int steps = 400;
    long spun_all = 0;
    int seen_all = 0;
    const double t_end = het_test_now_ms() + 2000.0;
    while (spun_all < 10 && het_test_now_ms() < t_end) {
        long spun = 0;
        int seen = 0, bad = 0, ran = 0;
        struct het_cpu_sync sync;
        het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(2) reduction(+ : spun, seen, bad, ran)
        {
            struct het_cpu_worker w;
            het_cpu_worker_init(&w, &sync);
            const struct het_compute_params p = { .ith = omp_get_thread_num(), .nth = omp_get_num_threads(),
                                                  .worker = &w };
            ran = 1;
            for (int s = 0; s < steps; s++)
                for (int64_t k = het_cpu_part_first(&p, 1); k < 1; k = het_cpu_part_next(&p, 1, k)) {
                    struct timespec t0, t1;
                    clock_gettime(CLOCK_MONOTONIC, &t0);
                    do clock_gettime(CLOCK_MONOTONIC, &t1);
                    while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 20000);
                }
            spun = w.waits - w.sleeps;
            seen = w.handoff_n;
            bad = (w.handoff_n && (w.handoff_ns <= 0 || w.handoff_ns > 100000)) ||
                  (!w.handoff_n && w.handoff_ns != INT64_MAX) || w.handoff_n > w.waits - w.sleeps;
        }
        if (ran != 2) {
            het_test_skip("OpenMP gave fewer than 2 threads");
        }
        const unsigned stamp_step = (unsigned)(atomic_load(&sync.closed) & 0xffffu);
        CHECK(stamp_step == (unsigned)(steps - 1), "hand-off: the stamp names step %u, not the last one closed (%d)",
              stamp_step, steps - 1);
        CHECK(!bad, "hand-off: a least close-to-seen time out of (0, 100 us], set without a wait, or more measures "
              "than waits that ended spinning");
        spun_all += spun;
        seen_all += seen;
    }
    if (spun_all < 10)
        fprintf(stderr, "hand-off: not checked: %ld waits ended spinning in 2 s (a busy machine)\n", spun_all);
    else
        CHECK(seen_all * 2 >= spun_all, "hand-off: %d measured of %ld waits that ended spinning", seen_all, spun_all);
}

int main(void)
{
    CHECK(parts_of(5) <= MAXP, "MAXP too small");
    omp_set_dynamic(0);
    /* first: the teams of NTH threads below leave threads spinning a while */
    handoff_measured();
    shared_steps(false, true, NTH);
    shared_steps(true, true, NTH);
    shared_steps(false, false, NTH);
    /* more threads than runs: some threads share their run (cpu_sync.c) */
    shared_steps(false, true, HET_CPU_SYNC_RUNS + 2);
    absent_thread();
    /* het_cpu_n_parts: none for no work, one for one thread, never above the cap */
    struct het_compute_params one = { .nth = 1 }, two = { .nth = 2 };
    CHECK(het_cpu_n_parts(&two, 0, 1) == 0, "parts of no work");
    CHECK(het_cpu_n_parts(&one, 1000, 1) == 1, "one thread: one part");
    CHECK(het_cpu_n_parts(&two, 1, 100) == 1, "less than a part's worth: one part");
    CHECK(het_cpu_n_parts(&two, 1000, 1) >= 2 && het_cpu_n_parts(&two, 1000, 1) <= 1000, "several parts");
    CHECK(het_cpu_n_parts(&two, 1000, 400) == 2, "parts of at least 400 units");
    return het_test_finish();
}
