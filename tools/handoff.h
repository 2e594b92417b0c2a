/* handoff.h — how long one thread takes to see a cache line another wrote
 * (ns, one way), measured here; see handoff.c. */
#ifndef HETRUN_HANDOFF_H
#define HETRUN_HANDOFF_H

/* The best of 3 measurements, each a ping-pong of 10000 round trips between
 * this thread and one started for it; 0 when not measured (the second
 * thread could not start, or a measurement ran past 100 ms: one core, or
 * a machine too busy to tell). */
double hr_handoff_ns(void);
#endif
