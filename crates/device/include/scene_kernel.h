/*
 * scene_kernel.h - what an incore kernel author writes against.
 *
 * An incore kernel is compiled freestanding and position-independent, linked
 * so that `kernel_entry` is the first byte of a single `.text` image, and
 * entered by the device at offset 0 once per block:
 *
 *     #include "scene_kernel.h"
 *     SCENE_KERNEL_ENTRY(ka) {
 *         float *x = SCENE_ARG_PTR(ka, 0, float);
 *         uint64_t n = SCENE_ARG_LEN(ka, 0, float);
 *         SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] += 1.0f; }
 *     }
 *
 * Rules (checked when the image is extracted): no libc, no writable globals,
 * no absolute addresses (no tables of pointers), no calls outside the image.
 * memcpy/memset/memmove and f16 conversion helpers are linked into the image
 * by the toolchain; bf16 helpers are the inline functions below; float math
 * (exp, log, sqrt, rsqrt, tanh, sigmoid, silu, gelu, erf, pow, fabs,
 * fmin/fmax, floor/ceil) is scene_math.h, included here.
 *
 * Conventions (failure statuses, version checks, deprecation): scene_abi.h.
 * Check `ka->abi_version >= N` before using what version N added; the
 * accessors below (scene_arg_desc, SCENE_ARG_DIM, SCENE_AT*, scene_comm_ctx)
 * already do.
 */
#ifndef SCENE_KERNEL_H
#define SCENE_KERNEL_H

#include <stdint.h>
#include <stddef.h>
#include "scene_abi.h"
#include "scene_tensor.h"
#include "scene_math.h" /* scene_expf, scene_logf, scene_sqrtf, ...: no libm */
#include "scene_comm.h" /* level 3: SceneCommCtx and scene_comm_* */

#ifdef __cplusplus
extern "C" {
#endif

/* Version of SceneKernelArgs; it only grows, by additions (scene_abi.h). */
#define SCENE_KERNEL_ABI_VERSION 3
#define SCENE_MAX_ARGS 32

/* Passed by the runtime to every block invocation. */
typedef struct SceneKernelArgs {
    uint32_t abi_version;
    uint32_t block_idx;  /* 0 <= block_idx < block_num */
    uint32_t block_num;
    uint32_t num_args;
    uint64_t args[SCENE_MAX_ARGS];      /* host-visible pointers or scalar bits */
    uint64_t arg_sizes[SCENE_MAX_ARGS]; /* bytes for buffers, 0 for scalars */
    /* v2: each argument's view, `descs[i].offset == 0`: `args[i]` already
     * points at the view's element (0, ...). Arguments submitted through
     * the v1 `submit` are rank-1 SCENE_DTYPE_BYTES views of their bytes. */
    const SceneTensorDesc *descs;
    /* v3: the communication context of a level-3 run (NULL otherwise). */
    const SceneCommCtx *comm;
} SceneKernelArgs;

/* The communication context (v3 runtimes, level-3 runs; NULL otherwise). */
static inline const SceneCommCtx *scene_comm_ctx(const SceneKernelArgs *ka) {
    return ka->abi_version >= 3 ? ka->comm : (const SceneCommCtx *)0;
}

/* The view of argument i (v2 runtimes; NULL from a v1 runtime, or for
 * i >= num_args). */
static inline const SceneTensorDesc *scene_arg_desc(const SceneKernelArgs *ka, uint32_t i) {
    return ka->abi_version >= 2 && ka->descs && i < ka->num_args && i < SCENE_MAX_ARGS
               ? &ka->descs[i]
               : (const SceneTensorDesc *)0;
}

/* Extent and stride (elements) of dimension d of argument i's view,
 * checked as scene_arg_desc checks: 0 for a dimension the view does not
 * have, or an argument that does not exist. Without a view (a v1
 * runtime) argument i is what v1 submits describe, a rank-1 view of its
 * arg_sizes[i] bytes. */
static inline uint64_t scene_arg_dim(const SceneKernelArgs *ka, uint32_t i, uint32_t d) {
    const SceneTensorDesc *v = scene_arg_desc(ka, i);
    if (v) return d < v->rank && d < SCENE_MAX_RANK ? v->shape[d] : 0;
    return d == 0 && i < ka->num_args && i < SCENE_MAX_ARGS ? ka->arg_sizes[i] : 0;
}
static inline uint64_t scene_arg_stride(const SceneKernelArgs *ka, uint32_t i, uint32_t d) {
    const SceneTensorDesc *v = scene_arg_desc(ka, i);
    if (v) return d < v->rank && d < SCENE_MAX_RANK ? v->strides[d] : 0;
    return d == 0 && i < ka->num_args && i < SCENE_MAX_ARGS ? 1 : 0;
}
#define SCENE_ARG_DIM(ka, i, d) scene_arg_dim((ka), (i), (d))
#define SCENE_ARG_STRIDE(ka, i, d) scene_arg_stride((ka), (i), (d))
/* Pointers to elements of argument i's view (strides in elements; a
 * dimension the view lacks has stride 0, so its index is ignored). */
#define SCENE_AT1(ka, i, T, a) (SCENE_ARG_PTR(ka, i, T) + (a) * SCENE_ARG_STRIDE(ka, i, 0))
#define SCENE_AT2(ka, i, T, a, b) \
    (SCENE_AT1(ka, i, T, a) + (b) * SCENE_ARG_STRIDE(ka, i, 1))
#define SCENE_AT3(ka, i, T, a, b, c) \
    (SCENE_AT2(ka, i, T, a, b) + (c) * SCENE_ARG_STRIDE(ka, i, 2))
#define SCENE_AT4(ka, i, T, a, b, c, d) \
    (SCENE_AT3(ka, i, T, a, b, c) + (d) * SCENE_ARG_STRIDE(ka, i, 3))

#if defined(__APPLE__)
/* Mach-O section names are "segment,section": the entry stays in the one
 * code section, and the link's order file (`_kernel_entry` first) puts it
 * at offset 0 of __TEXT,__text. */
#define SCENE_KERNEL_ENTRY(ka)                                               \
    SCENE_EXTERN_C __attribute__((section("__TEXT,__text"), used, visibility("default"))) \
    void kernel_entry(const SceneKernelArgs *ka)
#else
/* ELF: its own input section, placed first by the link script. */
#define SCENE_KERNEL_ENTRY(ka)                                                  \
    SCENE_EXTERN_C __attribute__((section(".text.kernel_entry"), used, visibility("default"))) \
    void kernel_entry(const SceneKernelArgs *ka)
#endif

#define SCENE_ARG_PTR(ka, i, T) ((T *)(uintptr_t)(ka)->args[(i)])
#define SCENE_ARG_LEN(ka, i, T) ((ka)->arg_sizes[(i)] / sizeof(T))
#define SCENE_ARG_U64(ka, i) ((ka)->args[(i)])
#define SCENE_ARG_I64(ka, i) ((int64_t)(ka)->args[(i)])

static inline float scene_arg_f32(const SceneKernelArgs *ka, uint32_t i) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)ka->args[i];
    return v.f;
}

/* Contiguous share of [0, n) for this block: [*begin, *end). */
static inline void scene_block_range(const SceneKernelArgs *ka, uint64_t n,
                                     uint64_t *begin, uint64_t *end) {
    uint64_t bn = ka->block_num ? ka->block_num : 1;
    uint64_t chunk = (n + bn - 1) / bn;
    uint64_t b = (uint64_t)ka->block_idx * chunk;
    uint64_t e = b + chunk;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}

#define SCENE_FOR_BLOCK_RANGE(ka, n, i)                                  \
    for (uint64_t i##_b_, i##_e_, i##_once_ = (scene_block_range((ka), (n), \
             &i##_b_, &i##_e_), 1); i##_once_; i##_once_ = 0)            \
        for (uint64_t i = i##_b_; i < i##_e_; ++i)

/* bf16 <-> f32, round-to-nearest-even, NaN kept quiet. */
static inline float scene_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
static inline uint16_t scene_f32_to_bf16(float f) {
    union { uint32_t u; float f; } v;
    v.f = f;
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + rounding) >> 16);
}

/* f16 <-> f32 through the compiler's _Float16 (helpers linked into the image). */
#if defined(__FLT16_MAX__)
typedef _Float16 scene_f16;
static inline float scene_f16_to_f32(uint16_t h) {
    union { uint16_t u; _Float16 f; } v;
    v.u = h;
    return (float)v.f;
}
static inline uint16_t scene_f32_to_f16(float f) {
    union { uint16_t u; _Float16 f; } v;
    v.f = (_Float16)f;
    return v.u;
}
#else
/* Compilers without _Float16 on this target (clang before 15 on x86-64):
 * the same conversions on bits, round to nearest even, no helper calls. */
static inline float scene_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    union { uint32_t u; float f; } v;
    if (exp == 0x1fu) {
        v.u = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u);
    } else if (exp == 0) {
        v.f = (float)man * 5.9604644775390625e-08f; /* man * 2^-24, exact */
        v.u |= sign;
    } else {
        v.u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return v.f;
}
static inline uint16_t scene_f32_to_f16(float f) {
    union { uint32_t u; float f; } v;
    v.f = f;
    uint32_t sign = (v.u >> 16) & 0x8000u, abs = v.u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (abs < 0x38800000u) { /* subnormal or zero half: scale and round */
        union { uint32_t u; float f; } a;
        a.u = abs;
        float scaled = a.f * 16777216.0f; /* units of 2^-24 */
        uint32_t q = (uint32_t)scaled;
        float rem = scaled - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* SCENE_KERNEL_H */
