/*
 * vk_pipeline.c — compute pipelines, created once on first use and cached.
 *
 * All kernels share one descriptor set layout (four storage buffers) and one
 * pipeline layout (128 bytes of push constants), so a dispatch record needs
 * only a pipeline, four buffer ranges and its push data. A pipeline is a
 * shader module plus two specialization constants: the workgroup size
 * (constant 0, from the table below) and the variant (constant 1: the
 * element-wise operation or the weight type). Kernels with reductions come
 * in two builds, with subgroup arithmetic and with shared memory only; the
 * device's reported subgroup support picks one.
 */
#include "devices/vulkan/vk_internal.h"

#include "shaders/attn.spv.h"
#include "shaders/attn_sg.spv.h"
#include "shaders/copy.spv.h"
#include "shaders/eltwise.spv.h"
#include "shaders/get_rows.spv.h"
#include "shaders/mul_mat.spv.h"
#include "shaders/mul_mat_vec.spv.h"
#include "shaders/mul_mat_vec_sg.spv.h"
#include "shaders/rms_norm.spv.h"
#include "shaders/rms_norm_sg.spv.h"
#include "shaders/rope.spv.h"
#include "shaders/softmax.spv.h"
#include "shaders/softmax_sg.spv.h"

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
    [HET_VK_K_COPY]        = { "copy",        SPV(copy),        { NULL, 0 },         256 },
    [HET_VK_K_RMS_NORM]    = { "rms_norm",    SPV(rms_norm),    SPV(rms_norm_sg),    128 },
    [HET_VK_K_SOFTMAX]     = { "softmax",     SPV(softmax),     SPV(softmax_sg),     128 },
    [HET_VK_K_ROPE]        = { "rope",        SPV(rope),        { NULL, 0 },         128 },
    [HET_VK_K_ATTN]        = { "attn",        SPV(attn),        SPV(attn_sg),        64 },
    [HET_VK_K_GET_ROWS]    = { "get_rows",    SPV(get_rows),    { NULL, 0 },         128 },
    [HET_VK_K_MUL_MAT_VEC] = { "mul_mat_vec", SPV(mul_mat_vec), SPV(mul_mat_vec_sg), 64 },
    [HET_VK_K_MUL_MAT]     = { "mul_mat",     SPV(mul_mat),     { NULL, 0 },         HET_VK_GEMM_WG },
};

uint32_t het_vk_kernel_wg(const struct het_vk_ctx *ctx, enum het_vk_kernel k)
{
    /* Vulkan guarantees 128 invocations; only the element-wise kernels ask
     * for more, and they work with any power of two. */
    uint32_t wg = kernels[k].wg;
    while (wg > ctx->max_wg && wg > 64 && k != HET_VK_K_MUL_MAT) wg /= 2;
    return wg;
}

enum het_status het_vk_pipelines_init(struct het_vk_ctx *ctx, het_error *err)
{
    VkDescriptorSetLayoutBinding b[HET_VK_N_BIND];
    for (uint32_t i = 0; i < HET_VK_N_BIND; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = HET_VK_N_BIND,
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

static uint32_t variant_of(enum het_vk_kernel k, enum het_type type)
{
    if (k <= HET_VK_K_SILU) return (uint32_t)(k - HET_VK_K_ADD);
    if (k == HET_VK_K_GET_ROWS || k == HET_VK_K_MUL_MAT_VEC || k == HET_VK_K_MUL_MAT) return (uint32_t)type;
    return 0;
}

enum het_status het_vk_pipeline_get(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type type,
                                    VkPipeline *out, het_error *err)
{
    uint32_t variant = variant_of(k, type);
    int slot = (k == HET_VK_K_GET_ROWS || k == HET_VK_K_MUL_MAT_VEC || k == HET_VK_K_MUL_MAT) ? (int)type : 0;
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
    const uint32_t spec[2] = { het_vk_kernel_wg(ctx, k), variant };
    const VkSpecializationMapEntry map[2] = {
        { .constantID = 0, .offset = 0, .size = 4 },
        { .constantID = 1, .offset = 4, .size = 4 },
    };
    VkSpecializationInfo si = { .mapEntryCount = 2, .pMapEntries = map, .dataSize = sizeof spec, .pData = spec };
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
    VkResult r = vkCreateComputePipelines(ctx->device, VK_NULL_HANDLE, 1, &pci, NULL, &ctx->pipes[k][slot]);
    if (r != VK_SUCCESS) {
        ctx->pipes[k][slot] = VK_NULL_HANDLE;
        char what[80];
        snprintf(what, sizeof what, "vkCreateComputePipelines(%s, variant %u)", kd->name, variant);
        return het_vk_fail(ctx, r, err, what);
    }
    *out = ctx->pipes[k][slot];
    return HET_OK;
}
