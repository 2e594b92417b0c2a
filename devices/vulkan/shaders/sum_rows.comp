#version 450
#include "sum_rows.glsl"
