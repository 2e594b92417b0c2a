/*
 * vk_exec.c — recording, submitting and completing a split.
 *
 * A split becomes exactly one command buffer: uploads of mirrored inputs,
 * then every node's dispatches with a compute->compute barrier between
 * nodes (dispatches of one node write disjoint outputs and need none, except
 * one marked after_prev, which reads what the node's previous one wrote), then
 * a barrier that makes the results visible to the host and downloads of
 * mirrored outputs. One vkQueueSubmit with a fence; het_vk_wait waits on it,
 * finishes the downloads and, when profiling, turns the timestamp written
 * after each node into per-node GPU times.
 *
 * Texel-buffer views (the row kernels' second way into their sources) are
 * created while encoding and destroyed when the next split starts, after
 * the wait, or when the context closes.
 *
 * Kernels' device scratch (one buffer, ctx->scratch) is sized at submit to
 * the largest need of any node; dispatches name it with a null buffer.
 *
 * Only one split is in flight: starting the next one waits for the previous
 * (its mirrored downloads must land in host memory before new uploads read
 * it). The wait is bounded; a device that does not answer is reported as
 * HET_ERR_TIMEOUT and a lost one as HET_ERR_DEVICE_LOST.
 */
#include "devices/vulkan/vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_NS        (600ull * 1000000000ull) /* GPU hangs surface as DEVICE_LOST sooner */
#define SETS_PER_POOL  256
#define MAX_RECORDS    (1 << 20)

void het_vk_split_free(struct het_vk_split *s)
{
    free(s->views);
    free(s->disp);
    free(s->up);
    free(s->down);
    free(s->written);
    free(s->prof);
    memset(s, 0, sizeof *s);
}

static enum het_status reset_pools(struct het_vk_ctx *ctx, het_error *err)
{
    for (int i = 0; i < ctx->n_dpools; i++) {
        VkResult r = vkResetDescriptorPool(ctx->device, ctx->dpools[i], 0);
        if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkResetDescriptorPool");
    }
    ctx->cur_dpool = 0;
    return HET_OK;
}

enum het_status het_vk_split_begin(struct het_vk_ctx *ctx, int n_nodes, het_error *err)
{
    if (ctx->lost) return het_error_set(err, HET_ERR_DEVICE_LOST, "vulkan: device lost earlier");
    enum het_status st = het_vk_wait(ctx, err);
    if (st != HET_OK) return st;
    het_vk_views_release(ctx);
    struct het_vk_split *s = &ctx->split;
    s->n_disp = s->n_up = s->n_down = s->n_written = 0;
    s->staging_need = 0;
    s->scratch_need = 0;
    s->n_nodes = n_nodes;
    s->timed = false;
    if (ctx->profiling && n_nodes > s->cap_prof) {
        void *p = realloc(s->prof, (size_t)n_nodes * sizeof *s->prof);
        if (!p) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for profiling");
        s->prof = p;
        s->cap_prof = n_nodes;
    }
    return reset_pools(ctx, err);
}

static enum het_status alloc_set(struct het_vk_ctx *ctx, VkDescriptorSet *set, het_error *err)
{
    for (;;) {
        if (ctx->cur_dpool == ctx->n_dpools) {
            void *p = realloc(ctx->dpools, (size_t)(ctx->n_dpools + 1) * sizeof *ctx->dpools);
            if (!p) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for descriptor pools");
            ctx->dpools = p;
            VkDescriptorPoolSize ps[2] = {
                { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, SETS_PER_POOL * HET_VK_N_BIND },
                { VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, SETS_PER_POOL * HET_VK_N_TEXEL },
            };
            VkDescriptorPoolCreateInfo pci = {
                .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                .maxSets = SETS_PER_POOL,
                .poolSizeCount = 2,
                .pPoolSizes = ps,
            };
            VkResult r = vkCreateDescriptorPool(ctx->device, &pci, NULL, &ctx->dpools[ctx->n_dpools]);
            if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateDescriptorPool");
            ctx->n_dpools++;
        }
        VkDescriptorSetAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = ctx->dpools[ctx->cur_dpool],
            .descriptorSetCount = 1,
            .pSetLayouts = &ctx->dsl,
        };
        VkResult r = vkAllocateDescriptorSets(ctx->device, &ai, set);
        if (r == VK_SUCCESS) return HET_OK;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
            return het_vk_fail(ctx, r, err, "vkAllocateDescriptorSets");
        ctx->cur_dpool++;
    }
}

static enum het_status write_set(struct het_vk_ctx *ctx, const struct het_vk_dispatch *d, VkDescriptorSet *set,
                                 het_error *err)
{
    enum het_status st = alloc_set(ctx, set, err);
    if (st != HET_OK) return st;
    VkDescriptorBufferInfo bi[HET_VK_N_BIND];
    VkWriteDescriptorSet w[HET_VK_N_BIND + HET_VK_N_TEXEL];
    uint32_t n = HET_VK_N_BIND;
    for (uint32_t i = 0; i < HET_VK_N_TEXEL; i++) {
        if (!d->tview[i]) continue;
        w[n++] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = *set,
            .dstBinding = HET_VK_N_BIND + i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
            .pTexelBufferView = &d->tview[i],
        };
    }
    for (uint32_t i = 0; i < HET_VK_N_BIND; i++) {
        VkBuffer buf = d->bind[i].buf ? d->bind[i].buf : ctx->scratch;
        bi[i] = (VkDescriptorBufferInfo){ buf, d->bind[i].offset, d->bind[i].range };
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = *set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[i],
        };
    }
    vkUpdateDescriptorSets(ctx->device, n, w, 0, NULL);
    return HET_OK;
}

bool het_vk_texel_ok(const struct het_vk_ctx *ctx, const struct het_vk_operand *op)
{
    const struct het_vk_bind *b = &op->bind;
    return b->range != VK_WHOLE_SIZE && b->offset % ctx->texel_align == 0 && (b->range + 15) / 16 <= ctx->texel_max;
}

VkDeviceSize het_vk_texel_range(VkDeviceSize range, VkDeviceSize room, uint64_t texel_max)
{
    /* ranges end on an 8-byte boundary inside a page-aligned chunk, so one
     * rounded up to the 16-byte texel stays inside the buffer */
    VkDeviceSize r = (range + 15) & ~(VkDeviceSize)15;
    if (((r >> 8) & 0xff) == 0 && r + 256 <= range + room && (r + 256) / 16 <= texel_max) r += 256;
    return r;
}

enum het_status het_vk_texel_view(struct het_vk_ctx *ctx, const struct het_vk_operand *op, VkBufferView *out,
                                  het_error *err)
{
    struct het_vk_split *s = &ctx->split;
    if (s->n_views == s->cap_views) {
        int cap = s->cap_views ? 2 * s->cap_views : 64;
        void *p = realloc(s->views, (size_t)cap * sizeof *s->views);
        if (!p) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for texel views");
        s->views = p;
        s->cap_views = cap;
    }
    VkBufferViewCreateInfo vci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = op->bind.buf,
        .format = VK_FORMAT_R32G32B32A32_UINT,
        .offset = op->bind.offset,
        .range = het_vk_texel_range(op->bind.range, op->room, ctx->texel_max),
    };
    VkResult r = vkCreateBufferView(ctx->device, &vci, NULL, out);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateBufferView");
    s->views[s->n_views++] = *out;
    return HET_OK;
}

void het_vk_views_release(struct het_vk_ctx *ctx)
{
    struct het_vk_split *s = &ctx->split;
    for (int i = 0; i < s->n_views; i++) vkDestroyBufferView(ctx->device, s->views[i], NULL);
    s->n_views = 0;
}

static enum het_status ensure_queries(struct het_vk_ctx *ctx, uint32_t n, het_error *err)
{
    if (ctx->qpool && ctx->qpool_cap >= n) return HET_OK;
    if (ctx->qpool) vkDestroyQueryPool(ctx->device, ctx->qpool, NULL);
    ctx->qpool = VK_NULL_HANDLE;
    ctx->qpool_cap = 0;
    uint32_t cap = 64;
    while (cap < n) cap *= 2;
    VkQueryPoolCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = cap,
    };
    VkResult r = vkCreateQueryPool(ctx->device, &qci, NULL, &ctx->qpool);
    if (r != VK_SUCCESS) {
        ctx->qpool = VK_NULL_HANDLE;
        return het_vk_fail(ctx, r, err, "vkCreateQueryPool");
    }
    ctx->qpool_cap = cap;
    return HET_OK;
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst)
{
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst };
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

static bool overlaps(const struct het_vk_xfer *a, const struct het_vk_xfer *b, bool up)
{
    if (up) return a->buf == b->buf && a->dev_off < b->dev_off + b->size && b->dev_off < a->dev_off + a->size;
    return a->staging_off < b->staging_off + b->size && b->staging_off < a->staging_off + a->size;
}

/* Copies in queue order; a copy whose destination overlaps an earlier one
 * waits for it (the bytes are equal, but the writes must be ordered). */
static void record_copies(struct het_vk_ctx *ctx, const struct het_vk_xfer *x, int n, bool up)
{
    int since = 0; /* first copy after the last barrier */
    for (int i = 0; i < n; i++) {
        for (int j = since; j < i; j++) {
            if (!overlaps(&x[i], &x[j], up)) continue;
            barrier(ctx->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                    VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
            since = i;
            break;
        }
        VkBufferCopy reg = {
            .srcOffset = up ? x[i].staging_off : x[i].dev_off,
            .dstOffset = up ? x[i].dev_off : x[i].staging_off,
            .size = x[i].size,
        };
        if (up) vkCmdCopyBuffer(ctx->cmd, ctx->staging, x[i].buf, 1, &reg);
        else vkCmdCopyBuffer(ctx->cmd, x[i].buf, ctx->staging, 1, &reg);
    }
}

/* The node loop: barrier, dispatches, timestamp. Dispatches are in node order. */
static enum het_status record_nodes(struct het_vk_ctx *ctx, bool timed, het_error *err)
{
    const struct het_vk_split *s = &ctx->split;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    const VkAccessFlags rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    VkPipeline bound = VK_NULL_HANDLE;
    int di = 0;
    for (int node = 0; node < s->n_nodes; node++) {
        if (node > 0 && di < s->n_disp && s->disp[di].node == node)
            barrier(ctx->cmd, cs, VK_ACCESS_SHADER_WRITE_BIT, cs, rw);
        for (; di < s->n_disp && s->disp[di].node == node; di++) {
            const struct het_vk_dispatch *d = &s->disp[di];
            if (d->after_prev) barrier(ctx->cmd, cs, VK_ACCESS_SHADER_WRITE_BIT, cs, rw);
            VkDescriptorSet set;
            enum het_status st = write_set(ctx, d, &set, err);
            if (st != HET_OK) return st;
            if (d->pipe != bound) vkCmdBindPipeline(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipe);
            bound = d->pipe;
            vkCmdBindDescriptorSets(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx->layout, 0, 1, &set, 0, NULL);
            vkCmdPushConstants(ctx->cmd, ctx->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d->push_size, d->push);
            vkCmdDispatch(ctx->cmd, d->groups[0], d->groups[1], d->groups[2]);
        }
        if (timed)
            vkCmdWriteTimestamp(ctx->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->qpool, (uint32_t)node + 1);
    }
    return HET_OK;
}

static enum het_status record(struct het_vk_ctx *ctx, bool timed, het_error *err)
{
    const struct het_vk_split *s = &ctx->split;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VkResult r = vkBeginCommandBuffer(ctx->cmd, &bi);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkBeginCommandBuffer");
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, tr = VK_PIPELINE_STAGE_TRANSFER_BIT;
    if (timed) vkCmdResetQueryPool(ctx->cmd, ctx->qpool, 0, (uint32_t)s->n_nodes + 1);
    if (s->n_up) {
        record_copies(ctx, s->up, s->n_up, true);
        barrier(ctx->cmd, tr, VK_ACCESS_TRANSFER_WRITE_BIT, cs, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    }
    if (timed) vkCmdWriteTimestamp(ctx->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->qpool, 0);
    enum het_status st = record_nodes(ctx, timed, err);
    if (st != HET_OK) {
        vkEndCommandBuffer(ctx->cmd);
        return st;
    }
    barrier(ctx->cmd, cs, VK_ACCESS_SHADER_WRITE_BIT, tr | VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
    if (s->n_down) {
        record_copies(ctx, s->down, s->n_down, false);
        barrier(ctx->cmd, tr, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    }
    r = vkEndCommandBuffer(ctx->cmd);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkEndCommandBuffer");
    return HET_OK;
}

enum het_status het_vk_split_submit(struct het_vk_ctx *ctx, het_error *err)
{
    struct het_vk_split *s = &ctx->split;
    if (s->n_disp == 0 && s->n_up == 0 && s->n_down == 0) return HET_OK;
    enum het_status st = het_vk_staging_reserve(ctx, s->staging_need, err);
    if (st == HET_OK) st = het_vk_scratch_reserve(ctx, s->scratch_need, err);
    if (st != HET_OK) return st;
    for (int i = 0; i < s->n_up; i++) {
        memcpy(ctx->staging_map + s->up[i].staging_off, s->up[i].host, s->up[i].size);
        ctx->dev->stats.copied_bytes += s->up[i].size;
    }
    bool timed = ctx->profiling && ctx->timestamps;
    if (timed) st = ensure_queries(ctx, (uint32_t)s->n_nodes + 1, err);
    if (st == HET_OK) st = record(ctx, timed, err);
    if (st != HET_OK) return st;
    VkResult r = vkResetFences(ctx->device, 1, &ctx->fence);
    VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &ctx->cmd };
    if (r == VK_SUCCESS) r = vkQueueSubmit(ctx->queue, 1, &si, ctx->fence);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkQueueSubmit");
    s->timed = timed;
    ctx->in_flight = true;
    return HET_OK;
}

static void collect_times(struct het_vk_ctx *ctx)
{
    const struct het_vk_split *s = &ctx->split;
    uint32_t n = (uint32_t)s->n_nodes + 1;
    uint64_t *ts = calloc(n, sizeof *ts);
    if (!ts) return;
    VkResult r = vkGetQueryPoolResults(ctx->device, ctx->qpool, 0, n, n * sizeof *ts, ts, sizeof *ts,
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    for (int i = 0; r == VK_SUCCESS && i < s->n_nodes; i++) {
        if (s->prof[i].op == HET_OP_NONE || s->prof[i].op == HET_OP_VIEW) continue;
        if (ctx->n_records == ctx->cap_records) {
            if (ctx->cap_records >= MAX_RECORDS) break; /* unread records: drop the newest */
            int cap = ctx->cap_records ? 2 * ctx->cap_records : 256;
            void *p = realloc(ctx->records, (size_t)cap * sizeof *ctx->records);
            if (!p) break;
            ctx->records = p;
            ctx->cap_records = cap;
        }
        struct het_vulkan_op_time *rec = &ctx->records[ctx->n_records++];
        *rec = s->prof[i];
        uint64_t ticks = (ts[i + 1] - ts[i]) & ctx->ts_mask;
        rec->gpu_us = (double)ticks * ctx->ts_period_ns / 1000.0;
    }
    free(ts);
}

enum het_status het_vk_wait(struct het_vk_ctx *ctx, het_error *err)
{
    if (!ctx->in_flight) return HET_OK;
    VkResult r = vkWaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE, WAIT_NS);
    if (r == VK_TIMEOUT)
        return het_error_set(err, HET_ERR_TIMEOUT, "vulkan: split did not finish within %llu s",
                             WAIT_NS / 1000000000ull);
    if (r != VK_SUCCESS) {
        ctx->in_flight = false;
        return het_vk_fail(ctx, r, err, "vkWaitForFences");
    }
    ctx->in_flight = false;
    const struct het_vk_split *s = &ctx->split;
    for (int i = 0; i < s->n_down; i++) {
        memcpy(s->down[i].host, ctx->staging_map + s->down[i].staging_off, s->down[i].size);
        ctx->dev->stats.copied_bytes += s->down[i].size;
    }
    if (s->timed) collect_times(ctx);
    return HET_OK;
}
