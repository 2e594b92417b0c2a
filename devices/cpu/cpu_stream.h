/*
 * cpu_stream.h — the hint decode's weight stream asks ahead with, chosen
 * from where the CPU device's threads run (cpu_stream.c).
 */
#ifndef HET_CPU_STREAM_H
#define HET_CPU_STREAM_H

#include <stdint.h>

#include "devices/cpu/cpu_ops.h"
#include "het/status.h"

/* auto: from the threads' hand-off; nta, t0: fixed (HET_CPU_STREAM) */
enum het_cpu_stream_mode { HET_CPU_STREAM_AUTO, HET_CPU_STREAM_FIXED };

struct het_cpu_stream_choice {
    enum het_cpu_stream_mode mode;
    enum het_cpu_stream      hint;       /* for the next split                          */
    double                   handoff_ns; /* the measure the hint rests on (0: none yet) */
    int64_t                  last[3];    /* the last three splits' measures, ns,       */
    int                      n_last;     /* how many of them there are (<= 3),         */
    int                      at;         /* and where the next goes                    */
    uint64_t                 splits[HET_CPU_STREAM_COUNT]; /* shared splits run with each */
};

/* The choice as HET_CPU_STREAM says (env: its value, NULL or "" for auto):
 * "auto", "nta" or "t0"; anything else is an error naming the value. */
enum het_status het_cpu_stream_init(struct het_cpu_stream_choice *s, const char *env, het_error *err);
/* A shared split ran with s->hint; its caller saw n step closes while
 * spinning, the quickest min_ns after its closer stamped it. Chooses the
 * hint for the next split. */
void het_cpu_stream_update(struct het_cpu_stream_choice *s, int64_t min_ns, int n);
const char *het_cpu_stream_name(enum het_cpu_stream hint);
/* The least close-to-seen time, ns, from which the threads count as far
 * apart (two last-level caches). */
double het_cpu_stream_far_ns(void);

#endif /* HET_CPU_STREAM_H */
