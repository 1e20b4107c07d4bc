/* fsync-rate: how many durable small writes per second the disk under DIR takes.
 *
 *   cc -O2 -o fsync-rate scripts/fsync-rate.c && ./fsync-rate DIR SECONDS
 *
 * Two loops of SECONDS each, in a new file in DIR (removed afterwards): "overwrite" writes one
 * 4 KiB block at offset 0 and fdatasync()s it (a page rewritten in place: the least a commit
 * costs), "append" appends one 4 KiB block and fdatasync()s it (the file grows, so its size is
 * synced too, as a log such as a WAL does). Prints one JSON object: per mode the operations,
 * operations per second and the p50/p99/max of one write + fdatasync in microseconds.
 * Run by scripts/bench-load (compiled into its temporary folder). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run(const char *dir, double seconds, int append, const char *name, int last) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync-rate.%d.tmp", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) { perror(path); exit(1); }
    char block[4096];
    memset(block, 'x', sizeof block);
    size_t capacity = 1 << 20, count = 0;
    double *samples = malloc(capacity * sizeof *samples);
    double start = now(), end = start + seconds;
    off_t offset = 0;
    while (now() < end && count < capacity) {
        double t = now();
        if (pwrite(fd, block, sizeof block, offset) != (ssize_t)sizeof block) { perror("pwrite"); exit(1); }
        if (fdatasync(fd) != 0) { perror("fdatasync"); exit(1); }
        samples[count++] = (now() - t) * 1e6;
        if (append) offset += sizeof block;
    }
    double wall = now() - start;
    close(fd);
    unlink(path);
    qsort(samples, count, sizeof *samples, compare);
    printf("\"%s\": {\"ops\": %zu, \"seconds\": %.3f, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}%s",
           name, count, wall, count / wall, count ? samples[count / 2] : 0.0,
           count ? samples[(size_t)((count - 1) * 0.99)] : 0.0, count ? samples[count - 1] : 0.0, last ? "" : ", ");
    free(samples);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: fsync-rate DIR SECONDS\n"); return 2; }
    double seconds = atof(argv[2]);
    printf("{\"dir\": \"%s\", ", argv[1]);
    run(argv[1], seconds, 0, "overwrite", 0);
    run(argv[1], seconds, 1, "append", 1);
    printf("}\n");
    return 0;
}
