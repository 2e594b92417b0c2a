#version 450
#define USE_SUBGROUP 1
#include "attn.glsl"
