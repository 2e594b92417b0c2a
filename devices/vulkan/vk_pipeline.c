/*
 * vk_pipeline.c — compute pipelines, created once on first use and cached.
 *
 * All kernels share one descriptor set layout (four storage buffers, plus
 * two texel buffers only the row kernels of CPU-type devices use) and one
 * pipeline layout (128 bytes of push constants), so a dispatch record needs
 * only a pipeline, four buffer ranges (two texel views) and its push data.
 * A pipeline is a shader module plus specialization constants: the
 * workgroup size (constant 0, from the table below), the variant (constant
 * 1: the element-wise operation and F16 bits, or the weight type) and the
 * device's subgroup size (constant 2, which the row kernels lay data out
 * by). Kernels with reductions come in two builds, with subgroup arithmetic
 * and with shared memory only; the device's reported subgroup support
 * picks one. Whether the row kernels run is decided here too (rows_suit).
 * Builds are timed into the device's stats (n_builds, build_us).
 */
#include "devices/vulkan/vk_internal.h"
#include "sched/clock.h"

#include "shaders/attn.spv.h"
#include "shaders/attn_rows.spv.h"
#include "shaders/attn_sg.spv.h"
#include "shaders/copy.spv.h"
#include "shaders/eltwise.spv.h"
#include "shaders/get_rows.spv.h"
#include "shaders/moe_group.spv.h"
#include "shaders/moe_sum.spv.h"
#include "shaders/mul_mat.spv.h"
#include "shaders/mul_mat_id.spv.h"
#include "shaders/mul_mat_id_rows.spv.h"
#include "shaders/mul_mat_rows1.spv.h"
#include "shaders/mul_mat_rowsn.spv.h"
#include "shaders/mul_mat_vec.spv.h"
#include "shaders/mul_mat_vec_id.spv.h"
#include "shaders/mul_mat_vec_id_sg.spv.h"
#include "shaders/mul_mat_vec_sg.spv.h"
#include "shaders/rms_norm.spv.h"
#include "shaders/rms_norm_rows.spv.h"
#include "shaders/rms_norm_sg.spv.h"
#include "shaders/rope.spv.h"
#include "shaders/softmax.spv.h"
#include "shaders/softmax_sg.spv.h"
#include "shaders/sum_rows.spv.h"
#include "shaders/sum_rows_sg.spv.h"
#include "shaders/top_k.spv.h"

#include <stdio.h>

struct spv {
    const uint32_t *code;
    size_t          size; /* bytes */
};
#define SPV(name) { het_spv_##name, sizeof het_spv_##name }

struct kernel_desc {
    const char *name;
    struct spv  plain, subgroup; /* subgroup.code NULL: no reduction */
    uint32_t    wg;
};

static const struct kernel_desc kernels[HET_VK_K_COUNT] = {
    [HET_VK_K_ADD]         = { "add",         SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_MUL]         = { "mul",         SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_SWIGLU]      = { "swiglu",      SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_SCALE]       = { "scale",       SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_SILU]        = { "silu",        SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_DIV]         = { "div",         SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_SIGMOID]     = { "sigmoid",     SPV(eltwise),     { NULL, 0 },         256 },
    [HET_VK_K_COPY]        = { "copy",        SPV(copy),        { NULL, 0 },         256 },
    [HET_VK_K_RMS_NORM]    = { "rms_norm",    SPV(rms_norm),    SPV(rms_norm_sg),    128 },
    [HET_VK_K_SOFTMAX]     = { "softmax",     SPV(softmax),     SPV(softmax_sg),     128 },
    [HET_VK_K_ROPE]        = { "rope",        SPV(rope),        { NULL, 0 },         128 },
    [HET_VK_K_ATTN]        = { "attn",        SPV(attn),        SPV(attn_sg),        64 },
    [HET_VK_K_GET_ROWS]    = { "get_rows",    SPV(get_rows),    { NULL, 0 },         128 },
    [HET_VK_K_MUL_MAT_VEC] = { "mul_mat_vec", SPV(mul_mat_vec), SPV(mul_mat_vec_sg), 64 },
    [HET_VK_K_MUL_MAT]     = { "mul_mat",     SPV(mul_mat),     { NULL, 0 },         HET_VK_GEMM_WG },
    [HET_VK_K_MUL_MAT_ROWS1] = { "mul_mat_rows1", SPV(mul_mat_rows1), { NULL, 0 },     64 },
    [HET_VK_K_MUL_MAT_ROWSN] = { "mul_mat_rowsn", SPV(mul_mat_rowsn), { NULL, 0 },     64 },
    [HET_VK_K_ATTN_ROWS]     = { "attn_rows",     SPV(attn_rows),     { NULL, 0 },     0 /* one subgroup */ },
    [HET_VK_K_RMS_NORM_ROWS] = { "rms_norm_rows", SPV(rms_norm_rows), { NULL, 0 },     0 /* one subgroup */ },
    [HET_VK_K_MUL_MAT_VEC_ID] = { "mul_mat_vec_id", SPV(mul_mat_vec_id), SPV(mul_mat_vec_id_sg), 64 },
    [HET_VK_K_TOP_K]         = { "top_k",         SPV(top_k),         { NULL, 0 },       64 },
    [HET_VK_K_SUM_ROWS]      = { "sum_rows",      SPV(sum_rows),      SPV(sum_rows_sg),  64 },
    [HET_VK_K_MOE_SUM]       = { "moe_sum",       SPV(moe_sum),       { NULL, 0 },       256 },
    [HET_VK_K_MOE_GROUP]     = { "moe_group",     SPV(moe_group),     { NULL, 0 },       256 },
    [HET_VK_K_MUL_MAT_ID]    = { "mul_mat_id",    SPV(mul_mat_id),    { NULL, 0 },       HET_VK_GEMM_WG },
    [HET_VK_K_MUL_MAT_ID_ROWS] = { "mul_mat_id_rows", SPV(mul_mat_id_rows), { NULL, 0 },   64 },
};

uint32_t het_vk_kernel_wg(const struct het_vk_ctx *ctx, enum het_vk_kernel k)
{
    /* Vulkan guarantees 128 invocations; only the element-wise kernels ask
     * for more, and they work with any power of two. */
    uint32_t wg = kernels[k].wg;
    if (wg == 0) return ctx->info.subgroup_size;
    while (wg > ctx->max_wg && wg > 64 && k != HET_VK_K_MUL_MAT && k != HET_VK_K_MUL_MAT_ID) wg /= 2;
    return wg;
}

/* The row-per-invocation kernels (mul_mat_rows.glsl, attn_rows.comp) suit
 * implementations that run invocations as the SIMD lanes of a CPU, where a
 * per-lane load is a loop over the lanes and a shuffle is a register
 * permute, and texel fetches are gathered: a CPU-type device with subgroup
 * shuffles in compute, a subgroup of 4..32 lanes and RGBA32UI uniform texel
 * buffers. GPUs keep the cooperative kernels. */
static bool rows_suit(struct het_vk_ctx *ctx)
{
    uint32_t sgs = ctx->info.subgroup_size;
    if (ctx->opt.no_rows || ctx->info.type != HET_VULKAN_TYPE_CPU) return false;
    if (sgs < 4 || sgs > 32 || (sgs & (sgs - 1)) || ctx->max_wg < 64) return false;
    VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg };
    vkGetPhysicalDeviceProperties2(ctx->phys, &p2);
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(ctx->phys, VK_FORMAT_R32G32B32A32_UINT, &fp);
    ctx->texel_align = p2.properties.limits.minTexelBufferOffsetAlignment;
    ctx->texel_max = p2.properties.limits.maxTexelBufferElements;
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    return (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sg.supportedOperations & need) == need &&
           sg.subgroupSize == sgs && (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
           ctx->texel_align > 0;
}

enum het_status het_vk_pipelines_init(struct het_vk_ctx *ctx, het_error *err)
{
    ctx->use_rows = rows_suit(ctx);
    /* four storage buffers; two texel buffers that only the row kernels use
     * (a set's descriptors need be valid only where a pipeline uses them) */
    VkDescriptorSetLayoutBinding b[HET_VK_N_BIND + HET_VK_N_TEXEL];
    for (uint32_t i = 0; i < HET_VK_N_BIND + HET_VK_N_TEXEL; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = i < HET_VK_N_BIND ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                                : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = HET_VK_N_BIND + HET_VK_N_TEXEL,
        .pBindings = b,
    };
    VkResult r = vkCreateDescriptorSetLayout(ctx->device, &dci, NULL, &ctx->dsl);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pcr = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = HET_VK_PUSH_WORDS * 4,
    };
    VkPipelineLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &ctx->dsl,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pcr,
    };
    r = vkCreatePipelineLayout(ctx->device, &lci, NULL, &ctx->layout);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreatePipelineLayout");
    return HET_OK;
}

void het_vk_pipelines_free(struct het_vk_ctx *ctx)
{
    for (int k = 0; k < HET_VK_K_COUNT; k++) {
        for (int t = 0; t < HET_VK_N_TYPES; t++)
            if (ctx->pipes[k][t]) vkDestroyPipeline(ctx->device, ctx->pipes[k][t], NULL);
        if (ctx->modules[k]) vkDestroyShaderModule(ctx->device, ctx->modules[k], NULL);
    }
    if (ctx->layout) vkDestroyPipelineLayout(ctx->device, ctx->layout, NULL);
    if (ctx->dsl) vkDestroyDescriptorSetLayout(ctx->device, ctx->dsl, NULL);
}

/* Kernels with one pipeline per small number given in `type`: a weight
 * type, the F16 bits of element-wise ops and copies, or attn_rows' head-size
 * code. */
static bool typed(enum het_vk_kernel k)
{
    return k <= HET_VK_K_COPY || k == HET_VK_K_GET_ROWS || k == HET_VK_K_MUL_MAT_VEC || k == HET_VK_K_MUL_MAT ||
           k == HET_VK_K_MUL_MAT_ROWS1 || k == HET_VK_K_MUL_MAT_ROWSN || k == HET_VK_K_ATTN_ROWS ||
           k == HET_VK_K_MUL_MAT_VEC_ID || k == HET_VK_K_MUL_MAT_ID ||
           k == HET_VK_K_MUL_MAT_ID_ROWS;
}

static uint32_t variant_of(enum het_vk_kernel k, enum het_type type)
{
    if (k <= HET_VK_K_SIGMOID) return (uint32_t)(k - HET_VK_K_ADD) + 8u * (uint32_t)type; /* eltwise.comp */
    return typed(k) ? (uint32_t)type : 0;
}

enum het_status het_vk_pipeline_get(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type type,
                                    VkPipeline *out, het_error *err)
{
    uint32_t variant = variant_of(k, type);
    int slot = typed(k) ? (int)type : 0;
    if (slot < 0 || slot >= HET_VK_N_TYPES)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: no %s kernel for type %d", kernels[k].name, (int)type);
    if (ctx->pipes[k][slot]) {
        *out = ctx->pipes[k][slot];
        return HET_OK;
    }
    const struct kernel_desc *kd = &kernels[k];
    if (!ctx->modules[k]) {
        const struct spv *s = (ctx->use_subgroup && kd->subgroup.code) ? &kd->subgroup : &kd->plain;
        VkShaderModuleCreateInfo mci = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            .codeSize = s->size,
            .pCode = s->code,
        };
        VkResult r = vkCreateShaderModule(ctx->device, &mci, NULL, &ctx->modules[k]);
        if (r != VK_SUCCESS) {
            ctx->modules[k] = VK_NULL_HANDLE;
            return het_vk_fail(ctx, r, err, "vkCreateShaderModule");
        }
    }
    /* 0: workgroup size, 1: variant, 2: subgroup size (the row kernels lay
     * data out by it; other kernels do not declare it) */
    const uint32_t spec[3] = { het_vk_kernel_wg(ctx, k), variant, ctx->info.subgroup_size };
    const VkSpecializationMapEntry map[3] = {
        { .constantID = 0, .offset = 0, .size = 4 },
        { .constantID = 1, .offset = 4, .size = 4 },
        { .constantID = 2, .offset = 8, .size = 4 },
    };
    VkSpecializationInfo si = { .mapEntryCount = 3, .pMapEntries = map, .dataSize = sizeof spec, .pData = spec };
    VkComputePipelineCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = ctx->modules[k],
            .pName = "main",
            .pSpecializationInfo = &si,
        },
        .layout = ctx->layout,
    };
    /* timed for the scheduler: a CPU-type driver compiles with LLVM here
     * (up to a second a kernel), and probing a kernel not built yet pays it */
    const double t0 = het_now_us();
    VkResult r = vkCreateComputePipelines(ctx->device, VK_NULL_HANDLE, 1, &pci, NULL, &ctx->pipes[k][slot]);
    ctx->dev->stats.n_builds++;
    ctx->dev->stats.build_us += het_now_us() - t0;
    if (r != VK_SUCCESS) {
        ctx->pipes[k][slot] = VK_NULL_HANDLE;
        char what[80];
        snprintf(what, sizeof what, "vkCreateComputePipelines(%s, variant %u)", kd->name, variant);
        return het_vk_fail(ctx, r, err, what);
    }
    *out = ctx->pipes[k][slot];
    return HET_OK;
}
