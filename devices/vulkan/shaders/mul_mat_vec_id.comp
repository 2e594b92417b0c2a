#version 450
// mul_mat_vec_id.comp — MUL_MAT_ID, one GEMV per (slot, token) (mul_mat_vec.glsl).
#define MUL_MAT_ID 1
#include "mul_mat_vec.glsl"
