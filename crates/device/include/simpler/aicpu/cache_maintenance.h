/*
 * aicpu/cache_maintenance.h - the original's AICPU cache maintenance, for
 * orchestrations that poll device memory a kernel writes. The simulator's
 * device memory is the host's, coherent: both are no-ops here.
 */
#ifndef SCENE_SIMPLER_AICPU_CACHE_MAINTENANCE_H
#define SCENE_SIMPLER_AICPU_CACHE_MAINTENANCE_H
#include <stddef.h>

inline void cache_invalidate_range(const void *addr, size_t size) {
    (void)addr;
    (void)size;
}
inline void cache_flush_range(const void *addr, size_t size) {
    (void)addr;
    (void)size;
}
#endif /* SCENE_SIMPLER_AICPU_CACHE_MAINTENANCE_H */
