// Matrix multiplication (AIC): out = src0 @ src1, half inputs, float
// output, one 128x128 tile (validM = validK = validN = 128, as the
// original's constexpr dimensions and Tile templates). The original's
// TMATMUL accumulates in float; so does this.
//
//   args[0] = src0 (IN, half)   args[1] = src1 (IN, half)   args[2] = out (OUT, float)
#include "../tile.hpp"

using namespace matmul_st;

constexpr int validM = 128;
constexpr int validK = 128;
constexpr int validN = 128;

template <typename In, typename Acc, int M, int K, int N>
static inline void matmul_tile(const typename In::Storage *a, const typename In::Storage *b,
                               typename Acc::Storage *out) {
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += In::load(a[m * K + k]) * In::load(b[k * N + n]);
            out[m * N + n] = Acc::store(acc);
        }
    }
}

SCENE_KERNEL_ENTRY(ka) {
    const uint16_t *src0 = tile_arg<Half, validM, validK>(ka, 0);
    const uint16_t *src1 = tile_arg<Half, validK, validN>(ka, 1);
    float *out = tile_arg<Float, validM, validN>(ka, 2);
    matmul_tile<Half, Float, validM, validK, validN>(src0, src1, out);
}
