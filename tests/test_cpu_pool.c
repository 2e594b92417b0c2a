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
 *   - pools of one and two threads made and freed, jobs run on them;
 *   - het_cpu_pool_expect (the device's hint that a job is coming): jobs
 *     after it run whole, and a hint that no job follows costs the workers
 *     a bounded spin, not a core (their CPU time over the next 50 ms);
 *   - the CPU device itself (4 threads, more than this machine's cores):
 *     a split of two mul_mat_id nodes, the second overwriting the first's
 *     grouping in the shared scratch, run many times, every output against
 *     a double-precision reference.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices/cpu/cpu_pool.h"
#include "het/device.h"
#include "het/graph.h"
#include "sched/device_impl.h"
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

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Expected jobs: posted after the hint, every part runs once; a hint with no
 * job after it: the woken workers spin for at most about a millisecond and
 * sleep again (an endless spin would use the 50 ms the test waits). */
static void expected_jobs(void)
{
    het_error err = { 0 };
    het_cpu_pool *pool = het_cpu_pool_new(NTH, &err);
    CHECK(pool != NULL, "pool of %d: %s", NTH, err.msg);
    if (!pool) return;
    struct world *wd = calloc(1, sizeof *wd);
    int wrong = 0;
    for (int rep = 0; rep < 40; rep++) {
        if (rep % 4 == 0) nap_us(2000); /* the workers asleep when the hint comes */
        het_cpu_pool_expect(pool);
        if (rep % 2) nap_us(100);
        struct job *j = calloc(1, sizeof *j);
        j->wd = wd;
        j->n_steps = 2;
        j->parts[0] = 1 + rep % 9;
        j->parts[1] = NTH;
        j->first_step = (unsigned)(atomic_load(&het_cpu_pool_sync(pool)->work) >> 32);
        het_cpu_pool_run(pool, job_fn, j);
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < MAXP; k++) wrong += atomic_load(&j->hits[s][k]) != (k < j->parts[s]);
        free(j);
    }
    CHECK(wrong == 0, "expected jobs: %d parts did not run exactly once", wrong);
    nap_us(5000); /* asleep again */
    const double c0 = process_cpu_ms();
    het_cpu_pool_expect(pool); /* and no job */
    nap_us(50000);
    const double used = process_cpu_ms() - c0;
    printf("a hint with no job: the %d workers used %.2f ms of CPU in the next 50 ms\n", NTH - 1, used);
    CHECK(used < 25.0, "a hint with no job after it kept the workers spinning: %.1f ms of CPU in 50 ms", used);
    het_cpu_pool_free(pool);
    free(wd);
}

/* mul_mat_id over dense F32 tensors: experts (K, N, E), b (K, 1, T), ids (k, T). */
enum { MK = 64, MN = 128, ME = 8, MSLOTS = 2, MT = 24 };

struct moe_node {
    struct het_tensor as, b, ids, d;
    float   a[ME * MN * MK], x[MT * MK], y[MT * MSLOTS * MN];
    int32_t id[MT * MSLOTS];
};

static void moe_node_init(struct moe_node *m, const float *a, int salt)
{
    const int64_t ane[3] = { MK, MN, ME }, bne[3] = { MK, 1, MT }, ine[2] = { MSLOTS, MT }, dne[3] = { MN, MSLOTS, MT };
    memcpy(m->a, a, sizeof m->a);
    het_tensor_init(&m->as, HET_TYPE_F32, 3, ane);
    het_tensor_init(&m->b, HET_TYPE_F32, 3, bne);
    het_tensor_init(&m->ids, HET_TYPE_I32, 2, ine);
    het_tensor_init(&m->d, HET_TYPE_F32, 3, dne);
    m->as.data = m->a;
    m->b.data = m->x;
    m->ids.data = m->id;
    m->d.data = m->y;
    het_test_fill_normal(m->x, MT * MK, 1.0f);
    /* distinct experts per token, skewed differently per node */
    for (int t = 0; t < MT; t++)
        for (int s = 0; s < MSLOTS; s++) m->id[t * MSLOTS + s] = (t * (salt + 1) / 5 + 3 * s + salt) % ME;
    m->d.op = HET_OP_MUL_MAT_ID;
    m->d.src[0] = &m->as;
    m->d.src[1] = &m->b;
    m->d.src[2] = &m->ids;
    snprintf(m->d.name, sizeof m->d.name, "moe-%d", salt);
}

static int moe_node_wrong(const struct moe_node *m)
{
    int wrong = 0;
    for (int t = 0; t < MT; t++)
        for (int s = 0; s < MSLOTS; s++)
            for (int n = 0; n < MN; n++) {
                const float *w = m->a + ((size_t)m->id[t * MSLOTS + s] * MN + n) * MK;
                double ref = 0, mag = 0;
                for (int i = 0; i < MK; i++) {
                    ref += (double)w[i] * m->x[t * MK + i];
                    mag += fabs((double)w[i] * m->x[t * MK + i]);
                }
                const float got = m->y[(t * MSLOTS + s) * MN + n];
                wrong += !(fabs(got - ref) <= 1e-5 * mag + 1e-6);
            }
    return wrong;
}

static void device_gated_nodes(void)
{
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(4, &err);
    CHECK(dev != NULL, "cpu device: %s", err.msg);
    if (!dev) return;
    float *a = malloc(sizeof(float) * ME * MN * MK);
    het_test_fill_normal(a, (size_t)ME * MN * MK, 1.0f);
    struct moe_node *m = calloc(2, sizeof *m);
    moe_node_init(&m[0], a, 0);
    moe_node_init(&m[1], a, 1);
    CHECK(het_cpu_supports(&m[0].d), "mul_mat_id over F32 not supported");
    /* big enough for the device to share the split between its threads */
    CHECK(het_cpu_node_work(&m[0].d) >= (64u << 10), "nodes too small to be shared: %zu bytes",
          het_cpu_node_work(&m[0].d));
    struct het_tensor *nodes[2] = { &m[0].d, &m[1].d };
    int runs_wrong = 0, failed = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < 2; i++)
            for (size_t j = 0; j < sizeof m[i].y / sizeof(float); j++) m[i].y[j] = NAN;
        if (het_device_run_split(dev, nodes, 2, &err) != HET_OK) {
            failed++;
            continue;
        }
        runs_wrong += moe_node_wrong(&m[0]) + moe_node_wrong(&m[1]) > 0;
    }
    CHECK(failed == 0, "device split failed %d times: %s", failed, err.msg);
    CHECK(runs_wrong == 0, "%d of 200 runs of two mul_mat_id nodes had wrong outputs", runs_wrong);
    het_device_free(dev);
    free(m);
    free(a);
}

int main(void)
{
    small_pools();
    expected_jobs();
    many_jobs();
    device_gated_nodes();
    return het_test_finish();
}
