/*
 * test_cpu_sync.c — the CPU device's thread barrier (devices/cpu/cpu_sync.c)
 * keeps every thread in step: after each barrier every thread must see the
 * values all threads wrote before it, in rounds where one thread is late
 * enough that the others go through the yield and futex-sleep phases too.
 */
#include <omp.h>
#include <stdatomic.h>
#include <time.h>

#include "devices/cpu/cpu_ops.h"
#include "testutil.h"

#define NTH    4
#define ROUNDS 3000

static void nap_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

int main(void)
{
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync, NTH);
    _Atomic int slot[NTH];
    for (int i = 0; i < NTH; i++) atomic_init(&slot[i], -1);
    _Atomic int bad = 0, ran = 0;
#pragma omp parallel num_threads(NTH)
    {
        const int ith = omp_get_thread_num();
        if (omp_get_num_threads() == NTH) {
            atomic_fetch_add(&ran, 1);
            for (int r = 0; r < ROUNDS; r++) {
                /* now and then one thread is late: short, past the spin, past the yields */
                if (r % 97 == 0 && ith == r % NTH) nap_us(r % 3 == 0 ? 2000 : r % 3 == 1 ? 100 : 5);
                atomic_store_explicit(&slot[ith], r, memory_order_relaxed);
                het_cpu_sync_wait(&sync);
                for (int i = 0; i < NTH; i++)
                    if (atomic_load_explicit(&slot[i], memory_order_relaxed) != r) atomic_fetch_add(&bad, 1);
                het_cpu_sync_wait(&sync);
            }
        }
    }
    if (atomic_load(&ran) != NTH) het_test_skip("OpenMP gave fewer than %d threads", NTH);
    CHECK(atomic_load(&bad) == 0, "%d stale reads after the barrier", atomic_load(&bad));
    CHECK(atomic_load(&sync.arrived) == 0, "arrival count left at %d", atomic_load(&sync.arrived));
    CHECK(atomic_load(&sync.phase) == 2u * ROUNDS, "phase %u after %d barriers", atomic_load(&sync.phase), 2 * ROUNDS);
    return het_test_finish();
}
