/*
 * vk_context.c — opening and closing one Vulkan device.
 *
 * Creates the logical device with the one compute queue het uses, enables
 * VK_EXT_external_memory_host when the driver has it (zero-copy import of
 * the scheduler's host regions) and VK_EXT_external_memory_dma_buf (import
 * of a dma-buf backed memory pool), works out the limits every encoder obeys
 * (descriptor range, allocation size, offset alignment) and owns the small
 * always-present objects: command pool/buffer, fence, a dummy buffer for
 * unused bindings. Also the buffer allocation helpers used elsewhere.
 */
#include "devices/vulkan/vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int het_vk_memtype(const struct het_vk_ctx *ctx, uint32_t bits, VkMemoryPropertyFlags want,
                   VkMemoryPropertyFlags prefer)
{
    int found = -1;
    for (uint32_t i = 0; i < ctx->memprops.memoryTypeCount; i++) {
        if (!(bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = ctx->memprops.memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (found < 0) found = (int)i;
    }
    return found;
}

enum het_status het_vk_buffer_alloc(struct het_vk_ctx *ctx, VkDeviceSize size, VkMemoryPropertyFlags want,
                                    VkMemoryPropertyFlags prefer, VkBuffer *buf, VkDeviceMemory *mem,
                                    void **map, het_error *err)
{
    *buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE;
    if (map) *map = NULL;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = het_vk_buffer_usage(ctx),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vkCreateBuffer(ctx->device, &bci, NULL, buf);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, *buf, &req);
    int mt = het_vk_memtype(ctx, req.memoryTypeBits, want, prefer);
    if (mt < 0) {
        vkDestroyBuffer(ctx->device, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        return het_error_set(err, HET_ERR_DEVICE, "vulkan: no memory type with flags 0x%x for a %llu-byte buffer",
                             (unsigned)want, (unsigned long long)size);
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)mt,
    };
    r = vkAllocateMemory(ctx->device, &mai, NULL, mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(ctx->device, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
        char what[96];
        snprintf(what, sizeof what, "vkAllocateMemory(%llu bytes)", (unsigned long long)req.size);
        return het_vk_fail(ctx, r, err, what);
    }
    r = vkBindBufferMemory(ctx->device, *buf, *mem, 0);
    if (r == VK_SUCCESS && map) r = vkMapMemory(ctx->device, *mem, 0, VK_WHOLE_SIZE, 0, map);
    if (r != VK_SUCCESS) {
        het_vk_buffer_release(ctx, buf, mem);
        return het_vk_fail(ctx, r, err, "vkBindBufferMemory/vkMapMemory");
    }
    return HET_OK;
}

VkBufferUsageFlags het_vk_buffer_usage(const struct het_vk_ctx *ctx)
{
    VkBufferUsageFlags u = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                           VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    return ctx->use_rows ? u | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : u;
}

void het_vk_buffer_release(struct het_vk_ctx *ctx, VkBuffer *buf, VkDeviceMemory *mem)
{
    if (*buf) vkDestroyBuffer(ctx->device, *buf, NULL);
    if (*mem) vkFreeMemory(ctx->device, *mem, NULL);
    *buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Pick the physical device and copy its description into ctx->info. */
static enum het_status choose_physical(struct het_vk_ctx *ctx, int index, het_error *err)
{
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(ctx->instance, &n, NULL);
    if (r != VK_SUCCESS) return het_vk_fail(NULL, r, err, "vkEnumeratePhysicalDevices");
    if (n == 0) return het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: the loader found no physical device");
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    struct het_vulkan_device_info *infos = calloc(n, sizeof *infos);
    if (!pds || !infos) {
        free(pds);
        free(infos);
        return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory listing devices");
    }
    vkEnumeratePhysicalDevices(ctx->instance, &n, pds);
    for (uint32_t i = 0; i < n; i++) het_vk_info_fill(ctx->instance, pds[i], (int)i, &infos[i]);
    enum het_status st = HET_OK;
    int pick = index < 0 ? het_vk_policy_pick(infos, (int)n) : index;
    if (pick < 0) {
        st = het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: none of %u devices has Vulkan 1.2 and a compute queue", n);
    } else if (pick >= (int)n) {
        st = het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: device index %d out of range (%u devices)", pick, n);
    } else if (!infos[pick].usable) {
        st = het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: device %d (%s) lacks Vulkan 1.2 or a compute queue",
                           pick, infos[pick].name);
    } else {
        ctx->phys = pds[pick];
        ctx->info = infos[pick];
    }
    free(pds);
    free(infos);
    return st;
}

static enum het_status create_device(struct het_vk_ctx *ctx, het_error *err)
{
    bool ts = false;
    int fam = het_vk_compute_family(ctx->phys, &ts);
    ctx->qfamily = (uint32_t)fam;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = ctx->qfamily,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    const char *exts[4];
    uint32_t n_ext = 0;
    bool want_import = ctx->info.external_memory_host && !ctx->opt.no_import;
    bool want_dmabuf = ctx->info.dma_buf && !ctx->opt.no_import;   /* the extension requires _fd */
    if (want_import) exts[n_ext++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    if (want_dmabuf) {
        exts[n_ext++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
        exts[n_ext++] = VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME;
    }
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateDevice(ctx->phys, &dci, NULL, &ctx->device);
    if (r != VK_SUCCESS) {
        ctx->device = VK_NULL_HANDLE;
        return het_vk_fail(ctx, r, err, "vkCreateDevice");
    }
    vkGetDeviceQueue(ctx->device, ctx->qfamily, 0, &ctx->queue);
    if (want_import)
        ctx->get_host_ptr_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(
            ctx->device, "vkGetMemoryHostPointerPropertiesEXT");
    ctx->import_ok = want_import && ctx->get_host_ptr_props;
    if (want_dmabuf)
        ctx->get_fd_props = (PFN_vkGetMemoryFdPropertiesKHR)vkGetDeviceProcAddr(ctx->device, "vkGetMemoryFdPropertiesKHR");
    ctx->dmabuf_ok = want_dmabuf && ctx->get_fd_props;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->phys, &nq, NULL);
    VkQueueFamilyProperties *qp = calloc(nq, sizeof *qp);
    if (!qp) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory");
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->phys, &nq, qp);
    uint32_t bits = qp[ctx->qfamily].timestampValidBits;
    free(qp);
    ctx->timestamps = ts && ctx->info.timestamps;
    ctx->ts_mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    return HET_OK;
}

static void set_limits(struct het_vk_ctx *ctx)
{
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
    };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 };
    if (ctx->info.external_memory_host) p2.pNext = &hp;
    vkGetPhysicalDeviceProperties2(ctx->phys, &p2);
    const VkPhysicalDeviceLimits *l = &p2.properties.limits;

    ctx->max_bind = min_u64(l->maxStorageBufferRange, 0xFFFFFFFCull) & ~3ull;
    if (ctx->opt.max_bind) ctx->max_bind = min_u64(ctx->max_bind, ctx->opt.max_bind & ~3ull);
    ctx->max_alloc = min_u64(ctx->info.max_allocation_size, 1ull << 32);
    if (ctx->opt.max_alloc) ctx->max_alloc = min_u64(ctx->max_alloc, ctx->opt.max_alloc);
    ctx->min_align = l->minStorageBufferOffsetAlignment < 4 ? 4 : l->minStorageBufferOffsetAlignment;
    ctx->import_align = hp.minImportedHostPointerAlignment ? hp.minImportedHostPointerAlignment : 4096;
    if (ctx->import_align < 4096) ctx->import_align = 4096;
    ctx->max_alloc &= ~(ctx->import_align - 1);
    for (int i = 0; i < 3; i++) ctx->max_groups[i] = l->maxComputeWorkGroupCount[i];
    ctx->max_wg = l->maxComputeWorkGroupInvocations < l->maxComputeWorkGroupSize[0]
                      ? l->maxComputeWorkGroupInvocations : l->maxComputeWorkGroupSize[0];
    ctx->gemm_ok = !ctx->opt.no_gemm && ctx->max_wg >= HET_VK_GEMM_WG &&
                   l->maxComputeSharedMemorySize >= HET_VK_GEMM_SHARED;
    ctx->ts_period_ns = l->timestampPeriod;
    /* Any span up to max_span fits one descriptor inside one region chunk:
     * chunks overlap by `window` bytes (see vk_memory.c). */
    uint64_t window = min_u64(ctx->max_bind, ctx->max_alloc / 2) & ~(ctx->import_align - 1);
    if (window == 0) window = min_u64(ctx->max_bind, ctx->max_alloc / 2);
    ctx->max_span = window > ctx->min_align + 8 ? window - ctx->min_align - 8 : 0;
    ctx->use_subgroup = ctx->info.subgroup_arithmetic && !ctx->opt.no_subgroup;
}

static enum het_status create_exec_objects(struct het_vk_ctx *ctx, het_error *err)
{
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->qfamily,
    };
    VkResult r = vkCreateCommandPool(ctx->device, &pci, NULL, &ctx->cpool);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->cpool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    r = vkAllocateCommandBuffers(ctx->device, &cai, &ctx->cmd);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    r = vkCreateFence(ctx->device, &fci, NULL, &ctx->fence);
    if (r != VK_SUCCESS) return het_vk_fail(ctx, r, err, "vkCreateFence");
    return het_vk_buffer_alloc(ctx, 256, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &ctx->dummy, &ctx->dummy_mem,
                               NULL, err);
}

enum het_status het_vk_ctx_open(struct het_vk_ctx *ctx, int index, het_error *err)
{
    enum het_status st = het_vk_instance_create(&ctx->instance, err);
    if (st == HET_OK) st = choose_physical(ctx, index, err);
    if (st == HET_OK) {
        vkGetPhysicalDeviceMemoryProperties(ctx->phys, &ctx->memprops);
        st = create_device(ctx, err);
    }
    if (st == HET_OK) {
        set_limits(ctx);
        ctx->own_memory = ctx->info.type == HET_VULKAN_TYPE_DISCRETE || ctx->opt.own_memory;
        /* A driver that lists external_memory_host may still refuse every
         * import (seen: NVIDIA 580 on an H200 in a VM, VK_ERROR_OUT_OF_DEVICE_MEMORY),
         * and afterwards refuse plain allocations as well: probe once, and on
         * refusal re-create the device without the extension (mirrored memory). */
        if (ctx->import_ok && (ctx->opt.refuse_probe || !het_vk_import_probe(ctx))) {
            vkDestroyDevice(ctx->device, NULL);
            ctx->device = VK_NULL_HANDLE;
            ctx->opt.no_import = true;
            ctx->import_refused = true;
            st = create_device(ctx, err);
        }
    }
    if (st == HET_OK) st = create_exec_objects(ctx, err);
    if (st == HET_OK) st = het_vk_pipelines_init(ctx, err);
    return st;
}

void het_vk_ctx_close(struct het_vk_ctx *ctx)
{
    if (ctx->device) {
        vkDeviceWaitIdle(ctx->device);
        het_vk_views_release(ctx);
        het_vk_regions_free(ctx);
        het_vk_pipelines_free(ctx);
        for (int i = 0; i < ctx->n_dpools; i++) vkDestroyDescriptorPool(ctx->device, ctx->dpools[i], NULL);
        if (ctx->qpool) vkDestroyQueryPool(ctx->device, ctx->qpool, NULL);
        het_vk_buffer_release(ctx, &ctx->staging, &ctx->staging_mem);
        het_vk_buffer_release(ctx, &ctx->scratch, &ctx->scratch_mem);
        het_vk_buffer_release(ctx, &ctx->dummy, &ctx->dummy_mem);
        if (ctx->fence) vkDestroyFence(ctx->device, ctx->fence, NULL);
        if (ctx->cpool) vkDestroyCommandPool(ctx->device, ctx->cpool, NULL);
        vkDestroyDevice(ctx->device, NULL);
    }
    free(ctx->dpools);
    free(ctx->regions);
    het_vk_split_free(&ctx->split);
    free(ctx->records);
    if (ctx->instance) vkDestroyInstance(ctx->instance, NULL);
    memset(ctx, 0, sizeof *ctx);
}
