/*
 * vk_memory.c — host memory regions as Vulkan buffers.
 *
 * The scheduler registers every host region (weights, KV cache, scratch)
 * before running anything. Where VK_EXT_external_memory_host works the
 * pages are imported as-is (zero copy: the GPU reads what the CPU wrote).
 * Otherwise, or when the driver refuses the pointer (e.g. a read-only file
 * mapping), the region is mirrored in device memory: weights are uploaded
 * once, and each split uploads the spans it reads and downloads the spans it
 * writes (vk_exec.c does the copies; every byte counts in copied_bytes).
 *
 * The memory pool (het/pool.h) is one such region, registered once. When
 * its backing is a dma-buf and the device has VK_EXT_external_memory_dma_buf
 * the dma-buf itself is imported (one VkDeviceMemory, the chunks' buffers
 * bound into it at their offsets); otherwise its pages go the host-pointer
 * way above, and failing that the mirror.
 *
 * A region larger than one allocation is cut into chunks. For imported and
 * read-only regions consecutive chunks overlap by a window of max_span bytes
 * or more, so any operand of at most max_span bytes lies wholly inside one
 * chunk and binds with a single descriptor; mirrored writable regions cannot
 * overlap (two copies of a byte would diverge), so there an operand that
 * straddles a chunk boundary is reported as unsupported.
 */
#include "devices/vulkan/vk_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STAGING_CHUNK (64u << 20) /* blocking uploads go through this much at a time */

static size_t align_down(size_t v, size_t a) { return v / a * a; }
static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static void chunk_destroy(struct het_vk_ctx *ctx, struct het_vk_chunk *c)
{
    het_vk_buffer_release(ctx, &c->buf, &c->mem);
}

static void region_destroy(struct het_vk_ctx *ctx, struct het_vk_region *r)
{
    for (int i = 0; i < r->n_chunks; i++) chunk_destroy(ctx, &r->chunks[i]);
    if (r->dmabuf_mem) vkFreeMemory(ctx->device, r->dmabuf_mem, NULL);
    r->dmabuf_mem = VK_NULL_HANDLE;
    free(r->chunks);
    r->chunks = NULL;
    r->n_chunks = 0;
}

/* Import [ptr, ptr+size) (aligned) as one buffer. VK errors are returned raw
 * so the caller can fall back to mirroring. */
static VkResult import_chunk(struct het_vk_ctx *ctx, void *ptr, size_t size, struct het_vk_chunk *c)
{
    const VkExternalMemoryHandleTypeFlagBits ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT props = { .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT };
    VkResult r = ctx->get_host_ptr_props(ctx->device, ht, ptr, &props);
    if (r != VK_SUCCESS) return r;
    VkExternalMemoryBufferCreateInfo ebci = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = ht,
    };
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .pNext = &ebci,
        .size = size,
        .usage = het_vk_buffer_usage(ctx),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    r = vkCreateBuffer(ctx->device, &bci, NULL, &c->buf);
    if (r != VK_SUCCESS) {
        c->buf = VK_NULL_HANDLE;
        return r;
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, c->buf, &req);
    /* Host coherence is required: nothing flushes imported pages. */
    int mt = het_vk_memtype(ctx, req.memoryTypeBits & props.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (mt < 0 || req.size > size) {
        chunk_destroy(ctx, c);
        return VK_ERROR_FEATURE_NOT_PRESENT;
    }
    VkImportMemoryHostPointerInfoEXT imp = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = ht,
        .pHostPointer = ptr,
    };
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = &imp,
        .allocationSize = size,
        .memoryTypeIndex = (uint32_t)mt,
    };
    r = vkAllocateMemory(ctx->device, &mai, NULL, &c->mem);
    if (r != VK_SUCCESS) {
        c->mem = VK_NULL_HANDLE;
        chunk_destroy(ctx, c);
        return r;
    }
    r = vkBindBufferMemory(ctx->device, c->buf, c->mem, 0);
    if (r != VK_SUCCESS) chunk_destroy(ctx, c);
    return r;
}

bool het_vk_import_probe(struct het_vk_ctx *ctx)
{
    size_t size = (size_t)ctx->import_align;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    memset(p, 0, size);
    struct het_vk_chunk c = { .start = 0, .size = size };
    bool ok = import_chunk(ctx, p, size, &c) == VK_SUCCESS;
    if (ok) chunk_destroy(ctx, &c);
    munmap(p, size);
    return ok;
}

enum het_status het_vk_staging_reserve(struct het_vk_ctx *ctx, size_t size, het_error *err)
{
    if (ctx->staging_size >= size) return HET_OK;
    het_vk_buffer_release(ctx, &ctx->staging, &ctx->staging_mem);
    ctx->staging_map = NULL;
    ctx->staging_size = 0;
    size_t want = align_up(size, 1u << 20);
    void *map = NULL;
    enum het_status st = het_vk_buffer_alloc(ctx, want, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                             &ctx->staging, &ctx->staging_mem, &map, err);
    if (st != HET_OK) {
        het_error_prefix(err, "vulkan: staging buffer of %zu bytes", want);
        return st;
    }
    ctx->staging_map = map;
    ctx->staging_size = want;
    return HET_OK;
}

enum het_status het_vk_scratch_reserve(struct het_vk_ctx *ctx, size_t size, het_error *err)
{
    if (ctx->scratch_size >= size) return HET_OK;
    het_vk_buffer_release(ctx, &ctx->scratch, &ctx->scratch_mem);
    ctx->scratch_size = 0;
    size_t want = align_up(size, 1u << 16);
    enum het_status st = het_vk_buffer_alloc(ctx, want, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &ctx->scratch,
                                             &ctx->scratch_mem, NULL, err);
    if (st != HET_OK) {
        het_error_prefix(err, "vulkan: scratch buffer of %zu bytes", want);
        return st;
    }
    ctx->scratch_size = want;
    return HET_OK;
}

/* Copy host bytes into a device buffer and wait (registration-time uploads). */
static enum het_status upload_blocking(struct het_vk_ctx *ctx, VkBuffer dst, size_t dst_off, const uint8_t *src,
                                       size_t size, het_error *err)
{
    enum het_status st = het_vk_staging_reserve(ctx, size < STAGING_CHUNK ? size : STAGING_CHUNK, err);
    for (size_t done = 0; st == HET_OK && done < size;) {
        size_t n = size - done < ctx->staging_size ? size - done : ctx->staging_size;
        memcpy(ctx->staging_map, src + done, n);
        VkCommandBufferBeginInfo bi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        VkResult r = vkBeginCommandBuffer(ctx->cmd, &bi);
        if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkBeginCommandBuffer");
        VkBufferCopy reg = { .srcOffset = 0, .dstOffset = dst_off + done, .size = n };
        vkCmdCopyBuffer(ctx->cmd, ctx->staging, dst, 1, &reg);
        r = vkEndCommandBuffer(ctx->cmd);
        VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                            .pCommandBuffers = &ctx->cmd };
        if (r == VK_SUCCESS) r = vkResetFences(ctx->device, 1, &ctx->fence);
        if (r == VK_SUCCESS) r = vkQueueSubmit(ctx->queue, 1, &si, ctx->fence);
        if (r == VK_SUCCESS) r = vkWaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE, 60ull * 1000000000ull);
        if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "region upload");
        ctx->dev->stats.copied_bytes += n;
        done += n;
    }
    return st;
}

static enum het_status mirror_region(struct het_vk_ctx *ctx, struct het_vk_region *rg, het_error *err)
{
    for (int i = 0; i < rg->n_chunks; i++) {
        struct het_vk_chunk *c = &rg->chunks[i];
        enum het_status st = het_vk_buffer_alloc(ctx, c->size, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &c->buf,
                                                 &c->mem, NULL, err);
        if (st != HET_OK) {
            het_error_prefix(err, "vulkan: mirror of a %zu-byte region", rg->size);
            return st;
        }
        /* Only weights are uploaded here (once); every split uploads the
         * spans of other kinds it reads (note_mirror), so uploading them now
         * would only copy bytes twice. Only the registered bytes are read. */
        if (rg->kind != HET_MEMORY_WEIGHTS) continue;
        size_t lo = rg->base - rg->abase, hi = lo + rg->size;
        size_t a = c->start > lo ? c->start : lo;
        size_t b = c->start + c->size < hi ? c->start + c->size : hi;
        if (b > a) st = upload_blocking(ctx, c->buf, a - c->start, rg->abase + a, b - a, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

/* Lay out the chunks of a region (see the file comment). */
static enum het_status plan_chunks(struct het_vk_ctx *ctx, struct het_vk_region *rg, bool overlap, het_error *err)
{
    size_t cap = (size_t)ctx->max_alloc;
    size_t window = (size_t)(ctx->max_span + ctx->min_align + 8);
    rg->stride = rg->asize <= cap ? rg->asize : (overlap ? cap - align_up(window, ctx->import_align) : cap);
    if (rg->stride == 0 || rg->stride > cap)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: allocation limit %zu too small to chunk a region", cap);
    int n = 1;
    while ((size_t)(n - 1) * rg->stride + cap < rg->asize) n++;
    rg->chunks = calloc((size_t)n, sizeof *rg->chunks);
    if (!rg->chunks) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for region chunks");
    rg->n_chunks = n;
    for (int i = 0; i < n; i++) {
        rg->chunks[i].start = (size_t)i * rg->stride;
        size_t left = rg->asize - rg->chunks[i].start;
        rg->chunks[i].size = left < cap ? left : cap;
    }
    return HET_OK;
}

static bool try_import(struct het_vk_ctx *ctx, struct het_vk_region *rg)
{
    if (plan_chunks(ctx, rg, true, NULL) != HET_OK) return false;
    for (int i = 0; i < rg->n_chunks; i++) {
        struct het_vk_chunk *c = &rg->chunks[i];
        if (import_chunk(ctx, rg->abase + c->start, c->size, c) != VK_SUCCESS) {
            region_destroy(ctx, rg);
            return false;
        }
    }
    rg->imported = true;
    return true;
}

/* Buffers for every chunk of rg, importable from a dma-buf; the memory
 * types all of them accept, or 0. */
static uint32_t dmabuf_buffers(struct het_vk_ctx *ctx, struct het_vk_region *rg)
{
    uint32_t bits = ~0u;
    for (int i = 0; i < rg->n_chunks && bits; i++) {
        struct het_vk_chunk *c = &rg->chunks[i];
        VkExternalMemoryBufferCreateInfo ebci = {
            .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
            .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT,
        };
        VkBufferCreateInfo bci = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .pNext = &ebci,
            .size = c->size,
            .usage = het_vk_buffer_usage(ctx),
            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        };
        if (vkCreateBuffer(ctx->device, &bci, NULL, &c->buf) != VK_SUCCESS) {
            c->buf = VK_NULL_HANDLE;
            return 0;
        }
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(ctx->device, c->buf, &req);
        if (req.size > c->size || (req.alignment && c->start % req.alignment)) return 0;
        bits &= req.memoryTypeBits;
    }
    return bits;
}

/* Import the dma-buf fd behind [base, base+size) (its offset 0 is base) as
 * one allocation and bind every chunk's buffer into it. Nothing is left
 * behind on failure; the fd stays the caller's (Vulkan gets a duplicate). */
static bool try_import_dmabuf(struct het_vk_ctx *ctx, struct het_vk_region *rg, int fd)
{
    const VkExternalMemoryHandleTypeFlagBits ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT;
    VkMemoryFdPropertiesKHR fdp = { .sType = VK_STRUCTURE_TYPE_MEMORY_FD_PROPERTIES_KHR };
    if (ctx->get_fd_props(ctx->device, ht, fd, &fdp) != VK_SUCCESS) return false;
    if (plan_chunks(ctx, rg, true, NULL) != HET_OK) return false;
    int mt = het_vk_memtype(ctx, dmabuf_buffers(ctx, rg) & fdp.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    int dup_fd = mt < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
    VkResult r = VK_ERROR_FEATURE_NOT_PRESENT;
    if (dup_fd >= 0) {
        VkImportMemoryFdInfoKHR imp = { .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, .handleType = ht,
                                        .fd = dup_fd };
        VkMemoryAllocateInfo mai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp,
                                     .allocationSize = rg->asize, .memoryTypeIndex = (uint32_t)mt };
        r = vkAllocateMemory(ctx->device, &mai, NULL, &rg->dmabuf_mem);
        if (r != VK_SUCCESS) {
            rg->dmabuf_mem = VK_NULL_HANDLE;
            close(dup_fd);   /* a failed import does not take the fd */
        }
    }
    for (int i = 0; r == VK_SUCCESS && i < rg->n_chunks; i++)
        r = vkBindBufferMemory(ctx->device, rg->chunks[i].buf, rg->dmabuf_mem, rg->chunks[i].start);
    if (r != VK_SUCCESS) {
        region_destroy(ctx, rg);
        return false;
    }
    rg->imported = true;
    return true;
}

/* Room for one more region after checking that [base, base+size) overlaps none. */
static enum het_status region_slot(struct het_vk_ctx *ctx, void *base, size_t size, het_error *err)
{
    if (!base || size == 0) return het_error_set(err, HET_ERR_INVALID, "vulkan: register_memory of an empty region");
    for (int i = 0; i < ctx->n_regions; i++) {
        const struct het_vk_region *o = &ctx->regions[i];
        if ((uint8_t *)base < o->base + o->size && o->base < (uint8_t *)base + size)
            return het_error_set(err, HET_ERR_INVALID, "vulkan: region %p+%zu overlaps registered %p+%zu", base, size,
                                 (void *)o->base, o->size);
    }
    enum het_status st = het_vk_wait(ctx, err);
    if (st != HET_OK) return st;
    if (ctx->n_regions == ctx->cap_regions) {
        int cap = ctx->cap_regions ? 2 * ctx->cap_regions : 8;
        void *p = realloc(ctx->regions, (size_t)cap * sizeof *ctx->regions);
        if (!p) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for regions");
        ctx->regions = p;
        ctx->cap_regions = cap;
    }
    return HET_OK;
}

enum het_status het_vk_pool_add(struct het_vk_ctx *ctx, het_pool *pool, het_error *err)
{
    void *base = het_pool_base(pool);
    size_t size = het_pool_size(pool);
    int fd = het_pool_dmabuf_fd(pool);
    if (fd >= 0 && ctx->dmabuf_ok) {
        enum het_status st = region_slot(ctx, base, size, err);
        if (st != HET_OK) return st;
        /* the dma-buf starts at the pool's base: no rounding to the host-pointer alignment */
        struct het_vk_region rg = { .base = base, .size = size, .abase = base, .asize = size,
                                    .kind = HET_MEMORY_STATE };
        if (try_import_dmabuf(ctx, &rg, fd)) {
            ctx->regions[ctx->n_regions++] = rg;
            snprintf(ctx->dev->pool_import, sizeof ctx->dev->pool_import, "dma-buf import");
            return HET_OK;
        }
    }
    enum het_status st = het_vk_region_add(ctx, base, size, HET_MEMORY_STATE, err);
    if (st != HET_OK) return st;
    const bool imported = ctx->regions[ctx->n_regions - 1].imported;
    snprintf(ctx->dev->pool_import, sizeof ctx->dev->pool_import, "%s%s",
             imported ? "host-pointer import" : "mirrored (explicit copies, counted)",
             fd >= 0 && !ctx->dmabuf_ok ? "; no dma-buf import on this device" : "");
    return HET_OK;
}

enum het_status het_vk_region_add(struct het_vk_ctx *ctx, void *base, size_t size, enum het_memory_kind kind,
                                  het_error *err)
{
    enum het_status st = region_slot(ctx, base, size, err);
    if (st != HET_OK) return st;
    struct het_vk_region rg = { .base = base, .size = size, .kind = kind };
    rg.abase = (uint8_t *)align_down((uintptr_t)base, ctx->import_align);
    rg.asize = align_up((size_t)((uint8_t *)base + size - rg.abase), ctx->import_align);

    /* A discrete device would read imported weights across the bus at every
     * use: there they are uploaded once instead. */
    const bool import = ctx->import_ok && !(ctx->own_memory && kind == HET_MEMORY_WEIGHTS);
    if (!(import && try_import(ctx, &rg))) {
        st = plan_chunks(ctx, &rg, kind == HET_MEMORY_WEIGHTS, err);
        if (st == HET_OK) st = mirror_region(ctx, &rg, err);
        if (st != HET_OK) {
            region_destroy(ctx, &rg);
            return st;
        }
    }
    ctx->regions[ctx->n_regions++] = rg;
    return HET_OK;
}

void het_vk_region_remove(struct het_vk_ctx *ctx, void *base)
{
    het_vk_wait(ctx, NULL);
    for (int i = 0; i < ctx->n_regions; i++) {
        if (ctx->regions[i].base != base) continue;
        region_destroy(ctx, &ctx->regions[i]);
        ctx->regions[i] = ctx->regions[--ctx->n_regions];
        return;
    }
}

void het_vk_regions_free(struct het_vk_ctx *ctx)
{
    for (int i = 0; i < ctx->n_regions; i++) region_destroy(ctx, &ctx->regions[i]);
    ctx->n_regions = 0;
}

static bool grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool span_written(const struct het_vk_split *s, const uint8_t *lo, size_t size)
{
    for (int i = 0; i < s->n_written; i++)
        if (s->written[i].lo <= lo && lo + size <= s->written[i].lo + s->written[i].size) return true;
    return false;
}

static enum het_status queue_xfer(struct het_vk_ctx *ctx, bool up, VkBuffer buf, size_t dev_off, const uint8_t *host,
                                  size_t size, het_error *err)
{
    struct het_vk_split *s = &ctx->split;
    struct het_vk_xfer **list = up ? &s->up : &s->down;
    int *n = up ? &s->n_up : &s->n_down;
    int *cap = up ? &s->cap_up : &s->cap_down;
    for (int i = 0; i < *n; i++) { /* already queued (or covered, for uploads) */
        const struct het_vk_xfer *x = &(*list)[i];
        if (x->buf == buf && x->dev_off == dev_off && x->size == size) return HET_OK;
        if (up && x->buf == buf && x->dev_off <= dev_off && dev_off + size <= x->dev_off + x->size) return HET_OK;
    }
    if (!grow((void **)list, cap, *n + 1, sizeof **list))
        return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory queueing copies");
    (*list)[(*n)++] = (struct het_vk_xfer){
        .buf = buf, .dev_off = dev_off, .host = (uint8_t *)host, .size = size, .staging_off = s->staging_need,
    };
    s->staging_need += align_up(size, 16);
    return HET_OK;
}

static enum het_status note_mirror(struct het_vk_ctx *ctx, const struct het_vk_region *rg,
                                   const struct het_vk_chunk *c, const uint8_t *lo, size_t size, bool write,
                                   bool gaps, het_error *err)
{
    struct het_vk_split *s = &ctx->split;
    size_t dev_off = (size_t)(lo - rg->abase) - c->start;
    enum het_status st = HET_OK;
    bool need_up = (!write || gaps) && rg->kind != HET_MEMORY_WEIGHTS && !span_written(s, lo, size);
    if (need_up) st = queue_xfer(ctx, true, c->buf, dev_off, lo, size, err);
    if (st == HET_OK && write) {
        st = queue_xfer(ctx, false, c->buf, dev_off, lo, size, err);
        if (st == HET_OK && !grow((void **)&s->written, &s->cap_written, s->n_written + 1, sizeof *s->written))
            st = het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory");
        if (st == HET_OK) s->written[s->n_written++] = (struct het_vk_span){ lo, size };
    }
    return st;
}

enum het_status het_vk_bind_span(struct het_vk_ctx *ctx, const uint8_t *lo, size_t size, bool write, bool gaps,
                                 struct het_vk_operand *op, het_error *err)
{
    if (size == 0) {
        *op = (struct het_vk_operand){ .bind = { ctx->dummy, 0, VK_WHOLE_SIZE }, .off = 0 };
        return HET_OK;
    }
    const struct het_vk_region *rg = NULL;
    for (int i = 0; i < ctx->n_regions && !rg; i++)
        if (ctx->regions[i].base <= lo && lo + size <= ctx->regions[i].base + ctx->regions[i].size)
            rg = &ctx->regions[i];
    if (!rg)
        return het_error_set(err, HET_ERR_INVALID, "vulkan: %zu bytes at %p are not in a registered memory region",
                             size, (const void *)lo);
    size_t off = (size_t)(lo - rg->abase);
    size_t start = align_down(off, ctx->min_align);
    size_t end = align_up(off + size, 4);
    int k = (int)(start / rg->stride);
    if (k >= rg->n_chunks) k = rg->n_chunks - 1;
    const struct het_vk_chunk *c = &rg->chunks[k];
    if (end > c->start + c->size || end - start > ctx->max_bind)
        return het_error_set(err, HET_ERR_UNSUPPORTED,
                             "vulkan: operand of %zu bytes at region offset %zu does not fit one descriptor "
                             "(range limit %llu, chunk %d ends at %zu)", size, off,
                             (unsigned long long)ctx->max_bind, k, c->start + c->size);
    op->bind.buf = c->buf;
    op->bind.offset = start - c->start;
    op->bind.range = end - start;
    op->off = (uint32_t)(off - start);
    op->room = c->start + c->size - end;
    if (rg->imported) return HET_OK;
    return note_mirror(ctx, rg, c, lo, size, write, gaps, err);
}
