#version 450
#define USE_SUBGROUP 1
#include "sum_rows.glsl"
