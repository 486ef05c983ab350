/* LD_PRELOAD shim that makes writes and syncs slow, the write-side sibling of slowread.c: to
 * turn a host-cached VM disk into a volume whose writes and flushes queue. fsync and fdatasync
 * (WAL flushes every commit waits for, checkpoint syncs) sleep the first number of
 * microseconds, and pwrite/pwritev of 8 kB or more (data and WAL writes) the second, both read
 * (at most every 100 ms) from the file named by $SLOWWRITE_FILE ("SYNC_US WRITE_US"), so a
 * test can move from normal to slow storage without restarting the server. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef int (*sync_fn)(int);

static void current_delays(long *sync_us, long *write_us)
{
    static __thread long cached_sync, cached_write;
    static __thread struct timespec checked;
    static pread_fn raw_pread;
    struct timespec now;
    const char *path = getenv("SLOWWRITE_FILE");

    *sync_us = *write_us = 0;
    if (path == NULL)
        return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - checked.tv_sec) * 1000000000L + (now.tv_nsec - checked.tv_nsec) > 100000000L) {
        char buf[64] = {0};
        int fd = open(path, O_RDONLY);

        if (raw_pread == NULL)
            raw_pread = (pread_fn) dlsym(RTLD_NEXT, "pread");
        cached_sync = cached_write = 0;
        if (fd >= 0) {
            if (raw_pread(fd, buf, sizeof(buf) - 1, 0) > 0)
                sscanf(buf, "%ld %ld", &cached_sync, &cached_write);
            close(fd);
        }
        checked = now;
    }
    *sync_us = cached_sync;
    *write_us = cached_write;
}

static void sleep_us(long delay)
{
    if (delay > 0)
        usleep((useconds_t) delay);
}

static void before_sync(void)
{
    long sync_us, write_us;

    current_delays(&sync_us, &write_us);
    sleep_us(sync_us);
}

static void before_write(size_t bytes)
{
    long sync_us, write_us;

    if (bytes < 8192)
        return;
    current_delays(&sync_us, &write_us);
    sleep_us(write_us);
}

static size_t iov_bytes(const struct iovec *iov, int count)
{
    size_t total = 0;

    for (int i = 0; i < count; i++)
        total += iov[i].iov_len;
    return total;
}

#define WRAP_SYNC(name)                                                        \
    int name(int fd)                                                           \
    {                                                                          \
        static sync_fn real;                                                   \
        if (real == NULL)                                                      \
            real = (sync_fn) dlsym(RTLD_NEXT, #name);                          \
        before_sync();                                                         \
        return real(fd);                                                       \
    }

#define WRAP_PWRITE(name)                                                      \
    ssize_t name(int fd, const void *buf, size_t count, off_t offset)         \
    {                                                                          \
        static pwrite_fn real;                                                 \
        if (real == NULL)                                                      \
            real = (pwrite_fn) dlsym(RTLD_NEXT, #name);                        \
        before_write(count);                                                   \
        return real(fd, buf, count, offset);                                   \
    }

#define WRAP_PWRITEV(name)                                                     \
    ssize_t name(int fd, const struct iovec *iov, int iovcnt, off_t offset)   \
    {                                                                          \
        static pwritev_fn real;                                                \
        if (real == NULL)                                                      \
            real = (pwritev_fn) dlsym(RTLD_NEXT, #name);                       \
        before_write(iov_bytes(iov, iovcnt));                                  \
        return real(fd, iov, iovcnt, offset);                                  \
    }

WRAP_SYNC(fsync)
WRAP_SYNC(fdatasync)
WRAP_PWRITE(pwrite)
WRAP_PWRITE(pwrite64)
WRAP_PWRITEV(pwritev)
WRAP_PWRITEV(pwritev64)
