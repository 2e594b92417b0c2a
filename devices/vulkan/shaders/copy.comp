#version 450
// copy.comp — CPY and CONT: element k of src0 in logical row-major order goes
// to element k of the destination (shapes may differ, element counts match),
// converting between F32 and F16. Any strides on both sides. VARIANT =
// types (bit0 src F16, bit2 dst F16), specialised like eltwise.comp's.
#include "common.glsl"

layout(push_constant) uniform PC {
    uint a_ne0, a_ne1, a_ne2, a_ne3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_ne0, d_ne1, d_ne2, d_ne3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, d_off;
    uint types; // as VARIANT (unused here)
    uint n;
} p;

void main()
{
    uint i = group_id() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    uint r = i;
    uint a0 = r % p.a_ne0; r /= p.a_ne0;
    uint a1 = r % p.a_ne1; r /= p.a_ne1;
    uint a2 = r % p.a_ne2, a3 = r / p.a_ne2;
    r = i;
    uint d0 = r % p.d_ne0; r /= p.d_ne0;
    uint d1 = r % p.d_ne1; r /= p.d_ne1;
    uint d2 = r % p.d_ne2, d3 = r / p.d_ne2;
    float v = LD_T(s0, (VARIANT & 1u) != 0u, p.a_off + a0 * p.a_nb0 + a1 * p.a_nb1 + a2 * p.a_nb2 + a3 * p.a_nb3);
    st_t((VARIANT & 4u) != 0u, p.d_off + d0 * p.d_nb0 + d1 * p.d_nb1 + d2 * p.d_nb2 + d3 * p.d_nb3, v);
}
