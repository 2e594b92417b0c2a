/*
 * test_cpu_pool.c — the CPU device's thread pool (devices/cpu/cpu_pool.c)
 * with the shared steps of cpu_sync.c, as the device runs them. Checked for
 * correctness only, never for time:
 *   - many jobs of one to four steps with random part counts (0 to several
 *     per thread): every part of every step runs exactly once, no part
 *     starts before the previous step's parts are all done, and the
 *     caller's walk ends only when its last step is done;
 *   - workers held back on purpose (a delay hook before they enter, naps
 *     inside parts that outlast the spin): no thread ever runs a line of a
 *     job after the caller's het_cpu_pool_run returned (each job's memory
 *     is freed then, so ASan sees any touch, and a flag set then is checked
 *     at every step of every thread);
 *   - workers blocked until the caller has finished the job alone: none of
 *     them enters it, and the caller did every part;
 *   - gated nodes (het_cpu_node_enter / het_cpu_sync_all, as mul_mat_id):
 *     a step count read from scratch that the next node overwrites is
 *     always the node's own, whoever joins late;
 *   - pools of one and two threads made and freed, jobs run on them.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "devices/cpu/cpu_pool.h"
#include "testutil.h"

#define NTH   4 /* more threads than this machine's cores */
#define JOBS  2500
#define MAXS  4
#define MAXP  24

static void nap_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* What the test shares with the delay hook and the jobs (not a job's). */
struct world {
    _Atomic int closed[JOBS];    /* set once the job's het_cpu_pool_run returned */
    _Atomic int touched_closed;  /* job code that ran on a closed job            */
    _Atomic int current;         /* job being run                                */
    _Atomic int finished;        /* jobs whose run returned                      */
    _Atomic int scratch;         /* gated nodes' data, overwritten by every node */
    int         mode[JOBS];      /* how workers are held back                    */
};

enum { HOLD_NONE, HOLD_NAP, HOLD_UNTIL_DONE, HOLD_PARTS };

/* One job: lives on the heap from before its run until just after it. */
struct job {
    struct world *wd;
    int           id;
    unsigned      first_step;
    int           n_steps;
    bool          gated;
    unsigned      key;
    int64_t       parts[MAXS];
    _Atomic int   hits[MAXS][MAXP];
    _Atomic int   done[MAXS];
    _Atomic int   by_caller, worker_entries, bad_order, bad_count, early;
};

static void check_open(const struct job *j)
{
    if (atomic_load(&j->wd->closed[j->id])) atomic_fetch_add(&j->wd->touched_closed, 1);
}

static void run_part(struct job *j, int s, int64_t k, int ith)
{
    check_open(j);
    for (int q = s - 1; q >= 0; q--) {
        if (!j->parts[q]) continue;
        if (atomic_load(&j->done[q]) != j->parts[q]) atomic_fetch_add(&j->bad_order, 1);
        break;
    }
    if (j->wd->mode[j->id] == HOLD_PARTS && k == 0) nap_us(s % 2 ? 600 : 120);
    atomic_fetch_add(&j->hits[s][k], 1);
    if (ith == 0) atomic_fetch_add(&j->by_caller, 1);
    atomic_fetch_add(&j->done[s], 1);
}

/* A gated node: one part writes the step count into scratch, every thread
 * reads it from there (outside parts, as mul_mat_id reads its grouping), a
 * step of that many parts, and the meeting at the end. */
static bool gated_node(struct job *j, const struct het_compute_params *p, unsigned key, int want)
{
    if (!het_cpu_node_enter(p, key)) return false;
    for (int64_t k = het_cpu_part_first(p, 1); k < 1; k = het_cpu_part_next(p, 1, k)) atomic_store(&j->wd->scratch, want);
    check_open(j);
    const int64_t n = atomic_load(&j->wd->scratch);
    if (n != want) atomic_fetch_add(&j->bad_count, 1);
    for (int64_t k = het_cpu_part_first(p, n); k < n; k = het_cpu_part_next(p, n, k)) check_open(j);
    het_cpu_sync_all(p);
    return true;
}

static void job_fn(void *arg, struct het_cpu_worker *w, int ith)
{
    struct job *j = arg;
    check_open(j);
    if (ith) atomic_fetch_add(&j->worker_entries, 1);
    w->step = j->first_step;
    const struct het_compute_params p = { .ith = ith, .nth = NTH, .worker = w };
    for (int s = 0; s < j->n_steps; s++) {
        const int64_t n = j->parts[s];
        for (int64_t k = het_cpu_part_first(&p, n); k < n; k = het_cpu_part_next(&p, n, k)) run_part(j, s, k, ith);
        check_open(j);
        if (atomic_load(&j->done[s]) != n) atomic_fetch_add(&j->early, 1);
        if (j->gated && s == 0) {
            /* two gated nodes sharing the scratch, counts told apart */
            if (!gated_node(j, &p, j->key, 3 + j->id % 5)) return;
            if (!gated_node(j, &p, j->key + 1, 9 + j->id % 7)) return;
        }
    }
}

/* The hook: nap, or wait until the job being run has finished. */
static void hold(void *ctx, int ith)
{
    struct world *wd = ctx;
    const int id = atomic_load(&wd->current);
    switch (wd->mode[id]) {
    case HOLD_NAP: nap_us(ith * 37 % 200); break;
    case HOLD_UNTIL_DONE:
        while (atomic_load(&wd->finished) <= id) nap_us(20);
        break;
    default: break;
    }
}

static void many_jobs(void)
{
    het_error err = { 0 };
    het_cpu_pool *pool = het_cpu_pool_new(NTH, &err);
    CHECK(pool != NULL, "pool: %s", err.msg);
    if (!pool) return;
    struct world *wd = calloc(1, sizeof *wd);
    het_cpu_pool_set_delay(pool, hold, wd);
    srand(12345);
    int wrong = 0, order = 0, counts = 0, early = 0, entered_held = 0, caller_short = 0, gated = 0;
    unsigned key = 1;
    for (int id = 0; id < JOBS; id++) {
        const int r = rand() % 100;
        wd->mode[id] = r < 50 ? HOLD_NONE : r < 75 ? HOLD_NAP : r < 90 ? HOLD_PARTS : HOLD_UNTIL_DONE;
        struct job *j = calloc(1, sizeof *j);
        j->wd = wd;
        j->id = id;
        j->n_steps = 1 + rand() % MAXS;
        for (int s = 0; s < j->n_steps; s++) j->parts[s] = rand() % 7 == 0 ? 0 : rand() % (MAXP + 1);
        j->gated = rand() % 4 == 0;
        gated += j->gated;
        j->key = key;
        key += 2;
        j->first_step = (unsigned)(atomic_load(&het_cpu_pool_sync(pool)->work) >> 32);
        atomic_store(&wd->current, id);
        het_cpu_pool_run(pool, job_fn, j);
        atomic_store(&wd->closed[id], 1);
        atomic_store(&wd->finished, id + 1);
        for (int s = 0; s < MAXS; s++)
            for (int k = 0; k < MAXP; k++) wrong += atomic_load(&j->hits[s][k]) != (s < j->n_steps && k < j->parts[s]);
        order += atomic_load(&j->bad_order);
        counts += atomic_load(&j->bad_count);
        early += atomic_load(&j->early);
        if (wd->mode[id] == HOLD_UNTIL_DONE) {
            int64_t total = 0;
            for (int s = 0; s < j->n_steps; s++) total += j->parts[s];
            entered_held += atomic_load(&j->worker_entries) != 0;
            caller_short += atomic_load(&j->by_caller) != total;
        }
        free(j); /* a worker still in it would be a use after free */
    }
    /* every step of every job is over: the word is at a step boundary */
    const uint64_t v = atomic_load(&het_cpu_pool_sync(pool)->work);
    struct het_cpu_pool_stats st;
    het_cpu_pool_get_stats(pool, &st);
    het_cpu_pool_free(pool);
    printf("%d jobs (%d with gated nodes): workers entered %ld times, came late %ld, left a job that ended "
           "while they waited %ld\n",
           JOBS, gated, st.entered, st.late, st.escaped);
    CHECK(wrong == 0, "%d parts did not run exactly once", wrong);
    CHECK(order == 0, "%d parts started before the previous step was done", order);
    CHECK(early == 0, "a step's loop ended %d times before its parts were done", early);
    CHECK(counts == 0, "%d gated-node reads saw another node's scratch", counts);
    CHECK(atomic_load(&wd->touched_closed) == 0, "job code ran %d times after its run returned",
          atomic_load(&wd->touched_closed));
    CHECK(entered_held == 0, "%d jobs were entered by workers held until the caller was done", entered_held);
    CHECK(caller_short == 0, "%d jobs finished alone had parts the caller did not run", caller_short);
    CHECK((v & 0xffffffffu) == 0, "work word %#llx after the last job", (unsigned long long)v);
    CHECK(st.jobs == JOBS, "%ld jobs posted, not %d", st.jobs, JOBS);
    free(wd);
}

/* Small pools: one thread runs the job itself; two make and free cleanly. */
static void small_pools(void)
{
    for (int nth = 1; nth <= 2; nth++) {
        for (int rep = 0; rep < 20; rep++) {
            het_error err = { 0 };
            het_cpu_pool *pool = het_cpu_pool_new(nth, &err);
            CHECK(pool && het_cpu_pool_n_threads(pool) == nth, "pool of %d: %s", nth, err.msg);
            if (!pool) return;
            struct world *wd = calloc(1, sizeof *wd);
            struct job *j = calloc(1, sizeof *j);
            j->wd = wd;
            j->n_steps = 2;
            j->parts[0] = 5;
            j->parts[1] = 1;
            j->first_step = (unsigned)(atomic_load(&het_cpu_pool_sync(pool)->work) >> 32);
            if (rep % 2) het_cpu_pool_run(pool, job_fn, j);
            int wrong = 0;
            for (int s = 0; s < 2; s++)
                for (int k = 0; k < MAXP; k++)
                    wrong += atomic_load(&j->hits[s][k]) != (rep % 2 && k < j->parts[s]);
            CHECK(wrong == 0, "pool of %d: %d parts wrong", nth, wrong);
            het_cpu_pool_free(pool); /* with workers asleep, or still spinning */
            free(j);
            free(wd);
        }
    }
}

int main(void)
{
    small_pools();
    many_jobs();
    return het_test_finish();
}
