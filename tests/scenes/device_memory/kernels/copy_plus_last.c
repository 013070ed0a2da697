/* y = x + pad[len - 1]: reads the far end of the big buffer, so a device
 * that did not really hold it would fault, not pass. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const uint8_t *pad = SCENE_ARG_PTR(ka, 0, const uint8_t);
    uint64_t pad_len = SCENE_ARG_LEN(ka, 0, uint8_t);
    const float *x = SCENE_ARG_PTR(ka, 1, const float);
    float *y = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    float last = (float)pad[pad_len - 1];
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { y[i] = x[i] + last; }
}
