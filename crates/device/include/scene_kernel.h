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
#define SCENE_KERNEL_ABI_VERSION 4
#define SCENE_MAX_ARGS 32

/* v4: the slots of a task on one cluster (one cube core and two vector
 * cores; the original runtime's AIC, AIV0 and AIV1): `SceneKernelArgs::slot`
 * is the kernel's, `slot_mask` has bit (1 << slot) set for every slot of
 * its task that runs a kernel. A plain task's kernel is in slot AIC (cube)
 * or AIV0 (vector), alone in its mask. */
#define SCENE_SLOT_AIC 0
#define SCENE_SLOT_AIV0 1
#define SCENE_SLOT_AIV1 2
#define SCENE_SLOTS 3
/* v4: cross-core flags of one block of a mixed task, per slot. */
#define SCENE_CLUSTER_FLAGS 16

typedef struct SceneClusterCtx SceneClusterCtx;

/* v4: what the kernels of one block of a mixed task share (NULL for a
 * plain task): cross-core flags, the original's FFTS flags
 * (`ffts_cross_core_sync` / `wait_flag_dev`). A flag is a counter per
 * (slot, flag): `signal` adds one to slot `to`'s flag, `wait` takes one
 * from the caller's own, waiting while it is zero. Every signal before a
 * wait's return is visible to the waiter (release / acquire). */
struct SceneClusterCtx {
    uint32_t slot;      /* the caller's slot, SCENE_SLOT_* */
    uint32_t slot_mask; /* the block's active slots */
    void *block;        /* the runtime's */
    /* Adds one to slot `to`'s flag `flag`. A status: SCENE_RT_E_INVALID for
     * a slot the block does not run or a flag >= SCENE_CLUSTER_FLAGS. */
    int32_t (*signal)(const SceneClusterCtx *ctx, uint32_t to, uint32_t flag);
    /* Waits until the caller's flag `flag` is > 0, then takes one. A
     * status: SCENE_RT_E_INVALID for a bad flag, or when every other
     * kernel of the block has returned and nobody can signal it any more
     * (the run fails naming the kernel and flag); SCENE_RT_E_TIMEOUT when
     * the run is abandoned at its deadline. */
    int32_t (*wait)(const SceneClusterCtx *ctx, uint32_t flag);
};

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
    /* v4: this kernel's slot in its task (SCENE_SLOT_*) and the task's
     * active slots (bit 1 << slot): more than one for a mixed task. */
    uint32_t slot;
    uint32_t slot_mask;
    /* v4: the block's cross-core flags (mixed tasks; NULL otherwise). */
    const SceneClusterCtx *cluster;
} SceneKernelArgs;

/* The kernel's slot (SCENE_SLOT_*; before v4 every kernel ran alone, in
 * slot AIC or AIV0: reported as AIV0 for want of the core type). */
static inline uint32_t scene_slot(const SceneKernelArgs *ka) {
    return ka->abi_version >= 4 ? ka->slot : SCENE_SLOT_AIV0;
}

/* The vector lane of a vector kernel among its block's vector kernels:
 * with both vector slots set, 0 in slot AIV0 and 1 in slot AIV1 (the
 * original's `get_sub_block_id(args)`); 0 for the only vector kernel of a
 * block, and for a cube kernel. */
static inline uint32_t scene_sub_block_id(const SceneKernelArgs *ka) {
    uint32_t mask = ka->abi_version >= 4 ? ka->slot_mask : 0u;
    return scene_slot(ka) == SCENE_SLOT_AIV1 && (mask & (1u << SCENE_SLOT_AIV0)) ? 1u : 0u;
}

/* How many vector kernels the task runs per block (1 or 2; 0 for a cube
 * kernel alone): a vector kernel's share is part
 * scene_sub_block_id(ka) of scene_sub_block_num(ka). */
static inline uint32_t scene_sub_block_num(const SceneKernelArgs *ka) {
    uint32_t mask = ka->abi_version >= 4 ? ka->slot_mask : (1u << SCENE_SLOT_AIV0);
    return ((mask >> SCENE_SLOT_AIV0) & 1u) + ((mask >> SCENE_SLOT_AIV1) & 1u);
}

/* The block's cross-core flags (NULL outside a mixed task, or before v4). */
static inline const SceneClusterCtx *scene_cluster_ctx(const SceneKernelArgs *ka) {
    return ka->abi_version >= 4 ? ka->cluster : (const SceneClusterCtx *)0;
}

/* Signal flag `flag` of the block's kernel in slot `to` (cross-core sync:
 * e.g. the cube kernel tells a vector kernel its tile is in memory).
 * SCENE_RT_E_INVALID outside a mixed task. */
static inline int32_t scene_cluster_signal(const SceneKernelArgs *ka, uint32_t to, uint32_t flag) {
    const SceneClusterCtx *c = scene_cluster_ctx(ka);
    return c ? c->signal(c, to, flag) : SCENE_RT_E_INVALID;
}

/* Wait for (and take) a signal of this kernel's flag `flag`.
 * SCENE_RT_E_INVALID outside a mixed task. */
static inline int32_t scene_cluster_wait(const SceneKernelArgs *ka, uint32_t flag) {
    const SceneClusterCtx *c = scene_cluster_ctx(ka);
    return c ? c->wait(c, flag) : SCENE_RT_E_INVALID;
}

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
