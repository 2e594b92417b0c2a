// quant.glsl — dequantise 8 consecutive weights of a row of src0 (binding 0).
//
// VARIANT is the het_type of src0 (a specialization constant, so the driver
// drops the other branches). row: byte offset of the row's element 0; k: the
// first element (a multiple of 8); K: row length; nb0: element stride for
// plain types (quantised rows are contiguous blocks). Plain types zero-fill
// beyond K. Block layouts are GGUF's:
//   Q4_0 (32 el, 18 B): f16 d, 16 B nibbles; el j<16 low nibble of byte j,
//        j>=16 high nibble of byte j-16; w = d*(q-8)
//   Q8_0 (32 el, 34 B): f16 d, 32 int8; w = d*q
//   Q4_K (256 el, 144 B): f16 d, f16 dmin, 12 B packed 6-bit scales/mins,
//        128 B nibbles; sub-block s=j/32 has scale sc_s and min m_s; byte
//        32*(j/64) + j%32, low nibble if j%64<32; w = d*sc*q - dmin*m
//   Q6_K (256 el, 210 B): 128 B ql, 64 B qh, 16 int8 scales, f16 d; for
//        h=j/128, r=j%128, g=r/32, l=r%32: low 4 bits from ql[64h + l + 32(g&1)]
//        (high nibble if g>=2), high 2 bits from qh[32h + l] >> 2g, scale
//        scales[8h + l/16 + 2g]; w = d*sc*(q-32)

// 32-bit load at any byte offset (reads the next word only when needed).
uint s0_u32(uint o)
{
    uint w = o >> 2, sh = (o & 3u) << 3;
    uint lo = s0.d[w];
    return sh == 0u ? lo : (lo >> sh) | (s0.d[w + 1u] << (32u - sh));
}

uint byte_of(uint w0, uint w1, uint j) { return ((j < 4u ? w0 : w1) >> ((j & 3u) << 3)) & 0xFFu; }

// Byte i (0..11) of the Q4_K scale block held in three words.
uint k4_byte(uvec3 s, uint i) { return (s[i >> 2] >> ((i & 3u) << 3)) & 0xFFu; }

void dq8(uint row, uint k, uint K, uint nb0, out float v[8])
{
    if (VARIANT == T_F32) {
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = k + j < K ? LD_F32(s0, row + (k + j) * nb0) : 0.0;
    } else if (VARIANT == T_F16) {
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = k + j < K ? LD_F16(s0, row + (k + j) * nb0) : 0.0;
    } else if (VARIANT == T_Q4_0) {
        uint b = row + (k >> 5) * 18u, w = k & 31u;
        float d = LD_F16(s0, b);
        uint q0 = s0_u32(b + 2u + (w & 15u)), q1 = s0_u32(b + 6u + (w & 15u));
        uint sh = w >= 16u ? 4u : 0u;
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = d * (float((byte_of(q0, q1, j) >> sh) & 15u) - 8.0);
    } else if (VARIANT == T_Q8_0) {
        uint b = row + (k >> 5) * 34u, w = k & 31u;
        float d = LD_F16(s0, b);
        uint q0 = s0_u32(b + 2u + w), q1 = s0_u32(b + 6u + w);
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = d * float(bitfieldExtract(int(byte_of(q0, q1, j)), 0, 8));
    } else if (VARIANT == T_Q4_K) {
        uint b = row + (k >> 8) * 144u, j0 = k & 255u;
        vec2 dm = unpackHalf2x16(s0_u32(b));
        uvec3 sc = uvec3(s0_u32(b + 4u), s0_u32(b + 8u), s0_u32(b + 12u));
        uint s = j0 >> 5, scale, mn;
        if (s < 4u) {
            scale = k4_byte(sc, s) & 63u;
            mn = k4_byte(sc, s + 4u) & 63u;
        } else {
            scale = (k4_byte(sc, s + 4u) & 15u) | ((k4_byte(sc, s - 4u) >> 6) << 4);
            mn = (k4_byte(sc, s + 4u) >> 4) | ((k4_byte(sc, s) >> 6) << 4);
        }
        uint r = j0 & 63u;
        uint qb = b + 16u + (j0 >> 6) * 32u + (r & 31u);
        uint q0 = s0_u32(qb), q1 = s0_u32(qb + 4u);
        uint sh = r >= 32u ? 4u : 0u;
        float dd = dm.x * float(scale), mm = dm.y * float(mn);
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = dd * float((byte_of(q0, q1, j) >> sh) & 15u) - mm;
    } else if (VARIANT == T_Q6_K) {
        uint b = row + (k >> 8) * 210u, j0 = k & 255u;
        uint h = j0 >> 7, r = j0 & 127u, g = r >> 5, l = r & 31u;
        uint qlo = b + h * 64u + l + (g & 1u) * 32u;
        uint qho = b + 128u + h * 32u + l;
        uint l0 = s0_u32(qlo), l1 = s0_u32(qlo + 4u);
        uint h0 = s0_u32(qho), h1 = s0_u32(qho + 4u);
        int sc = bitfieldExtract(int(LD_U8(s0, b + 192u + h * 8u + (l >> 4) + 2u * g)), 0, 8);
        float dd = LD_F16(s0, b + 208u) * float(sc);
        uint nsh = g >= 2u ? 4u : 0u, hsh = 2u * g;
        [[unroll]] for (uint j = 0; j < 8u; j++) {
            uint q = ((byte_of(l0, l1, j) >> nsh) & 15u) | (((byte_of(h0, h1, j) >> hsh) & 3u) << 4);
            v[j] = dd * (float(q) - 32.0);
        }
    } else {
        [[unroll]] for (uint j = 0; j < 8u; j++) v[j] = 0.0;
    }
}
