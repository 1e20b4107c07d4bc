#ifndef C_NOTED_SYSTEM_H
#define C_NOTED_SYSTEM_H

#include <stddef.h>

/// Pages of their own for one zlib stream's allocations, handed back to the system as a whole
/// when the stream ends: a stream's memory freed to the C allocator stays in the process, in
/// pieces between other allocations (docs/benchmarks.md, "Idle connections with
/// permessage-deflate").
///
/// zlib asks for all of a stream's memory through `zalloc` (a compressor when it starts, a
/// decompressor when it starts and for its window on first use); each request is carved from
/// the zone, and one that does not fit goes to malloc instead.
typedef struct noted_zone {
    char *base;
    size_t size;
    size_t used;
} noted_zone;

/// Maps at least `size` bytes (whole pages) for `zone`; 0 on success, -1 if the system refused
/// (every request then goes to malloc).
int noted_zone_open(noted_zone *zone, size_t size);

/// Unmaps the zone's pages; the stream using it must have ended.
void noted_zone_close(noted_zone *zone);

/// zlib's `alloc_func` and `free_func`, with the zone as `opaque`.
void *noted_zone_alloc(void *zone, unsigned int items, unsigned int size);
void noted_zone_free(void *zone, void *address);

#endif
