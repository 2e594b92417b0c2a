/* membw.h — measured read bandwidth of this machine (GB/s), see membw.c. */
#ifndef HETRUN_MEMBW_H
#define HETRUN_MEMBW_H
#include <stdbool.h>
#include <stddef.h>

double hr_measure_read_bandwidth(int n_threads);

/* The same, with the buffer kept between measurements: bench measures the
 * bandwidth right after each decode run, at that minute's speed of memory
 * (a VM's neighbours move it by up to 2x), not once for all runs. */
struct hr_membw;
struct hr_membw *hr_membw_open(int n_threads); /* NULL: no memory */
double hr_membw_measure(struct hr_membw *m);
/* One read of the next `bytes` of the buffer (rotating through it, so every
 * pass reads what the last-level cache no longer holds), by the same
 * threads; adds its bytes and wall seconds to *bytes_done and *seconds.
 * Decode runs take such passes between their tokens: the bound then comes
 * from the same seconds as the tokens. false: the pass did not get every
 * thread (nothing added). */
bool hr_membw_pass(struct hr_membw *m, size_t bytes, double *bytes_done, double *seconds);
void hr_membw_close(struct hr_membw *m);
#endif
