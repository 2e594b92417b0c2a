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
 * waits of a time slice's length (milliseconds), far beyond it. Even so a
 * thread can wait for a core its siblings hold, which is no other work's
 * doing; over a span of many ticks het_machine_load_* says whether other
 * processes used the CPUs at all.
 */
#include "sched/contention.h"

#include "sched/clock.h"

#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

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

/* CPU time of the CPUs this process may run on, from /proc/stat (clock
 * ticks, sampled at each tick: right over spans of many ticks) */
static double cpus_busy_us(int *n_cpu)
{
    cpu_set_t mask;
    bool masked = sched_getaffinity(0, sizeof mask, &mask) == 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    const double us_per_tick = 1e6 / (double)sysconf(_SC_CLK_TCK);
    double busy = 0;
    char line[512];
    *n_cpu = 0;
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long user, nice, system, idle, iowait, irq, softirq, steal = 0;
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle,
                   &iowait, &irq, &softirq, &steal) < 8)
            continue; /* the "cpu " total, or not a CPU */
        if (masked && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask))) continue;
        busy += (double)(user + nice + system + irq + softirq + steal) * us_per_tick;
        (*n_cpu)++;
    }
    fclose(f);
    return *n_cpu > 0 ? busy : -1;
}

void het_machine_load_now(struct het_machine_load *m)
{
    struct rusage ru;
    m->busy_us = cpus_busy_us(&m->n_cpu);
    m->own_us = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
                                                       (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec
                                                 : -1;
    m->wall_us = het_now_us();
}

bool het_machine_load_other(const struct het_machine_load *a, const struct het_machine_load *b, double *other_us,
                            double *capacity_us)
{
    if (a->busy_us < 0 || b->busy_us < 0 || a->own_us < 0 || b->own_us < 0 || a->n_cpu <= 0 || a->n_cpu != b->n_cpu)
        return false;
    double other = (b->busy_us - a->busy_us) - (b->own_us - a->own_us);
    *other_us = other > 0 ? other : 0;
    *capacity_us = (double)a->n_cpu * fmax(0, b->wall_us - a->wall_us);
    return true;
}
