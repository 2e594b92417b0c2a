// subgroup_ext.glsl — extensions for the USE_SUBGROUP builds (include first).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
