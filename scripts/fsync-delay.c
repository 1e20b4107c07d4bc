/* An LD_PRELOAD shim for scripts/bench-load's durable phase (issue 18): every fsync and
 * fdatasync of the process calls the real one and then sleeps NOTED_FSYNC_DELAY_US
 * microseconds (default 2000), as a disk whose syncs take that much longer would. It costs
 * nothing else: strace's fault injection held the calls too, but made every traced server far
 * slower by itself (docs/benchmarks.md).
 *
 *   cc -O2 -shared -fPIC -o fsync-delay.so scripts/fsync-delay.c -ldl
 *   LD_PRELOAD=$PWD/fsync-delay.so NOTED_FSYNC_DELAY_US=2000 noted-server …
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static long delay_us = -1;

static void hold(void) {
    if (delay_us < 0) {
        const char *text = getenv("NOTED_FSYNC_DELAY_US");
        long value = text ? strtol(text, NULL, 10) : 2000;
        delay_us = value < 0 ? 0 : value;
    }
    struct timespec left = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    int saved = errno;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    errno = saved;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    int result = real(fd);
    hold();
    return result;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    int result = real(fd);
    hold();
    return result;
}
