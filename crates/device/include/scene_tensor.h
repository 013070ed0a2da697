/*
 * scene_tensor.h - tensor metadata shared by the runtime, orchestrations and
 * kernels (ABI v2): dtype, rank, shape and strides of a tensor or of a view
 * of one. Usable from C and C++, hosted or freestanding.
 *
 * Element (i0, i1, ..., i{r-1}) of a tensor described by `d` lives at
 * element offset  d->offset + i0*d->strides[0] + ... + i{r-1}*d->strides[r-1]
 * from the start of its buffer; strides and offsets count elements, not bytes.
 */
#ifndef SCENE_TENSOR_H
#define SCENE_TENSOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SCENE_MAX_RANK 8

/* Entry points keep their C names when compiled as C++. */
#ifdef __cplusplus
#define SCENE_EXTERN_C extern "C"
#else
#define SCENE_EXTERN_C
#endif

/* Element types (the dtypes of scene.toml). */
#define SCENE_DTYPE_F32 0
#define SCENE_DTYPE_F64 1
#define SCENE_DTYPE_F16 2
#define SCENE_DTYPE_BF16 3
#define SCENE_DTYPE_I8 4
#define SCENE_DTYPE_U8 5
#define SCENE_DTYPE_I16 6
#define SCENE_DTYPE_I32 7
#define SCENE_DTYPE_I64 8
#define SCENE_DTYPE_BOOL 9
/* An untyped buffer of bytes (what a v1 task argument describes). */
#define SCENE_DTYPE_BYTES 255

typedef struct SceneTensorDesc {
    uint32_t dtype; /* SCENE_DTYPE_* */
    uint32_t rank;  /* 0 ..= SCENE_MAX_RANK */
    uint64_t offset; /* elements from the buffer start to element (0, ..., 0) */
    uint64_t shape[SCENE_MAX_RANK];
    uint64_t strides[SCENE_MAX_RANK]; /* elements */
} SceneTensorDesc;

static inline uint32_t scene_dtype_size(uint32_t dtype) {
    switch (dtype) {
    case SCENE_DTYPE_F64:
    case SCENE_DTYPE_I64:
        return 8;
    case SCENE_DTYPE_F32:
    case SCENE_DTYPE_I32:
        return 4;
    case SCENE_DTYPE_F16:
    case SCENE_DTYPE_BF16:
    case SCENE_DTYPE_I16:
        return 2;
    default:
        return 1;
    }
}

/* Number of elements. */
static inline uint64_t scene_desc_numel(const SceneTensorDesc *d) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->rank; i++) n *= d->shape[i];
    return n;
}

/* Element offset (from the buffer start) of the element at `idx[0..rank)`. */
static inline uint64_t scene_desc_offset(const SceneTensorDesc *d, const uint64_t *idx) {
    uint64_t off = d->offset;
    for (uint32_t i = 0; i < d->rank; i++) off += idx[i] * d->strides[i];
    return off;
}

/* A contiguous row-major description of `shape[0..rank)`. */
static inline SceneTensorDesc scene_desc_contiguous(uint32_t dtype, uint32_t rank,
                                                    const uint64_t *shape) {
    SceneTensorDesc d;
    uint64_t stride = 1;
    d.dtype = dtype;
    d.rank = rank;
    d.offset = 0;
    for (uint32_t i = 0; i < SCENE_MAX_RANK; i++) {
        d.shape[i] = 0;
        d.strides[i] = 0;
    }
    for (uint32_t i = rank; i-- > 0;) {
        d.shape[i] = shape[i];
        d.strides[i] = stride;
        stride *= shape[i];
    }
    return d;
}

/* A view of `d`: element (offsets[0], ..., offsets[rank-1]) becomes element
 * (0, ..., 0), and the view has `shape` (same rank, same strides). */
static inline SceneTensorDesc scene_desc_view(const SceneTensorDesc *d, const uint64_t *offsets,
                                              const uint64_t *shape) {
    SceneTensorDesc v = *d;
    v.offset = scene_desc_offset(d, offsets);
    for (uint32_t i = 0; i < d->rank; i++) v.shape[i] = shape[i];
    return v;
}

#ifdef __cplusplus
}
#endif

#endif /* SCENE_TENSOR_H */
