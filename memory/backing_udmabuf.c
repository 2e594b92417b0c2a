/*
 * backing_udmabuf.c — backing 3: a dma-buf made by /dev/udmabuf over a
 * sealed memfd.
 *
 * The pages stay the memfd's (lazy, shmem, THP-capable) and the CPU maps the
 * memfd; UDMABUF_CREATE wraps the same pages in a dma-buf that devices
 * import. udmabuf demands F_SEAL_SHRINK and refuses F_SEAL_WRITE, and limits
 * one buffer to the module parameter size_limit_mb (64 MiB by default), so a
 * large pool needs that parameter raised; the error says so.
 */
#include "memory/backing.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define UDMABUF_LIMIT_PARAM "/sys/module/udmabuf/parameters/size_limit_mb"

/* The per-buffer limit in bytes, or 0 when unknown. */
static size_t udmabuf_size_limit(void)
{
    FILE *f = fopen(UDMABUF_LIMIT_PARAM, "re");
    long mb = 0;
    if (!f) return 0;
    if (fscanf(f, "%ld", &mb) != 1) mb = 0;
    fclose(f);
    return mb > 0 ? (size_t)mb << 20 : 0;
}

static enum het_status udmabuf_open(struct het_backing *b, const struct het_pool_params *p, size_t size,
                                    het_error *err)
{
    const char *path = p->udmabuf_path ? p->udmabuf_path : "/dev/udmabuf";
    int dev = open(path, O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        int e = errno;
        return het_error_set(err, e == ENOENT ? HET_ERR_NO_DEVICE : HET_ERR_IO, "%s: %s", path, strerror(e));
    }
    int memfd;
    enum het_status st = het_backing_memfd_create(p->name ? p->name : "het-pool", size,
                                                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &memfd, err);
    if (st != HET_OK) {
        close(dev);
        return st;
    }
    struct udmabuf_create c = { .memfd = (__u32)memfd, .flags = UDMABUF_FLAGS_CLOEXEC, .offset = 0, .size = size };
    int buf = ioctl(dev, UDMABUF_CREATE, &c);
    int e = errno;
    close(dev);
    if (buf < 0) {
        close(memfd);
        size_t limit = udmabuf_size_limit();
        if (limit && size > limit)
            return het_error_set(err, HET_ERR_DEVICE,
                                 "%s: UDMABUF_CREATE(%zu bytes): %s (limit %zu MiB per buffer, see %s)", path,
                                 size, strerror(e), limit >> 20, UDMABUF_LIMIT_PARAM);
        return het_error_set(err, HET_ERR_DEVICE, "%s: UDMABUF_CREATE(%zu bytes): %s", path, size, strerror(e));
    }
    b->map_fd = memfd;
    b->dmabuf_fd = buf;
    b->size = size;
    return HET_OK;
}

const struct het_backing_ops het_backing_udmabuf_ops = {
    .kind      = HET_POOL_BACKING_UDMABUF,
    .name      = "udmabuf",
    .is_dmabuf = true,
    .open      = udmabuf_open,
    .map       = het_backing_map_shared,
    .close     = het_backing_close_fds,
};
