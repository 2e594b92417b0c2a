#version 450
#include "mul_mat_vec.glsl"
