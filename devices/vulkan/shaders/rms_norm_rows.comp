#version 450
// rms_norm_rows.comp — rms_norm.glsl for CPU-type devices: the workgroup is
// one subgroup (WG == subgroup size), so a row's sum is one subgroupAdd,
// with no shared memory or barrier (on lavapipe a barrier is a coroutine
// switch, and Qwen3's per-head norms are thousands of 128-element rows).
#define USE_SUBGROUP 1
#define ONE_SUBGROUP 1
#include "rms_norm.glsl"
