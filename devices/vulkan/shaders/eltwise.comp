#version 450
// eltwise.comp — ADD, MUL, SWIGLU, DIV (two sources, src1 broadcast by
// modulo), SCALE, SILU and SIGMOID (one source). VARIANT = op + 8 * types:
// op 0 add, 1 mul, 2 swiglu, 3 scale, 4 silu, 5 div, 6 sigmoid; types bit0 src0 F16, bit1 src1 F16, bit2 dst
// F16 (else F32) — specialised, so no invocation runs the other type's
// loads and stores (drivers that mask instead of branching would). One
// invocation per destination element; any strides. In-place (dst aliasing
// src0) is fine: each invocation reads its element before writing it.
#include "common.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;         // destination (and src0) shape
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint b_ne0, b_ne1, b_ne2, b_ne3; // src1 shape: each dim 1 or equal
    uint b_nb0, b_nb1, b_nb2, b_nb3;
    uint a_off, b_off, d_off;
    uint types;                      // as in VARIANT (unused here)
    float param;                     // SCALE factor
    uint n;                          // elements
} p;

const uint OP = VARIANT & 7u, TY = VARIANT >> 3;

void main()
{
    uint i = group_id() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    uint i0 = i % p.ne0, r = i / p.ne0;
    uint i1 = r % p.ne1; r /= p.ne1;
    uint i2 = r % p.ne2, i3 = r / p.ne2;
    float a = LD_T(s0, (TY & 1u) != 0u, p.a_off + i0 * p.a_nb0 + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3);
    float v;
    if (OP <= 2u || OP == 5u) {
        uint bo = p.b_off + (i0 % p.b_ne0) * p.b_nb0 + (i1 % p.b_ne1) * p.b_nb1 +
                  (i2 % p.b_ne2) * p.b_nb2 + (i3 % p.b_ne3) * p.b_nb3;
        float b = LD_T(s1, (TY & 2u) != 0u, bo);
        v = OP == 0u ? a + b : OP == 1u ? a * b : OP == 5u ? a / b : silu(a) * b;
    } else {
        v = OP == 3u ? a * p.param : OP == 4u ? silu(a) : 1.0 / (1.0 + exp(-a));
    }
    st_t((TY & 4u) != 0u, p.d_off + i0 * p.d_nb0 + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3, v);
}
