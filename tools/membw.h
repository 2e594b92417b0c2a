/* membw.h — measured read bandwidth of this machine (GB/s), see membw.c. */
#ifndef HETRUN_MEMBW_H
#define HETRUN_MEMBW_H
#include <stddef.h>
#include <stdint.h>

double hr_measure_read_bandwidth(int n_threads);

/* The sum of the 64-bit words of p[0..bytes) read with the widest vector
 * loads this CPU has (bytes a multiple of 256): the loop every figure here
 * comes from, for a benchmark that reads memory on threads of its own
 * (bench/bench_stream.c). */
uint64_t hr_read_widest(const void *p, size_t bytes);

/* The same, with the buffer kept between measurements: bench measures the
 * bandwidth right after each decode run, at that minute's speed of memory
 * (a VM's neighbours move it by up to 2x), not once for all runs. */
struct hr_membw;
struct hr_membw *hr_membw_open(int n_threads); /* NULL: no memory */
double hr_membw_measure(struct hr_membw *m);
/* One read of the next `bytes` of the buffer (rotating through it, so every
 * pass reads what the last-level cache no longer holds) by the same
 * threads: its GB/s, 0 if a thread could not start. Decode runs take such
 * passes between their tokens, so that their bound comes from the same
 * seconds as the tokens. */
double hr_membw_pass(struct hr_membw *m, size_t bytes);
void hr_membw_close(struct hr_membw *m);
#endif
