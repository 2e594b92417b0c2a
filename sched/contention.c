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
 */
#include "sched/contention.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static double runqueue_wait_us(void)
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
        unsigned long long run = 0, wait = 0;
        if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
            total += (double)wait / 1e3;
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
    c->wait_us = runqueue_wait_us();
}

bool het_contention_disturbed(const struct het_contention *a, const struct het_contention *b, double wall_us)
{
    if (a->wait_us >= 0 && b->wait_us >= 0) return b->wait_us - a->wait_us > 20 + 0.05 * wall_us;
    return b->preempted != a->preempted;
}
