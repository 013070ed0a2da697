/*
 * scene_host.h - host functions of a level-3 scene's [[steps]].
 *
 * A host step (`host = { c = "host.c", function = "F" }` in scene.toml) is
 * a C function the harness builds with the host toolchain and runs once, on
 * the host, between the rank group's chip steps: simpler's
 * `orch.submit_sub` with a C body instead of a Python one. It sees the
 * tensors its step declares (`reads`, `writes`) and nothing else, each
 * whole: a per-rank tensor holds every rank's slice, rank-major, as a
 * golden sees it. Only the tensors in `writes` come back to the harness;
 * changing one the step only reads fails the step.
 *
 *     #include "scene_host.h"
 *
 *     SCENE_HOST_FUNCTION(center, args) {
 *         const SceneHostTensor *f = scene_host_tensor(args, "f");
 *         SceneHostTensor *g = scene_host_tensor(args, "g");
 *         if (!f || !g) return -1;        // the harness names the missing one
 *         ...
 *         return 0;                       // anything else fails the step
 *     }
 *
 * Return 0 on success. On failure return non-zero, after
 * scene_host_fail(args, "...") to say why (the case's message quotes it).
 */
#ifndef SCENE_HOST_H
#define SCENE_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SCENE_HOST_MAX_DIMS 8

typedef struct SceneHostTensor {
    const char *name;  /* the tensor's name in scene.toml */
    const char *dtype; /* its dtype as scene.toml spells it: "f32", "bf16", "i32", ... */
    void *data;        /* row-major bytes (bf16/f16 as their bit patterns) */
    uint64_t bytes;
    uint32_t ndim;
    uint64_t shape[SCENE_HOST_MAX_DIMS];
    uint32_t writable; /* 1: the step declares it in `writes` */
} SceneHostTensor;

typedef struct SceneHostArgs {
    uint32_t nranks;   /* the case's rank group */
    uint32_t ntensors; /* the step's tensors, in signature order */
    SceneHostTensor *tensors;
} SceneHostArgs;

/* The step's tensor `name`, or NULL when the step declares no such tensor
 * (the harness then names it in the step's failure). */
SceneHostTensor *scene_host_tensor(const SceneHostArgs *args, const char *name);

/* Records why the function fails (printf-style); returns -1. */
int32_t scene_host_fail(const SceneHostArgs *args, const char *fmt, ...);

/* Defines host function `name` taking `const SceneHostArgs *args`. */
#define SCENE_HOST_FUNCTION(name, args) int32_t name(const SceneHostArgs *args)

#ifdef __cplusplus
}
#endif

#endif /* SCENE_HOST_H */
