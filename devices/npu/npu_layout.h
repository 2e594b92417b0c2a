/*
 * npu_layout.h — the NPU weight tile layout (internal; the contract is
 * written down in devices/npu/README.md).
 *
 * A weight matrix (K, N) — K along a row, N rows — becomes, per 2-D plane:
 *   tiles of NT = 32 rows x G = 32 K-elements, ordered N-tile major
 *   (tile (t, g) at index t * n_groups + g), values unsigned 4-bit
 *   (HET_NPU_W_Q4: 16 bytes per tile row, element k in byte k/2, low nibble
 *   for even k) or int8 (HET_NPU_W_I8: 32 bytes per tile row);
 *   per (row, group) parameters in planes indexed like the tiles
 *   ((t * n_groups + g) * 32 + row-in-tile): scale as two bf16 (hi + lo),
 *   bias as two bf16 (hi + lo) when the source has a free minimum;
 *   one bf16 zero point per tensor.
 * Value: W = (float)(q - zp) * (hi + lo) - (bias_hi + bias_lo), evaluated in
 * f32 in exactly that order. hi + lo is exact (lo holds what bf16 hi cannot),
 * so for Q4_0, Q4_1, Q8_0 and Q4_K the result equals the GGUF dequantisation
 * bit for bit, signed zeros included (README: "Exactness").
 * N is padded with zero rows to a multiple of 32; K must be a multiple of 32.
 */
#ifndef HET_NPU_LAYOUT_H
#define HET_NPU_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/graph.h"
#include "het/status.h"
#include "het/type.h"

#define HET_NPU_GROUP          32   /* K elements per group                 */
#define HET_NPU_NTILE          32   /* rows (N) per tile                     */
#define HET_NPU_LAYOUT_VERSION 1
#define HET_NPU_SECTION_ALIGN  64   /* every plane section starts aligned    */

enum het_npu_wfmt {
    HET_NPU_W_Q4 = 1,   /* unsigned 4-bit values                 */
    HET_NPU_W_I8 = 2,   /* signed 8-bit values                   */
};

enum het_npu_wflag {
    HET_NPU_WF_BIAS = 1u << 0,   /* bias planes present (else bias = +0)  */
};

/* Everything needed to address one repacked tensor; the bytes live elsewhere. */
struct het_npu_wdesc {
    enum het_npu_wfmt fmt;
    enum het_type     src_type;     /* GGUF type it came from               */
    uint32_t          flags;        /* enum het_npu_wflag                   */
    uint16_t          zp_bf16;      /* zero point (integer valued)          */
    int64_t           K, N, Npad;
    int64_t           ne2, ne3;     /* planes: ne2 * ne3                    */
    int64_t           n_groups;     /* K / 32                               */
    int64_t           n_tiles;      /* Npad / 32                            */
    size_t            tile_bytes;   /* 512 (Q4) or 1024 (I8)                */
    size_t            off_qs, off_s_hi, off_s_lo, off_b_hi, off_b_lo; /* within a plane */
    size_t            plane_bytes;  /* multiple of HET_NPU_SECTION_ALIGN    */
    size_t            total_bytes;  /* plane_bytes * ne2 * ne3              */
};

/* The weight format a GGUF type maps to, or 0 when the contract cannot take it. */
enum het_npu_wfmt het_npu_wfmt_for(enum het_type type);

/* Can the layout take a weight of this type and shape (ne[0] = K, ne[1] = N)?
 * HET_ERR_UNSUPPORTED with the reason ("K = 172 is not a multiple of 32"). */
enum het_status het_npu_layout_check(enum het_type type, const int64_t ne[4], het_error *err);

/* Fill d for a weight of this type and shape (after het_npu_layout_check). */
enum het_status het_npu_layout_plan(struct het_npu_wdesc *d, enum het_type type, const int64_t ne[4],
                                    het_error *err);

/*
 * Repack the weight tensor (GGUF blocks at src, byte strides nb[1..3] as in
 * het_tensor; nb[0] must be the block-contiguous element stride) into dst
 * (d->total_bytes, zeroed or not). Fails with HET_ERR_UNSUPPORTED naming the
 * row and block when a scale is not finite (inf/NaN blocks cannot be
 * represented exactly).
 */
enum het_status het_npu_repack(const struct het_npu_wdesc *d, const void *src, const size_t nb[4], void *dst,
                               het_error *err);

/* Tiles [t0, t1) of plane `plane` as a tensor of their own: *sub gets the
 * layout of a (K, (t1 - t0) * 32) weight and dst (sub->total_bytes) its bytes.
 * Used to stream a weight through staging slots in N-chunks. */
void het_npu_layout_slice(const struct het_npu_wdesc *d, const void *plane, int64_t t0, int64_t t1,
                          struct het_npu_wdesc *sub, void *dst);

/* Dequantise row n (0 <= n < N) of plane p from the NPU layout: K floats. */
void het_npu_dequant_row(const struct het_npu_wdesc *d, const void *data, int64_t plane, int64_t n, float *out);

/* Accessors used by the kernels. */
static inline const uint8_t *het_npu_plane(const struct het_npu_wdesc *d, const void *data, int64_t plane)
{
    return (const uint8_t *)data + (size_t)plane * d->plane_bytes;
}
static inline size_t het_npu_param_index(const struct het_npu_wdesc *d, int64_t tile, int64_t g, int r)
{
    return ((size_t)tile * (size_t)d->n_groups + (size_t)g) * HET_NPU_NTILE + (size_t)r;
}

/* Split v (finite) into bf16 hi + lo with hi + lo == v exactly in f32,
 * signed zero included. false when v needs more than bf16 x 2 can hold. */
bool het_npu_split_bf16(float v, uint16_t *hi, uint16_t *lo);
float het_npu_join_bf16(uint16_t hi, uint16_t lo);

#endif /* HET_NPU_LAYOUT_H */
