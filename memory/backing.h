/*
 * backing.h — where the pool's pages come from (internal).
 *
 * One vtable per backing (NPU buffer, dma-heap, udmabuf, memfd). open()
 * creates the buffer and fills the fds, map() maps it MAP_SHARED at a 2 MiB
 * aligned address, close() undoes both; all three leave nothing behind on
 * failure. Error messages written by a backing do not carry its name: the
 * pool prefixes it ("udmabuf: /dev/udmabuf: No such file or directory").
 * backing.c holds the table and the helpers every backing shares.
 */
#ifndef HET_MEMORY_BACKING_H
#define HET_MEMORY_BACKING_H

#include <stdbool.h>
#include <stddef.h>

#include "het/pool.h"
#include "het/status.h"

struct het_backing {
    enum het_pool_backing kind;
    int    map_fd;      /* the fd mmap()ed (memfd, or the dma-buf)   */
    int    dmabuf_fd;   /* dma-buf or -1; may equal map_fd            */
    void  *base;        /* mapping, NULL until map()                  */
    size_t size;
    struct het_pool_npu_provider npu;  /* NPU backing: whom to tell on close */
};

struct het_backing_ops {
    enum het_pool_backing kind;
    const char *name;
    bool is_dmabuf;
    enum het_status (*open)(struct het_backing *b, const struct het_pool_params *p, size_t size, het_error *err);
    enum het_status (*map)(struct het_backing *b, bool hugepages, het_error *err);
    void (*close)(struct het_backing *b);
};

extern const struct het_backing_ops het_backing_npu_ops;
extern const struct het_backing_ops het_backing_dmaheap_ops;
extern const struct het_backing_ops het_backing_udmabuf_ops;
extern const struct het_backing_ops het_backing_memfd_ops;

/* NULL for HET_POOL_BACKING_NONE or out of range. */
const struct het_backing_ops *het_backing_ops_get(enum het_pool_backing kind);

/* A backing with no fds and no mapping. */
void het_backing_reset(struct het_backing *b, enum het_pool_backing kind);

/* Shared implementations of map() and close(). */
enum het_status het_backing_map_shared(struct het_backing *b, bool hugepages, het_error *err);
void het_backing_close_fds(struct het_backing *b);

/* memfd of `size` bytes (lazy: ftruncate only) carrying `seals`
 * (F_SEAL_* flags, added after sizing). */
enum het_status het_backing_memfd_create(const char *name, size_t size, unsigned seals, int *fd,
                                         het_error *err);

/* True when fd is a dma-buf (its fdinfo carries "exp_name:"; when /proc is
 * not readable, an invalid DMA_BUF_IOCTL_SYNC is answered EINVAL by a
 * dma-buf and ENOTTY by anything else). */
bool het_backing_fd_is_dmabuf(int fd);

/* DMA_BUF_IOCTL_SYNC START or END with READ/WRITE flags, retried on EINTR. */
enum het_status het_backing_dmabuf_sync(int fd, unsigned flags, bool end, het_error *err);

#endif /* HET_MEMORY_BACKING_H */
