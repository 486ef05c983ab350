/* LD_PRELOAD shim that makes data-file reads slow, to turn a host-cached VM disk into a
 * saturated one. Reads of 8 kB or more sleep SLOWREAD delay microseconds, where the delay is
 * read (at most every 100 ms) from the file named by $SLOWREAD_FILE, so a test can move from
 * normal to slow storage without restarting the server. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*preadv_fn)(int, const struct iovec *, int, off_t);

static long current_delay_us(void)
{
    static __thread long cached;
    static __thread struct timespec checked;
    static pread_fn raw_pread;
    struct timespec now;
    const char *path = getenv("SLOWREAD_FILE");

    if (path == NULL)
        return 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - checked.tv_sec) * 1000000000L + (now.tv_nsec - checked.tv_nsec) > 100000000L) {
        char buf[32] = {0};
        int fd = open(path, O_RDONLY);

        if (raw_pread == NULL)
            raw_pread = (pread_fn) dlsym(RTLD_NEXT, "pread");
        cached = 0;
        if (fd >= 0) {
            if (raw_pread(fd, buf, sizeof(buf) - 1, 0) > 0)
                cached = atol(buf);
            close(fd);
        }
        checked = now;
    }
    return cached;
}

static void maybe_sleep(size_t bytes)
{
    long delay = bytes >= 8192 ? current_delay_us() : 0;

    if (delay > 0)
        usleep((useconds_t) delay);
}

static size_t iov_bytes(const struct iovec *iov, int count)
{
    size_t total = 0;

    for (int i = 0; i < count; i++)
        total += iov[i].iov_len;
    return total;
}

#define WRAP_PREAD(name)                                                       \
    ssize_t name(int fd, void *buf, size_t count, off_t offset)               \
    {                                                                          \
        static pread_fn real;                                                  \
        if (real == NULL)                                                      \
            real = (pread_fn) dlsym(RTLD_NEXT, #name);                         \
        maybe_sleep(count);                                                    \
        return real(fd, buf, count, offset);                                   \
    }

#define WRAP_PREADV(name)                                                      \
    ssize_t name(int fd, const struct iovec *iov, int iovcnt, off_t offset)   \
    {                                                                          \
        static preadv_fn real;                                                 \
        if (real == NULL)                                                      \
            real = (preadv_fn) dlsym(RTLD_NEXT, #name);                        \
        maybe_sleep(iov_bytes(iov, iovcnt));                                   \
        return real(fd, iov, iovcnt, offset);                                  \
    }

WRAP_PREAD(pread)
WRAP_PREAD(pread64)
WRAP_PREADV(preadv)
WRAP_PREADV(preadv64)
