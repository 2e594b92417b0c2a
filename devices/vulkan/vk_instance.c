/*
 * vk_instance.c — Vulkan instance creation and device discovery.
 *
 * Owns the public listing (het_vulkan_device_count / _list), the mapping of
 * VkResult to het_status, and the policy that picks a device when the caller
 * does not name one: integrated first (it shares memory with the CPU and the
 * NPU), then discrete, then a CPU implementation such as lavapipe. Every
 * listing creates and destroys its own instance: there is no global state.
 */
#include "devices/vulkan/vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum het_status het_vk_status(VkResult r)
{
    switch (r) {
    case VK_SUCCESS:                     return HET_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_TOO_MANY_OBJECTS:      return HET_ERR_NOMEM;
    case VK_ERROR_DEVICE_LOST:           return HET_ERR_DEVICE_LOST;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED: return HET_ERR_NO_DEVICE;
    case VK_TIMEOUT:                     return HET_ERR_TIMEOUT;
    default:                             return HET_ERR_DEVICE;
    }
}

const char *het_vk_result_str(VkResult r)
{
    switch (r) {
    case VK_SUCCESS:                        return "VK_SUCCESS";
    case VK_TIMEOUT:                        return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:       return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:     return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:    return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:              return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:        return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:    return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:         return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:     return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL:          return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:       return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE:  return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    default:                                return "VkResult(other)";
    }
}

enum het_status het_vk_fail(struct het_vk_ctx *ctx, VkResult r, het_error *err, const char *what)
{
    enum het_status st = het_vk_status(r);
    if (st == HET_OK) st = HET_ERR_DEVICE;
    if (ctx && r == VK_ERROR_DEVICE_LOST) ctx->lost = true;
    return het_error_set(err, st, "vulkan: %s: %s (%d)", what, het_vk_result_str(r), (int)r);
}

enum het_status het_vk_instance_create(VkInstance *out, het_error *err)
{
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "het",
        .applicationVersion = 1,
        .pEngineName = "het",
        .engineVersion = 1,
        .apiVersion = VK_API_VERSION_1_2,
    };
    /* Portability enumeration lets the loader show non-conformant drivers too. */
    uint32_t n_ext = 0;
    const char *exts[1];
    uint32_t n_avail = 0;
    VkResult r = vkEnumerateInstanceExtensionProperties(NULL, &n_avail, NULL);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: no Vulkan loader/driver (%s)", het_vk_result_str(r));
    }
    VkExtensionProperties *avail = calloc(n_avail ? n_avail : 1, sizeof *avail);
    if (!avail) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory listing instance extensions");
    vkEnumerateInstanceExtensionProperties(NULL, &n_avail, avail);
    VkInstanceCreateFlags flags = 0;
    for (uint32_t i = 0; i < n_avail; i++) {
        if (!strcmp(avail[i].extensionName, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
            exts[n_ext++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
            flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
        }
    }
    free(avail);
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = exts,
    };
    r = vkCreateInstance(&ci, NULL, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        enum het_status st = het_vk_status(r);
        if (st == HET_ERR_DEVICE) st = HET_ERR_NO_DEVICE;
        return het_error_set(err, st, "vulkan: vkCreateInstance: %s", het_vk_result_str(r));
    }
    return HET_OK;
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(e[i].extensionName, name)) return true;
    return false;
}

static enum het_vulkan_device_type map_type(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return HET_VULKAN_TYPE_INTEGRATED;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:   return HET_VULKAN_TYPE_DISCRETE;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:    return HET_VULKAN_TYPE_VIRTUAL;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:            return HET_VULKAN_TYPE_CPU;
    default:                                     return HET_VULKAN_TYPE_OTHER;
    }
}

int het_vk_compute_family(VkPhysicalDevice pd, bool *timestamps)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32) n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        if (best < 0 || (q[best].timestampValidBits == 0 && q[i].timestampValidBits > 0)) best = (int)i;
    }
    *timestamps = best >= 0 && q[best].timestampValidBits > 0;
    return best;
}

void het_vk_info_fill(VkInstance inst, VkPhysicalDevice pd, int index, struct het_vulkan_device_info *info)
{
    (void)inst;
    memset(info, 0, sizeof *info);
    info->index = index;

    VkPhysicalDeviceDriverProperties drv = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES };
    VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              .pNext = &drv };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg };
    VkPhysicalDeviceProperties p1;
    vkGetPhysicalDeviceProperties(pd, &p1);
    bool v12 = p1.apiVersion >= VK_API_VERSION_1_2;
    if (v12) vkGetPhysicalDeviceProperties2(pd, &p2);
    else p2.properties = p1;
    const VkPhysicalDeviceProperties *p = &p2.properties;

    snprintf(info->name, sizeof info->name, "%s", p->deviceName);
    info->type = map_type(p->deviceType);
    info->vendor_id = p->vendorID;
    info->device_id = p->deviceID;
    info->api_version = p->apiVersion;
    info->driver_version = p->driverVersion;
    if (v12) {
        snprintf(info->driver_name, sizeof info->driver_name, "%s", drv.driverName);
        snprintf(info->driver_info, sizeof info->driver_info, "%s", drv.driverInfo);
        info->subgroup_size = sg.subgroupSize;
        info->subgroup_arithmetic = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                    (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                                    (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    }
    info->max_storage_buffer_range = p->limits.maxStorageBufferRange;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    info->n_heaps = (int)(mp.memoryHeapCount < HET_VULKAN_MAX_HEAPS ? mp.memoryHeapCount : HET_VULKAN_MAX_HEAPS);
    for (int i = 0; i < info->n_heaps; i++) {
        info->heaps[i].size = mp.memoryHeaps[i].size;
        info->heaps[i].device_local = mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    }

    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (ext) {
        vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, ext);
        info->external_memory_host = has_ext(ext, n_ext, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
        info->dma_buf = has_ext(ext, n_ext, VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME);
        free(ext);
    }

    info->max_allocation_size = 1ull << 30; /* Vulkan 1.1 guarantees at least 1 GiB */
    if (v12) {
        VkPhysicalDeviceMaintenance3Properties m3 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES };
        VkPhysicalDeviceProperties2 q2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3 };
        vkGetPhysicalDeviceProperties2(pd, &q2);
        if (m3.maxMemoryAllocationSize) info->max_allocation_size = m3.maxMemoryAllocationSize;

        VkPhysicalDevice16BitStorageFeatures f16 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES };
        VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f16 };
        vkGetPhysicalDeviceFeatures2(pd, &f2);
        info->storage_16bit = f16.storageBuffer16BitAccess;
    }
    bool ts = false;
    int fam = het_vk_compute_family(pd, &ts);
    info->timestamps = ts && p->limits.timestampPeriod > 0;
    info->usable = v12 && fam >= 0;
}

int het_vk_policy_pick(const struct het_vulkan_device_info *infos, int n)
{
    static const enum het_vulkan_device_type order[] = {
        HET_VULKAN_TYPE_INTEGRATED, HET_VULKAN_TYPE_DISCRETE, HET_VULKAN_TYPE_CPU,
        HET_VULKAN_TYPE_VIRTUAL, HET_VULKAN_TYPE_OTHER,
    };
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
        for (int i = 0; i < n; i++)
            if (infos[i].usable && infos[i].type == order[o]) return i;
    return -1;
}

enum het_status het_vulkan_device_list(struct het_vulkan_device_info *out, int max, int *n_out, het_error *err)
{
    *n_out = 0;
    VkInstance inst;
    enum het_status st = het_vk_instance_create(&inst, err);
    if (st != HET_OK) return st;
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst, &n, NULL);
    if (r != VK_SUCCESS) {
        vkDestroyInstance(inst, NULL);
        return het_vk_fail(NULL, r, err, "vkEnumeratePhysicalDevices");
    }
    VkPhysicalDevice *pds = calloc(n ? n : 1, sizeof *pds);
    if (!pds) {
        vkDestroyInstance(inst, NULL);
        return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory listing devices");
    }
    vkEnumeratePhysicalDevices(inst, &n, pds);
    for (uint32_t i = 0; i < n && (int)i < max; i++) het_vk_info_fill(inst, pds[i], (int)i, &out[i]);
    *n_out = (int)n;
    free(pds);
    vkDestroyInstance(inst, NULL);
    if (n == 0) return het_error_set(err, HET_ERR_NO_DEVICE, "vulkan: the loader found no physical device");
    return HET_OK;
}

int het_vulkan_device_count(het_error *err)
{
    int n = 0;
    enum het_status st = het_vulkan_device_list(NULL, 0, &n, err);
    return st == HET_OK ? n : 0;
}
