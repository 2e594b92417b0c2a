#version 450
// mul_mat_vec_id_sg.comp — mul_mat_vec_id.comp with subgroup reductions.
#define USE_SUBGROUP 1
#define MUL_MAT_ID 1
#include "mul_mat_vec.glsl"
