/*
 * cpu_peak.h — per-ISA loops that measure the CPU's arithmetic limits
 * (arch/<isa>/peak_<isa>.c), run on every thread by cpu_peak.c. Each runs
 * `iters` iterations and returns the operations performed (a multiply-add
 * counts two); *sink keeps the result alive.
 */
#ifndef HET_CPU_PEAK_H
#define HET_CPU_PEAK_H

#include <stdbool.h>
#include <stdint.h>

double het_peak_int8_avx2(int64_t iters, uint32_t *sink);
double het_peak_f32_avx2(int64_t iters, uint32_t *sink);
double het_peak_int8_avx512(int64_t iters, bool vnni, uint32_t *sink);
double het_peak_f32_avx512(int64_t iters, uint32_t *sink);
double het_peak_int8_amx(int64_t iters, uint32_t *sink);

#endif /* HET_CPU_PEAK_H */
