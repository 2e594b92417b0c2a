#version 450
// mul_mat_rowsn.comp — mul_mat_rows.glsl for several columns (prefill,
// batched decode): 16 rows per invocation, 8 columns per pass
// (HET_VK_ROWSN_R, HET_VK_ROWSN_TM). On lavapipe 16x8 and 16x16 tiles run
// a 512-column product about equally fast; 8 wastes less on small M.
#define R 16u
#define TM 8u
#include "mul_mat_rows.glsl"
