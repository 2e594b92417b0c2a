/* membw.h — measured read bandwidth of this machine (GB/s), see membw.c. */
#ifndef HETRUN_MEMBW_H
#define HETRUN_MEMBW_H
double hr_measure_read_bandwidth(int n_threads);
#endif
