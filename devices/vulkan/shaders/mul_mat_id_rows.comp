#version 450
// mul_mat_id_rows.comp — grouped MUL_MAT_ID on CPU-type devices
// (mul_mat_rows.glsl built with MUL_MAT_ID): 8 rows per invocation over a
// column tile of up to 8 token-slot pairs of one expert (HET_VK_ROWSN_R,
// HET_VK_MOE_ROWS_TILE).
#define R 8u
#define TM 8u
#define MUL_MAT_ID 1
#include "mul_mat_rows.glsl"
