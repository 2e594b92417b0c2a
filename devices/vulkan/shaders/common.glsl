// common.glsl — what every het kernel shares (included after #version).
//
// Four storage buffers: bindings 0..2 are sources, 3 the destination. All
// are arrays of 32-bit words addressed in BYTES by the macros below, so any
// element type, any byte stride and any (2-byte aligned) offset can be read
// without 8/16-bit storage features. F16 stores go through two atomics on
// the containing word (clear our half, then set it), which is race-free
// when the neighbouring half belongs to another invocation.
// Specialization constant 0 is the workgroup size, 1 the kernel variant.

#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint VARIANT = 0;

layout(std430, binding = 0) readonly buffer Src0 { uint d[]; } s0;
layout(std430, binding = 1) readonly buffer Src1 { uint d[]; } s1;
layout(std430, binding = 2) readonly buffer Src2 { uint d[]; } s2;
layout(std430, binding = 3) buffer Dst { uint d[]; } sd;

// het_type ids (include/het/type.h)
#define T_F32  0u
#define T_F16  1u
#define T_Q4_0 2u
#define T_Q8_0 8u
#define T_Q4_K 12u
#define T_Q6_K 14u

#define NEG_BIG (-3.0e38)

#define LD_F32(B, o) uintBitsToFloat(B.d[(o) >> 2])
#define LD_F16(B, o) unpackHalf2x16(B.d[(o) >> 2] >> (((o) & 2u) << 3)).x
#define LD_U8(B, o)  ((B.d[(o) >> 2] >> (((o) & 3u) << 3)) & 0xFFu)
#define LD_T(B, f16, o) ((f16) ? LD_F16(B, o) : LD_F32(B, o))

void st_f32(uint o, float v) { sd.d[o >> 2] = floatBitsToUint(v); }

void st_f16(uint o, float v)
{
    uint sh = (o & 2u) << 3;
    uint bits = packHalf2x16(vec2(v, 0.0)) & 0xFFFFu;
    atomicAnd(sd.d[o >> 2], ~(0xFFFFu << sh));
    atomicOr(sd.d[o >> 2], bits << sh);
}

void st_t(bool f16, uint o, float v)
{
    if (f16) st_f16(o, v); else st_f32(o, v);
}

// Workgroups beyond the x limit are laid out over y (host: het_vk_emit).
uint group_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

float silu(float x) { return x / (1.0 + exp(-x)); }
