/*
 * contention.c — counters that tell whether a timed region was disturbed
 * by other work (see contention.h).
 *
 * The run-queue wait is the second field of /proc/self/task/<tid>/schedstat
 * (nanoseconds a thread was ready to run but had no core), summed over the
 * threads of the process: it sees a device thread that waited for a core at
 * a barrier or after a wake-up, which no preemption counter does (a thread
 * that yields or sleeps and then waits is not preempted). Involuntary
 * context switches (getrusage) are the fallback.
 *
 * Not every wait is other work's doing. A thread woken on an idle core
 * waits for that core to wake up (in a VM, for the vCPU to be scheduled):
 * about 6 µs per time slice measured here, on every slice, busy machine or
 * not. A device that wakes its own threads for every dispatch (lavapipe:
 * dozens of slices per sample) collects tens of µs of such waits per
 * sample, and was judged disturbed on an idle machine, so its profile was
 * never cached. WAKE_US per slice is allowed for; other work shows up as
 * waits of a time slice's length (milliseconds), far beyond it.
 */
#include "sched/contention.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#define WAKE_US 10.0 /* allowed run-queue wait per time slice: a wake-up, not other work */

static double runqueue_wait_us(long *slices)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    double total = 0;
    bool any = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* the thread ended */
        unsigned long long run = 0, wait = 0, n = 0;
        if (fscanf(f, "%llu %llu %llu", &run, &wait, &n) == 3) {
            total += (double)wait / 1e3;
            *slices += (long)n;
            any = true;
        }
        fclose(f);
    }
    closedir(d);
    return any ? total : -1;
}

void het_contention_now(struct het_contention *c)
{
    struct rusage ru;
    c->preempted = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nivcsw : 0;
    c->slices = 0;
    c->wait_us = runqueue_wait_us(&c->slices);
}

bool het_contention_disturbed(const struct het_contention *a, const struct het_contention *b, double wall_us)
{
    if (a->wait_us >= 0 && b->wait_us >= 0) {
        double wake = WAKE_US * (double)(b->slices - a->slices);
        return b->wait_us - a->wait_us - wake > 20 + 0.05 * wall_us;
    }
    return b->preempted != a->preempted;
}
