/*
 * cmd_devices.c — `hetrun devices`: every device het can use, with what it
 * can do. Devices that cannot be opened are listed with the reason.
 */
#include "tools/hetrun.h"

#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define HR_VULKAN 1
#endif

int cmd_devices(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "devices", "-t --json", argc, argv)) return 2;
    het_error err = { 0 };
    het_device *cpu = het_cpu_device_init(o.threads, &err);
    if (cpu) {
        printf("cpu       %s\n", het_device_description(cpu));
        het_device_free(cpu);
    } else {
        printf("cpu       unavailable: %s\n", err.msg);
    }
#ifdef HR_VULKAN
    het_device *vk = het_vulkan_device_init(-1, &err);
    if (vk) {
        printf("%-9s %s\n", het_device_name(vk), het_device_description(vk));
        het_device_free(vk);
    } else {
        printf("vulkan    unavailable: %s\n", err.msg);
    }
#else
    printf("vulkan    not built (install libvulkan-dev and glslc, then rebuild)\n");
#endif
    printf("npu       not built yet (issue: NPU backend)\n");
    return 0;
}
