/*
 * test_busy_machine.c — telling a busy machine from a device's own threads
 * (sched/contention.c, het_machine_load_*) and the calibration verdict that
 * depends on it (het_calibrate_too_noisy, policy/calibrate.c).
 *
 * A CPU-type Vulkan driver (lavapipe) runs its own threads on the CPU's
 * cores; their waits for each other and for wake-ups made a full
 * calibration on an idle machine count 11 of 72 samples disturbed, and the
 * profile was refused. Disturbed samples now count only when other
 * processes used the CPUs while they were measured. Checked: the verdict's
 * rule, the load arithmetic on made-up counters, and on the live machine
 * that busy child processes count as other work and this process's own busy
 * threads do not (other work and own work together cannot exceed what the
 * CPUs had; the suite may run beside, so nothing is asked to be quiet).
 */
#include "policy/microbench.h"
#include "sched/contention.h"
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAN_MS 300

static void test_verdict(void)
{
    /* the refused full calibration: 11 of 72 disturbed on an idle machine */
    CHECK(!het_calibrate_too_noisy(11, 0, 72, 0.02), "quiet machine: own threads' waits refused the profile");
    CHECK(het_calibrate_too_noisy(11, 0, 72, 0.45), "busy machine: 11 of 72 disturbed must refuse");
    CHECK(het_calibrate_too_noisy(11, 0, 72, -1), "load not known: disturbed samples must count");
    CHECK(het_calibrate_too_noisy(11, 0, 72, HET_BUSY_SHARE), "at the threshold the machine is busy");
    CHECK(het_calibrate_too_noisy(0, 8, 72, 0.0), "off-trend samples count on a quiet machine too");
    CHECK(!het_calibrate_too_noisy(7, 0, 72, 1.0), "7 of 72 is under a tenth");
    CHECK(!het_calibrate_too_noisy(0, 0, 0, 1.0), "no samples: nothing to refuse");
}

static void test_arithmetic(void)
{
    struct het_machine_load a = { .busy_us = 1e6, .own_us = 5e5, .wall_us = 1e7, .n_cpu = 2 };
    struct het_machine_load b = { .busy_us = 1.3e6, .own_us = 6e5, .wall_us = 1e7 + 1e5, .n_cpu = 2 };
    double other = -1, cap = -1;
    CHECK(het_machine_load_other(&a, &b, &other, &cap), "known counters");
    CHECK(other == 2e5 && cap == 2e5, "other %.0f (want 200000), capacity %.0f (want 200000)", other, cap);
    b.own_us = 9e5; /* /proc/stat samples at ticks: own time can exceed what it saw */
    CHECK(het_machine_load_other(&a, &b, &other, &cap) && other == 0, "other clamps at 0: %.0f", other);
    b.busy_us = -1;
    CHECK(!het_machine_load_other(&a, &b, &other, &cap), "unknown busy time");
    b.busy_us = 1.3e6;
    b.n_cpu = 3;
    CHECK(!het_machine_load_other(&a, &b, &other, &cap), "CPU set changed");
}

static atomic_bool spin_stop;

static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long x = 0;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) x++;
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Shares of the CPUs other processes (returned) and this one (*own) used
 * over SPAN_MS while n busy loops ran as child processes (children) or as
 * threads of this one; -1 when not known. */
static double share_beside(int n, bool children, double *own)
{
    pid_t pid[16];
    pthread_t th[16];
    struct het_machine_load a, b;
    het_machine_load_now(&a);
    atomic_store(&spin_stop, false);
    for (int i = 0; i < n; i++) {
        if (children) {
            pid[i] = fork();
            if (pid[i] == 0) {
                spin(NULL);
                _exit(0);
            }
        } else {
            pthread_create(&th[i], NULL, spin, NULL);
        }
    }
    sleep_ms(SPAN_MS);
    het_machine_load_now(&b); /* before the loops stop: their time is in */
    atomic_store(&spin_stop, true);
    for (int i = 0; i < n; i++) {
        if (children) {
            if (pid[i] > 0) kill(pid[i], SIGKILL);
            if (pid[i] > 0) waitpid(pid[i], NULL, 0);
        } else {
            pthread_join(th[i], NULL);
        }
    }
    double other = 0, cap = 0;
    if (!het_machine_load_other(&a, &b, &other, &cap) || cap <= 0) return -1;
    *own = (b.own_us - a.own_us) / cap;
    return other / cap;
}

static void test_live(void)
{
    struct het_machine_load m;
    het_machine_load_now(&m);
    if (m.busy_us < 0 || m.own_us < 0) {
        printf("no /proc/stat or getrusage here: live check skipped\n");
        return;
    }
    int n = m.n_cpu < 16 ? m.n_cpu : 16;
    double own_c = 0, own_t = 0;
    double others = share_beside(n, true, &own_c), other_t = share_beside(n, false, &own_t);
    printf("%d busy loops for %d ms: as child processes, other work %.2f of the CPUs; as threads, this process "
           "%.2f and other work %.2f\n", n, SPAN_MS, others, own_t, other_t);
    CHECK(others >= 0.4, "busy child processes counted as other work: %.2f of the CPUs (want >= 0.4)", others);
    if (own_t < 0.2) {
        printf("the threads got under a fifth of the CPUs (busy machine): own-work check skipped\n");
        return;
    }
    CHECK(other_t >= 0 && other_t + own_t <= 1.15,
          "this process's own busy threads counted as other work: other %.2f + own %.2f of the CPUs", other_t, own_t);
}

int main(void)
{
    test_verdict();
    test_arithmetic();
    test_live();
    return het_test_finish();
}
