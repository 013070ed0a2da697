/*
 * scene_abi.h - the conventions every scene header follows, and the status
 * codes they share. Included by scene_runtime.h, scene_orch.h and
 * scene_comm.h (so by scene_kernel.h); usable from C and C++, hosted or
 * freestanding. The Rust mirror is the `scene-abi` crate; the
 * `abi_headers` test of `scene-device` keeps the two equal.
 *
 * C ABI conventions
 *
 * Failure reporting. Every call that can fail returns an int32_t status:
 * SCENE_RT_OK (0) on success, a negative SCENE_RT_E_* code on failure.
 * That holds for the runtime (scene_rt_*), for the orchestration's
 * services (scene_orch_*, SceneOrchOps) and for the communication calls
 * of kernels (scene_comm_signal, scene_comm_wait*, scene_comm_barrier).
 * A call that produces a value writes it through an out-parameter
 * (scene_rt_malloc, scene_orch_malloc); no call reports failure in-band
 * (an address of 0, -1, "non-zero"). Callers test `!= SCENE_RT_OK`.
 * Not calls, and so without a status: queries that cannot fail and say
 * "none" with NULL or 0 (scene_rt_abi_version, scene_rt_last_error,
 * scene_orch_desc, scene_arg_desc, scene_comm_ctx, scene_comm_peer_ptr),
 * and scene_orch_fail, which reports.
 *
 * Last error. After a failed call the text of the failure is kept per
 * thread until the next failure on that thread: scene_rt_last_error() for
 * the harness's calls, scene_orch_last_error(ctx) in an orchestration (the
 * same text, reached through the context: orchestrations have no
 * undefined symbols). A kernel has nothing to print with: a failed comm
 * call fails the run, and its message is the run's error
 * (scene_rt_last_error() after scene_rt_run).
 *
 * Version policy. Three interfaces are versioned, each by one integer:
 * the runtime (SCENE_RUNTIME_ABI_VERSION, scene_rt_abi_version()), the
 * orchestration's services (SCENE_ORCH_ABI_VERSION, SceneOrchOps::
 * abi_version) and the kernel arguments (SCENE_KERNEL_ABI_VERSION,
 * SceneKernelArgs::abi_version). The number grows by one with every
 * change, and every change only adds: a new function, a new op at the end
 * of SceneOrchOps, a new field at the end of a struct the runtime fills
 * (SceneOrchOps, SceneKernelArgs, SceneCommCtx), a new constant or status.
 * Nothing is removed, reordered, resized or given another meaning; a
 * struct the caller fills (SceneRunArg, SceneTaskArgV2, SceneTensorDesc,
 * SceneCallableDesc) keeps its layout, and a new layout is a new struct
 * passed to a new call (scene_rt_run2, submit_v2). So there is one rule
 * for every user of an interface: check `version >= N` before using what
 * version N added, never `version == N`; an implementation newer than the
 * headers one was built with serves it unchanged. The orchestration
 * helpers check per feature (scene_orch_has_v2, scene_orch_has_v3) and
 * fall back or return SCENE_RT_E_ABI; kernels do the same
 * (scene_arg_desc, scene_comm_ctx); the harness uses all of runtime
 * version SCENE_RUNTIME_ABI_VERSION, so it refuses a runtime that reports
 * less at load and accepts any newer one.
 *
 * Reserved fields are padding: written 0, never read, never carrying
 * state. Data has a named field.
 *
 * Deprecation. An API that is superseded stays, works as documented, and
 * is marked "Deprecated: use X" in its comment and with SCENE_DEPRECATED.
 * Scenes compile without warnings by default; define SCENE_WARN_DEPRECATED
 * (-DSCENE_WARN_DEPRECATED) to have the compiler name every use.
 */
#ifndef SCENE_ABI_H
#define SCENE_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
#define SCENE_RT_OK 0
#define SCENE_RT_E_INVALID -1        /* bad argument, null pointer, bad handle */
#define SCENE_RT_E_ABI -2            /* the implementation's version lacks the call */
#define SCENE_RT_E_NO_DEVICE -3      /* no such device id / device not open */
#define SCENE_RT_E_OOM -4            /* device memory exhausted */
#define SCENE_RT_E_OUT_OF_BOUNDS -5  /* copy or access outside an allocation or view */
#define SCENE_RT_E_FUNC_ID -6        /* task names a func_id not registered */
#define SCENE_RT_E_CORE_TYPE -7      /* core type the platform lacks */
#define SCENE_RT_E_LOAD -8           /* orchestration / image could not be loaded */
#define SCENE_RT_E_ORCH -9           /* orchestration returned an error */
#define SCENE_RT_E_TIMEOUT -10       /* run exceeded its deadline */
#define SCENE_RT_E_COMM -11          /* a rank of the group failed or a wait timed out */
#define SCENE_RT_E_DEVICE_FATAL -100 /* device unusable: retire the card */

/* Marks a superseded API (see "Deprecation" above). */
#if defined(SCENE_WARN_DEPRECATED) && (defined(__GNUC__) || defined(__clang__))
#define SCENE_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define SCENE_DEPRECATED(msg)
#endif

#ifdef __cplusplus
}
#endif

#endif /* SCENE_ABI_H */
