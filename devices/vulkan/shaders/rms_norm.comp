#version 450
#include "rms_norm.glsl"
