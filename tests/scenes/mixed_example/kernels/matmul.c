/* Cube kernel: c = a @ b over one 128x128 f32 tile, args 0 (a), 1 (b),
 * 2 (c): the original's kernel_matmul (its TMATMUL accumulates in f32). */
#include "scene_kernel.h"

#define DIM 128

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, DIM, i) {
        float row[DIM];
        for (int j = 0; j < DIM; j++) row[j] = 0.0f;
        for (int k = 0; k < DIM; k++) {
            float av = a[i * DIM + k];
            for (int j = 0; j < DIM; j++) row[j] += av * b[k * DIM + j];
        }
        for (int j = 0; j < DIM; j++) c[i * DIM + j] = row[j];
    }
}
