/*
 * npu_manifest.h — NPU kernel packs (internal): a directory holding
 * manifest.json and, per kernel and shape, an xclbin and its instruction
 * stream as built by AMD's mlir-aie / IRON tools.
 *
 * manifest.json (every field checked; unknown fields are errors):
 *   { "format": "het-npu-kernels", "version": 2,       (1: see act_group)
 *     "device": "xdna1" | "xdna2" | "any",            (optional, default any)
 *     "switch_us": 2000,                              (optional, measured cost
 *                                                      of loading a kernel)
 *     "kernels": [ {
 *         "name": "gemv_q4_2048x2048",                (unique)
 *         "op": "matmul",
 *         "weights": "q4" | "i8",                     (NPU tile layout format)
 *         "act": "int8" | "bf16",                     (optional, default int8)
 *         "act_group": 32,                            (int8 kernels of version 2:
 *                                                      required, 32 or k: elements
 *                                                      per activation scale; version
 *                                                      1 kernels are per-row (k) and
 *                                                      may not state it; bf16: absent)
 *         "m_tile": 1,                                (1..128: M is padded to it)
 *         "k": 2048, "n": 2048,                       (multiples of 32; n = Npad)
 *         "xclbin": "gemv_q4_2048x2048.xclbin",       (relative to the pack)
 *         "insts": "gemv_q4_2048x2048.insts.bin",     (u32 words; ".txt": hex lines)
 *         "kernel": "MLIR_AIE",                       (optional, informational)
 *         "tiles": 16,                                (optional hwctx tile count)
 *         "args": ["opcode:3", "instr", "ninstr",     (optional; this is the default)
 *                  "act", "weights", "out"] } ] }
 * Argument words after the ERT_START_NPU header, in order: "opcode:N" (u64 N),
 * "instr" (u64 NPU address of the instructions), "ninstr" (u32 word count),
 * "act", "weights", "out" (u64 NPU addresses), "act_group" (u32: the
 * kernel's activation group, int8 kernels only), "u32:N", "u64:N" literals.
 * The host quantises activations with the act_group of the kernel it runs
 * (het_npu_params.act_group selects the kernels), so the scales in the act
 * buffer are always the ones the kernel expects.
 */
#ifndef HET_NPU_MANIFEST_H
#define HET_NPU_MANIFEST_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/npu/npu_layout.h"
#include "het/npu.h"
#include "het/status.h"

#define NPU_MAX_KARGS 16

enum npu_argkind {
    NPU_ARG_OPCODE = 1,
    NPU_ARG_INSTR,
    NPU_ARG_NINSTR,
    NPU_ARG_ACT,
    NPU_ARG_WEIGHTS,
    NPU_ARG_OUT,
    NPU_ARG_U32,
    NPU_ARG_U64,
    NPU_ARG_ACT_GROUP,
};

struct npu_karg {
    enum npu_argkind kind;
    uint64_t         value;    /* opcode / literal */
};

struct npu_kernel_desc {
    char              name[64];
    enum het_npu_wfmt wfmt;
    enum het_npu_act  act;
    int64_t           act_group;      /* int8: 32 or K (per-row); bf16: 0 */
    int64_t           m_tile, K, N;
    char              xclbin[PATH_MAX];
    char              insts[PATH_MAX];
    char              kernel_name[64];
    uint32_t          tiles;          /* 0: from the xclbin and the device */
    int               n_args;
    struct npu_karg   args[NPU_MAX_KARGS];
};

struct npu_kpack {
    char                    dir[PATH_MAX];
    char                    device[16];
    double                  switch_us;      /* < 0: not given */
    int                     n;
    struct npu_kernel_desc *k;
};

/* Parse and validate dir/manifest.json and check every file it names exists
 * and looks right (xclbin magic, instruction stream size). Errors name the
 * JSON field: "manifest.json: kernels[1].k: 172 is not a multiple of 32". */
enum het_status npu_kpack_load(const char *dir, struct npu_kpack *out, het_error *err);
/* Same from a JSON text (dir resolves relative file names). */
enum het_status npu_kpack_parse(const char *json, size_t len, const char *dir, struct npu_kpack *out, het_error *err);
void            npu_kpack_free(struct npu_kpack *p);

/* The kernel for (format, activations, act_group, K, Npad) best suited to M rows:
 * M == 1 takes the smallest M tile, otherwise the largest tile <= M (else the
 * smallest). NULL when the pack has none for that shape. */
const struct npu_kernel_desc *npu_kpack_find(const struct npu_kpack *p, enum het_npu_wfmt wfmt, enum het_npu_act act,
                                             int64_t act_group, int64_t K, int64_t Npad, int64_t M);

/* The binaries of one kernel, loaded when the plan first needs it. */
struct npu_kbin {
    uint8_t  *pdi;
    size_t    pdi_size;
    uint32_t *insts;
    size_t    n_insts;
    uint32_t  max_opc;        /* operations per cycle from the AIE partition */
    uint32_t  column_width;   /* partition width in columns                  */
};
enum het_status npu_kbin_load(const struct npu_kernel_desc *k, struct npu_kbin *out, het_error *err);
void            npu_kbin_free(struct npu_kbin *b);

/* The first PDI of an xclbin's AIE_PARTITION section (bounds-checked). */
enum het_status npu_xclbin_pdi(const uint8_t *file, size_t size, struct npu_kbin *out, het_error *err);
/* An instruction stream: raw little-endian u32 words, or hex words one per
 * line when the name ends in ".txt". */
enum het_status npu_insts_parse(const uint8_t *data, size_t size, bool text, struct npu_kbin *out, het_error *err);

#endif /* HET_NPU_MANIFEST_H */
