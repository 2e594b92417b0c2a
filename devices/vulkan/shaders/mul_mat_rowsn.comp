#version 450
// mul_mat_rowsn.comp — mul_mat_rows.glsl for several columns (prefill,
// batched decode): 8 rows per invocation, 8 columns per pass
// (HET_VK_ROWSN_R, HET_VK_ROWSN_TM). On lavapipe an 8x8 tile runs a
// 512-column product as fast as 16x8 did, and LLVM compiles it in a
// fraction of the time (16x8: seconds at the first dispatch).
#define R 8u
#define TM 8u
#include "mul_mat_rows.glsl"
