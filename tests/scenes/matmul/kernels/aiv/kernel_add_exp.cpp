// Element-wise add then exp (AIV): out[i] = exp(src0[i] + src1[i]), float
// in and out, one 128x128 tile (the original: TADD then TEXP).
//
//   args[0] = src0 (IN, float)   args[1] = src1 (IN, float)   args[2] = out (OUT, float)
#include "../tile.hpp"

using namespace matmul_st;

template <typename T, int Rows, int Cols>
static inline void add_exp_tile(const typename T::Storage *x, const typename T::Storage *y,
                                typename T::Storage *dst) {
    for (int i = 0; i < Rows * Cols; i++) {
        float sum = T::load(x[i]) + T::load(y[i]);  // TADD
        dst[i] = T::store(scene_expf(sum));         // TEXP
    }
}

SCENE_KERNEL_ENTRY(ka) {
    const float *src0 = tile_arg<Float>(ka, 0);
    const float *src1 = tile_arg<Float>(ka, 1);
    float *out = tile_arg<Float>(ka, 2);
    add_exp_tile<Float, kRows, kCols>(src0, src1, out);
}
