// Element-wise log then sqrt (AIV): out[i] = sqrt(log(src[i])), half in and
// out (the matmul's input). The original: TLOAD, TLOG into a half tile,
// TSQRT, TSTORE; here the log is rounded to half too, as its tmp tile.
//
//   args[0] = src (IN, half)   args[1] = out (OUT, half)
#include "../tile.hpp"

using namespace matmul_st;

template <typename T, int Rows, int Cols>
static inline void log_sqrt_tile(const typename T::Storage *src, typename T::Storage *dst) {
    for (int r = 0; r < Rows; r++) {
        for (int c = 0; c < Cols; c++) {
            int i = r * Cols + c;
            float tmp = T::load(T::store(scene_logf(T::load(src[i]))));  // TLOG
            dst[i] = T::store(scene_sqrtf(tmp));                          // TSQRT
        }
    }
}

SCENE_KERNEL_ENTRY(ka) {
    const uint16_t *src = tile_arg<Half>(ka, 0);
    uint16_t *out = tile_arg<Half>(ka, 1);
    log_sqrt_tile<Half, kRows, kCols>(src, out);
}
