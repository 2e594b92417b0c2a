#version 450
#include "attn.glsl"
