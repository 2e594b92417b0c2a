#version 450
#define USE_SUBGROUP 1
#include "mul_mat_vec.glsl"
