#version 450
// mul_mat_rows1.comp — mul_mat_rows.glsl for one column (decode): 8 rows per
// invocation (HET_VK_ROWS1_R).
#define R 8u
#define TM 1u
#include "mul_mat_rows.glsl"
