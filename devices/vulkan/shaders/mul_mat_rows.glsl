// mul_mat_rows.glsl — matrix product for CPU-type devices (lavapipe and
// other implementations that run invocations as the SIMD lanes of a CPU).
//
// There a storage-buffer load whose address differs per lane costs a loop
// over the lanes with a branch and a stack round trip per lane, a texel
// fetch is a plain gather (about ten times the bytes per second on
// lavapipe), and a value one lane holds reaches every lane for the price of
// a register permute (subgroupShuffle from a constant lane; Mesa 22's
// subgroupBroadcast costs a loop). So each invocation owns R whole output
// rows (no reduction, shared memory or barrier) and walks K 32 weights (a
// chunk) at a time: it fetches its rows' quantised bytes as 16-byte texels
// (binding 4: an RGBA32UI view of src0's range), dequantises them, and the
// subgroup fetches the matching 32 activations of a column once (binding
// 5: a view of src1), spread over its lanes, and shuffles each to every
// lane. TM columns per pass (R and TM come from the .comp). Loops over
// chunks stay rolled ([[dont_unroll]] where the trip count is known), but a
// K-quant step's four: the driver compiles one chunk's R*TM*32
// multiply-adds, which LLVM does in a fraction of a second, where four
// unrolled chunks of a 16x8 tile took it seconds at the first dispatch.
// Dispatch: (ceil(N / (WG*R)), ceil(M / TM), batches).
// Host-checked requirements: K a multiple of 128; src1 F32 with unit stride
// and columns 16-byte aligned in its binding; rows at even byte offsets (F32:
// 4-byte), unit element stride for plain types; both ranges viewable as
// texels. With MUL_MAT_ID defined, the grouped MUL_MAT_ID's GEMM (its main
// below). VARIANT = src0 type; specialization constant 2 = the subgroup size
// (4..32).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#ifdef MUL_MAT_ID
#include "mul_mat_id_grouped_pc.glsl"
#else
#include "mul_mat_pc.glsl"
#endif

layout(constant_id = 2) const uint SG = 8;
// Always 1 (the host never sets it). Loops over register arrays run to a
// bound times ONE so that glslc, which cannot see through it, leaves them
// rolled: the driver unrolls them ([[unroll]]) after specialization, when
// only the VARIANT in use is left. Unrolled in SPIR-V, the code of every
// weight type would be, which makes the module huge and glslc very slow.
layout(constant_id = 3) const uint ONE = 1;
#define R1 (R * ONE)
#define TM1 (TM * ONE)

layout(binding = 4) uniform usamplerBuffer w_t; // src0, 16-byte texels
layout(binding = 5) uniform usamplerBuffer x_t; // src1

#define KC 32u   // weights per chunk
#define STEP 128u
#define XT 2u    // texels of a chunk's activations per lane, at most (8 / SG with SG >= 4)

// Word i + o of w, o in 0..3 (i a constant): a select per lane.
uint pick(uint w[28], uint i, uint o)
{
    return o == 0u ? w[i] : o == 1u ? w[i + 1u] : o == 2u ? w[i + 2u] : w[i + 3u];
}

// s[i] = bytes a+4i .. a+4i+3 of src0 for the `len` (<= 72) bytes from a
// (even), fetching only the texels that hold some of them.
void rd(uint a, uint len, out uint s[18])
{
    uint t0 = a >> 4, last = (a + len - 1u) >> 4, o = (a >> 2) & 3u, sh = (a & 3u) * 8u;
    uint nt = (len + 29u) / 16u, no = (len + 3u) / 4u; // texels fetched, words produced
    uint w[28];
    [[unroll]] for (uint i = 0; i < 6u; i++) {
        uvec4 v = i < nt ? texelFetch(w_t, int(min(t0 + i, last))) : uvec4(0);
        w[4u * i] = v.x;
        w[4u * i + 1u] = v.y;
        w[4u * i + 2u] = v.z;
        w[4u * i + 3u] = v.w;
    }
    [[unroll]] for (uint i = 24u; i < 28u; i++) w[i] = 0u;
    [[unroll]] for (uint i = 0; i < 18u; i++)
        if (i < no) s[i] = (pick(w, i, o) >> sh) | ((pick(w, i + 1u, o) << 1) << (31u - sh));
}

float nib(uint w, uint i) { return float((w >> (4u * i)) & 15u); }
float sbyte(uint w, uint i) { return float(bitfieldExtract(int(w), int(8u * i), 8)); }

// Q4_0 block c (0..3, any value) of a step's 72 bytes held in s: blocks
// start at bytes 18c, so even ones are word aligned and odd ones start 2
// bytes into a word. Its five words are picked by selects, not a variable
// index, so the loop over blocks can stay rolled.
void q4_0_block(uint s[18], uint c, out float w[KC])
{
    uint u[5];
    [[unroll]] for (uint i = 0; i < 5u; i++)
        u[i] = c == 0u ? s[i] : c == 1u ? s[4u + i] : c == 2u ? s[9u + i] : s[13u + i];
    bool odd = (c & 1u) == 1u;
    float d = unpackHalf2x16(odd ? u[0] >> 16 : u[0]).x;
    uint q[4];
    [[unroll]] for (uint j = 0; j < 4u; j++) q[j] = odd ? u[j + 1u] : (u[j] >> 16) | (u[j + 1u] << 16);
    [[unroll]] for (uint j = 0; j < 4u; j++)
        [[unroll]] for (uint i = 0; i < 4u; i++) {
            w[4u * j + i] = d * (nib(q[j], 2u * i) - 8.0);
            w[4u * j + i + 16u] = d * (nib(q[j], 2u * i + 1u) - 8.0);
        }
}

void q8_0_block(uint o, out float w[KC])
{
    uint s[18];
    rd(o, 34u, s);
    float d = unpackHalf2x16(s[0]).x;
    [[unroll]] for (uint j = 0; j < 8u; j++) {
        uint q = (s[j] >> 16) | (s[j + 1u] << 16);
        [[unroll]] for (uint i = 0; i < 4u; i++) w[4u * j + i] = d * sbyte(q, i);
    }
}

// Byte i (0..11, any value) of the Q4_K scale bytes held in a, b, c: selects,
// no indexing, so a loop over sub-blocks can stay rolled.
uint k4_byte(uint a, uint b, uint c, uint i)
{
    return ((i < 4u ? a : i < 8u ? b : c) >> (8u * (i & 3u))) & 255u;
}

// 6-bit scale and min of Q4_K sub-block sb (0..7) from the 12 scale bytes
// held in h[1..3].
vec2 k4_scale(uint h[18], uint sb)
{
    uint a = h[1], b = h[2], c = h[3];
    if (sb < 4u) return vec2(float(k4_byte(a, b, c, sb) & 63u), float(k4_byte(a, b, c, sb + 4u) & 63u));
    return vec2(float((k4_byte(a, b, c, sb + 4u) & 15u) | ((k4_byte(a, b, c, sb - 4u) >> 6) << 4)),
                float((k4_byte(a, b, c, sb + 4u) >> 4) | ((k4_byte(a, b, c, sb) >> 6) << 4)));
}

// dst[n, m] += sum over the 32 weights of chunk k0 of w * src1[k, m];
// xcol[m]: column m's first texel.
void accumulate(uint k0, uint xcol[TM], float w[R][KC], inout float acc[R][TM])
{
    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint m = 0; m < TM1; m++) {
        uvec4 xt[XT]; // lane l holds texels l + SG*u of the chunk's 8
        [[unroll]] for (uint u = 0; u < XT; u++)
            if (u * SG < 8u) xt[u] = texelFetch(x_t, int(xcol[m] + (k0 >> 2) + min(lane + SG * u, 7u)));
        [[unroll]] for (uint j = 0; j < KC * ONE; j++) {
            uint t = j >> 2;
            float xv = uintBitsToFloat(subgroupShuffle(xt[t / SG][j & 3u], t % SG));
            [[unroll]] for (uint r = 0; r < R1; r++) acc[r][m] = fma(w[r][j], xv, acc[r][m]);
        }
    }
}

// acc[r][m] = row r of src0 (byte offset row[r]) . column m of src1
// (first texel xcol[m]), for the whole of K.
void product(uint row[R], uint xcol[TM], out float acc[R][TM])
{
    [[unroll]] for (uint r = 0; r < R1; r++)
        [[unroll]] for (uint m = 0; m < TM1; m++) acc[r][m] = 0.0;

    // Q4_0 goes either way: with TM = 1 (decode) fetching its bytes is most of
    // the cost, and a step's four blocks take 6 texels read at once, 8 read
    // one by one; with more columns the selects cost more than that saves.
    const bool Q4_0_STEPS = VARIANT == T_Q4_0 && TM == 1u;
    if (VARIANT != T_Q4_K && VARIANT != T_Q6_K && !Q4_0_STEPS) {
        // One chunk of 32 weights an iteration, the loop left rolled: the
        // driver compiles R*TM*32 multiply-adds, not four times as many
        // (LLVM took seconds over an unrolled step on lavapipe), and they run
        // as fast.
        for (uint ch = 0; ch < p.K / KC; ch++) {
            float w[R][KC];
            [[unroll]] for (uint r = 0; r < R1; r++) {
                if (VARIANT == T_Q4_0) {
                    uint s[18];
                    rd(row[r] + ch * 18u, 18u, s);
                    q4_0_block(s, 0u, w[r]);
                } else if (VARIANT == T_Q8_0) {
                    q8_0_block(row[r] + ch * 34u, w[r]);
                } else if (VARIANT == T_F16) {
                    uint s[18];
                    rd(row[r] + ch * 64u, 64u, s);
                    [[unroll]] for (uint j = 0; j < 16u; j++) {
                        vec2 hv = unpackHalf2x16(s[j]);
                        w[r][2u * j] = hv.x;
                        w[r][2u * j + 1u] = hv.y;
                    }
                } else { // F32: 32 weights are two 64-byte reads
                    [[unroll]] for (uint hf = 0; hf < 2u; hf++) {
                        uint s[18];
                        rd(row[r] + ch * 128u + hf * 64u, 64u, s);
                        [[unroll]] for (uint j = 0; j < 16u; j++) w[r][16u * hf + j] = uintBitsToFloat(s[j]);
                    }
                }
            }
            accumulate(ch * KC, xcol, w, acc);
        }
        return;
    }
    // A step of 128 weights read at once (four Q4_0 blocks; half a K-quant
    // block, whose scales sit apart from its quants). Q4_0's four chunks are
    // a rolled loop that picks the words it needs by selects, never by a
    // variable index. A K-quant's are unrolled (the selects fold away): with
    // them rolled the product ran ~10% slower (q6_K, M = 1 and 128), and on
    // an 8-row tile LLVM compiles the unrolled step in 0.3-1.8 s.
    uint steps = p.K / STEP;
    for (uint st = 0; st < steps; st++) {
        uint k = st * STEP, hh = st & 1u; // K-quants: which half of the 256-weight block
        if (Q4_0_STEPS) {
            uint s[R][18];
            [[unroll]] for (uint r = 0; r < R1; r++) rd(row[r] + st * 72u, 72u, s[r]);
            [[dont_unroll]] for (uint c = 0; c < 4u; c++) {
                float w[R][KC];
                [[unroll]] for (uint r = 0; r < R1; r++) q4_0_block(s[r], c, w[r]);
                accumulate(k + c * KC, xcol, w, acc);
            }
        } else if (VARIANT == T_Q4_K) {
            uint h[R][18], s[R][18];
            [[unroll]] for (uint r = 0; r < R1; r++) {
                uint o = row[r] + (st >> 1) * 144u;
                rd(o, 16u, h[r]);
                rd(o + 16u + 64u * hh, 64u, s[r]);
            }
            [[unroll]] for (uint c = 0; c < 4u * ONE; c++) {
                float w[R][KC];
                [[unroll]] for (uint r = 0; r < R1; r++) {
                    vec2 dm = unpackHalf2x16(h[r][0]);
                    vec2 sm = k4_scale(h[r], 4u * hh + c);
                    float dd = dm.x * sm.x, mm = dm.y * sm.y;
                    uint sh = (c & 1u) * 4u; // low nibbles for even sub-blocks
                    bool up = c >= 2u;       // sub-blocks 2, 3: the half's second 32 bytes
                    [[unroll]] for (uint j = 0; j < 8u; j++) {
                        uint q = up ? s[r][8u + j] : s[r][j];
                        [[unroll]] for (uint i = 0; i < 4u; i++)
                            w[r][4u * j + i] = dd * float((q >> (8u * i + sh)) & 15u) - mm;
                    }
                }
                accumulate(k + c * KC, xcol, w, acc);
            }
        } else { // Q6_K
            uint ql[R][18], qh[R][18], sc[R][18], dw[R][18];
            [[unroll]] for (uint r = 0; r < R1; r++) {
                uint o = row[r] + (st >> 1) * 210u;
                rd(o + 64u * hh, 64u, ql[r]);
                rd(o + 128u + 32u * hh, 32u, qh[r]);
                rd(o + 192u + 8u * hh, 8u, sc[r]);
                rd(o + 208u, 2u, dw[r]);
            }
            [[unroll]] for (uint g = 0; g < 4u * ONE; g++) {
                float w[R][KC];
                [[unroll]] for (uint r = 0; r < R1; r++) {
                    float d = unpackHalf2x16(dw[r][0]).x;
                    uint scw = g < 2u ? sc[r][0] : sc[r][1];
                    float d0 = d * sbyte(scw, (2u * g) & 3u);
                    float d1 = d * sbyte(scw, (2u * g + 1u) & 3u);
                    uint nsh = (g >> 1) * 4u;
                    bool odd = (g & 1u) == 1u; // groups 1, 3: the half's second 32 ql bytes
                    [[unroll]] for (uint j = 0; j < 8u; j++) {
                        uint l = odd ? ql[r][8u + j] : ql[r][j];
                        [[unroll]] for (uint i = 0; i < 4u; i++) {
                            uint lo = (l >> (8u * i + nsh)) & 15u;
                            uint hi = (qh[r][j] >> (8u * i + 2u * g)) & 3u;
                            w[r][4u * j + i] = (j < 4u ? d0 : d1) * (float(lo | (hi << 4)) - 32.0);
                        }
                    }
                }
                accumulate(k + g * KC, xcol, w, acc);
            }
        }
    }
}

#ifdef MUL_MAT_ID
// MUL_MAT_ID (mul_mat_id_rows.comp): workgroup (x, y) computes WG*R output
// rows of column tile y of the grouping moe_group.comp wrote into binding 2
// (one expert, up to TM token-slot pairs; mul_mat_id_grouped_pc.glsl).
uint pair_dst(uint q) { return p.d_off + (q % p.k) * p.d_nb1 + (q / p.k) * p.d_nb2; }

void main()
{
    uint y = gl_WorkGroupID.y;
    if (y >= s2.d[0]) return; // whole workgroup
    uint tw = TILES_AT + 3u * y;
    uint e = s2.d[tw], first = p.pairs_at + s2.d[tw + 1u], cnt = s2.d[tw + 2u];
    uint nbase = gl_WorkGroupID.x * (WG * R) + gl_LocalInvocationID.x;
    uint q[TM];
    [[unroll]] for (uint m = 0; m < TM1; m++) q[m] = s2.d[first + min(m, cnt - 1u)];
    if (e >= p.E) { // ids outside [0, E): NaN, as the GEMV path writes
        [[unroll]] for (uint r = 0; r < R1; r++) {
            uint n = nbase + r * WG;
            [[unroll]] for (uint m = 0; m < TM1; m++)
                if (n < p.N && m < cnt) st_f32(pair_dst(q[m]) + n * p.d_nb0, uintBitsToFloat(0x7FC00000u));
        }
        return;
    }
    uint abase = p.a_off + e * p.a_nb2;
    uint row[R];
    [[unroll]] for (uint r = 0; r < R1; r++) row[r] = abase + min(nbase + r * WG, p.N - 1u) * p.a_nb1;
    uint xcol[TM]; // in texels
    [[unroll]] for (uint m = 0; m < TM1; m++)
        xcol[m] = (p.b_off + ((q[m] % p.k) % p.n_b) * p.b_nb1 + (q[m] / p.k) * p.b_nb2) >> 4;
    float acc[R][TM];
    product(row, xcol, acc);
    [[unroll]] for (uint r = 0; r < R1; r++) {
        uint n = nbase + r * WG;
        [[unroll]] for (uint m = 0; m < TM1; m++)
            if (n < p.N && m < cnt) st_f32(pair_dst(q[m]) + n * p.d_nb0, acc[r][m]);
    }
}
#else
void main()
{
    uint z = gl_WorkGroupID.z, i12 = z % p.B2, i13 = z / p.B2;
    uint nbase = gl_WorkGroupID.x * (WG * R) + gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * TM;
    uint abase = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    uint xbase = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
    uint row[R];
    [[unroll]] for (uint r = 0; r < R1; r++) row[r] = abase + min(nbase + r * WG, p.N - 1u) * p.a_nb1;
    uint xcol[TM]; // in texels
    [[unroll]] for (uint m = 0; m < TM1; m++) xcol[m] = (xbase + min(m0 + m, p.M - 1u) * p.b_nb1) >> 4;
    float acc[R][TM];
    product(row, xcol, acc);
    uint db = p.d_off + i12 * p.d_nb2 + i13 * p.d_nb3;
    [[unroll]] for (uint r = 0; r < R1; r++) {
        uint n = nbase + r * WG;
        [[unroll]] for (uint m = 0; m < TM1; m++)
            if (n < p.N && m0 + m < p.M) st_f32(db + n * p.d_nb0 + (m0 + m) * p.d_nb1, acc[r][m]);
    }
}
#endif
