#include "CNotedSystem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int noted_zone_open(noted_zone *zone, size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = (size + page - 1) / page * page;
    void *base = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        zone->base = NULL;
        zone->size = 0;
        zone->used = 0;
        return -1;
    }
    zone->base = base;
    zone->size = rounded;
    zone->used = 0;
    return 0;
}

void noted_zone_close(noted_zone *zone) {
    if (zone->base != NULL) {
        munmap(zone->base, zone->size);
    }
    zone->base = NULL;
    zone->size = 0;
    zone->used = 0;
}

void *noted_zone_alloc(void *opaque, unsigned int items, unsigned int size) {
    noted_zone *zone = opaque;
    size_t bytes = (size_t)items * (size_t)size;
    // 16-byte alignment, as malloc gives.
    size_t needed = (bytes + 15) & ~(size_t)15;
    if (zone->base != NULL && needed <= zone->size - zone->used) {
        void *address = zone->base + zone->used;
        zone->used += needed;
        return address;
    }
    return malloc(bytes);
}

void noted_zone_free(void *opaque, void *address) {
    noted_zone *zone = opaque;
    char *p = address;
    if (zone->base != NULL && p >= zone->base && p < zone->base + zone->size) {
        return; // the zone's pages go together when it closes
    }
    free(address);
}
