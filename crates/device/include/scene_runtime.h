/*
 * scene_runtime.h - the versioned C ABI between the scenes harness and a
 * device runtime (the simulator `libscene_sim_runtime.so`, or a vendor
 * runtime wrapped to this ABI).
 *
 * Conventions: scene_abi.h (failure reporting, last error, version policy,
 * deprecation), in short:
 *  - Every function returns an int32_t status: SCENE_RT_OK or a negative
 *    SCENE_RT_E_*; values come back through out-parameters. After an
 *    error, scene_rt_last_error() returns a NUL-terminated message for the
 *    calling thread, valid until the next call on that thread. The two
 *    queries scene_rt_abi_version and scene_rt_last_error cannot fail.
 *  - Device memory is addressed by opaque 64-bit device addresses returned by
 *    scene_rt_malloc. They are not host pointers.
 *  - A status <= SCENE_RT_E_DEVICE_FATAL means the device is unusable for the
 *    rest of the process: the caller must close it and retire the card.
 *  - The harness checks scene_rt_abi_version() >= SCENE_RUNTIME_ABI_VERSION
 *    before calling anything else (scene_abi.h, "Version policy").
 */
#ifndef SCENE_RUNTIME_H
#define SCENE_RUNTIME_H

#include <stdint.h>
#include "scene_abi.h"
#include "scene_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this interface; it only grows, by additions (scene_abi.h). */
#define SCENE_RUNTIME_ABI_VERSION 2

/* Core types. */
#define SCENE_CORE_AIC 0 /* cube core */
#define SCENE_CORE_AIV 1 /* vector core */

/* Argument directions for a run. */
#define SCENE_DIR_IN 0
#define SCENE_DIR_OUT 1
#define SCENE_DIR_INOUT 2
#define SCENE_DIR_SCALAR 3

/* Exclusive upper bound of a func_id. */
#define SCENE_MAX_FUNC_IDS 64

typedef struct SceneDevice SceneDevice;

/* One incore kernel: the raw .text image, entered at offset 0. */
typedef struct SceneIncoreDesc {
    uint32_t func_id;      /* 0 <= func_id < SCENE_MAX_FUNC_IDS */
    uint32_t core_type;    /* SCENE_CORE_AIC or SCENE_CORE_AIV */
    const uint8_t *image;  /* position-independent machine code */
    uint64_t image_len;
} SceneIncoreDesc;

/* A callable: one orchestration shared object plus its incore images. */
typedef struct SceneCallableDesc {
    const uint8_t *orch_so;   /* bytes of the orchestration shared object */
    uint64_t orch_so_len;
    const char *orch_symbol;  /* NUL-terminated entry symbol name */
    const SceneIncoreDesc *incores;
    uint32_t num_incores;
} SceneCallableDesc;

/* Optional (issue 29: hosted C++ incores). Kinds of incore kernel
 * (SceneIncoreDesc2::kind). */
#define SCENE_INCORE_IMAGE 0  /* raw position-independent .text image, entered at
                                 offset 0 (what SceneIncoreDesc describes) */
#define SCENE_INCORE_HOSTED 1 /* the bytes of an ELF shared object built for the
                                 host: the runtime loads it (dlopen) and calls
                                 its entry symbol once per block */

/* Argument conventions of a hosted kernel's entry
 * (SceneIncoreDesc2::args_convention; image kernels: SCENE_KERNEL_ARGS_SCENE). */
#define SCENE_KERNEL_ARGS_SCENE 0       /* void entry(const SceneKernelArgs *), as
                                           an image kernel (scene_kernel.h) */
#define SCENE_KERNEL_ARGS_CHIP_TENSOR 1 /* void kernel_entry(int64_t *args) of the
                                           original project (hosted kernels only; a
                                           runtime may refuse it with
                                           SCENE_RT_E_INVALID) */
/*
 * SCENE_KERNEL_ARGS_CHIP_TENSOR: `args[i]`, for each task argument i in
 * order, is a scalar's 64-bit value, or for a tensor the address of a
 * 128-byte, 64-aligned tensor record. The records follow the original's
 * published layout (hw-native-sys/simpler, src/common/task_interface/
 * tensor.h, `struct alignas(64) ChipTensor`, and its static_asserts):
 *
 *   @0   uint64_t buffer.addr        host address of the data
 *   @8   uint64_t buffer.size        bytes
 *   @16  uint64_t owner_task_id      PTO2TaskId; UINT64_MAX (invalid): none
 *   @24  uint64_t start_offset       ELEMENT offset of the view origin
 *   @32  int32_t  version            0
 *   @36  uint32_t ndims              1..5
 *   @40  uint8_t  dtype              DataType: 0 FLOAT32, 1 FLOAT16, 2 INT32,
 *                                    3 INT16, 4 INT8, 5 UINT8, 6 BFLOAT16,
 *                                    7 INT64, 8 UINT64, 9 UINT16, 10 UINT32,
 *                                    11 BOOL
 *   @41  bool     manual_dep         false
 *   @42  bool     is_contiguous      strides are row-major of shapes
 *   @43  uint8_t  address_space      AddressSpace: 0 HOST
 *   @44  uint32_t shapes[5]          elements per dimension
 *   @64  uint64_t extent_elem_cache  1 + sum((shapes[i] - 1) * strides[i])
 *   @72  uint32_t strides[5]         element strides, > 0
 *   @92  36 reserved bytes, 0
 *
 * The simulator fills them from what the `scene` convention hands a
 * kernel: buffer.addr = the view's origin (so start_offset is 0),
 * buffer.size = the bytes the view spans, dtype / ndims / shapes / strides
 * from the task argument's SceneTensorDesc (a v1 argument: UINT8, one
 * dimension of its bytes); SCENE_DTYPE_F64, more than 5 dimensions, sizes
 * beyond 32 bits and a stride 0 in a dimension of several elements fail
 * the submit with SCENE_RT_E_INVALID. Records and the array live while the
 * task's blocks run; each block gets its own copy of the array, the
 * records are shared: read them only. The block index is not an argument:
 * such kernels ask pto_cpu_sim_get_execution_context (see
 * scene_rt_register_callable2).
 */

/* One incore kernel, image or hosted (scene_rt_register_callable2). */
typedef struct SceneIncoreDesc2 {
    uint32_t func_id;         /* 0 <= func_id < SCENE_MAX_FUNC_IDS */
    uint32_t core_type;       /* SCENE_CORE_AIC or SCENE_CORE_AIV */
    uint32_t kind;            /* SCENE_INCORE_IMAGE or SCENE_INCORE_HOSTED */
    uint32_t args_convention; /* SCENE_KERNEL_ARGS_*; 0 for images */
    const uint8_t *image;     /* image: machine code; hosted: shared-object bytes */
    uint64_t image_len;
    const char *symbol;       /* hosted: entry symbol, NULL = "kernel_entry";
                                 images: NULL (ignored) */
    uint64_t reserved[4];     /* 0 (padding) */
} SceneIncoreDesc2;

/* A callable whose incores may be hosted (scene_rt_register_callable2). */
typedef struct SceneCallableDesc2 {
    const uint8_t *orch_so;   /* bytes of the orchestration shared object */
    uint64_t orch_so_len;
    const char *orch_symbol;  /* NUL-terminated entry symbol name */
    const SceneIncoreDesc2 *incores;
    uint32_t num_incores;
} SceneCallableDesc2;

/* One argument of a run, in orchestration-signature order. */
typedef struct SceneRunArg {
    uint32_t direction;  /* SCENE_DIR_* */
    uint32_t reserved;   /* 0 (padding) */
    uint64_t value;      /* device address for tensors, raw bits for scalars */
    uint64_t size;       /* size in bytes for tensors, 0 for scalars */
} SceneRunArg;

/* ABI version implemented by the library (a query: cannot fail). */
int32_t scene_rt_abi_version(void);

/*
 * Open device `device_id`. `options` is a NUL-terminated `key=value;...`
 * string (may be NULL or empty). Keys understood by the simulator:
 *   platform=a2a3sim|a5sim, aic=<cores>, aiv=<cores>, arena_mb=<MiB>,
 *   timeout_ms=<run deadline>, open_ms=<ms>, close_ms=<ms>,
 *   fault=<test-only fault injection>.
 * Simulator defaults: platform=a2a3sim, aic=2, aiv=2 (0 = the platform lacks
 * that core type), arena_mb=256, timeout_ms=0 (no deadline), open_ms=0 and
 * close_ms=0 (scene_rt_open / scene_rt_close take that much longer, as a
 * real runtime's start-up and tear-down do; at most 600000). Faults
 * (comma-separated): fatal_on_run:K (the K-th run returns
 * SCENE_RT_E_DEVICE_FATAL), hang (runs end only by timeout_ms), none;
 * fault_device=<id> limits the faults to that device id.
 * Unknown keys fail with SCENE_RT_E_INVALID. After SCENE_RT_E_TIMEOUT the
 * simulator also treats the device as fatal (a hung kernel cannot be stopped).
 */
int32_t scene_rt_open(int32_t device_id, const char *options, SceneDevice **out);
int32_t scene_rt_close(SceneDevice *dev);

int32_t scene_rt_malloc(SceneDevice *dev, uint64_t size, uint64_t *out_addr);
int32_t scene_rt_free(SceneDevice *dev, uint64_t addr);
int32_t scene_rt_copy_to_device(SceneDevice *dev, uint64_t dst, const void *src, uint64_t size);
int32_t scene_rt_copy_from_device(SceneDevice *dev, void *dst, uint64_t src, uint64_t size);

int32_t scene_rt_register_callable(SceneDevice *dev, const SceneCallableDesc *desc, uint32_t *out_handle);
int32_t scene_rt_unregister_callable(SceneDevice *dev, uint32_t handle);
int32_t scene_rt_run(SceneDevice *dev, uint32_t handle, const SceneRunArg *args, uint32_t num_args);
/* ABI v2: as scene_rt_run, with each argument's metadata (`descs[i]`, one
 * per argument, ignored for scalars; what scene_orch_desc() returns to the
 * orchestration). `descs` may be NULL: then tensors are byte buffers. */
int32_t scene_rt_run2(SceneDevice *dev, uint32_t handle, const SceneRunArg *args,
                      const SceneTensorDesc *descs, uint32_t num_args);

/* Optional (level 3, multi-card scenes). Creates a communication domain
 * over `nranks` open devices, rank r on `devs[r]`: a zeroed window of
 * `window_size` bytes and SCENE_COMM_SIGNAL_SLOTS zeroed signal slots per
 * rank (scene_comm.h). From now until scene_rt_comm_destroy, the kernels
 * of a run on `devs[r]` get the rank's SceneCommCtx in
 * SceneKernelArgs::comm; the caller runs the ranks concurrently, one
 * thread each. If one rank's run fails, or a wait times out, the waits of
 * every rank return at once and every rank's run fails with
 * SCENE_RT_E_COMM and the group's first message ("rank 1 waited for rank
 * 0 signal 3 for 30 s"). `options`: `timeout_ms=<wait bound>` (default
 * 30000). A runtime without these symbols cannot run level-3 scenes. */
typedef struct SceneCommDomain SceneCommDomain;
int32_t scene_rt_comm_create(SceneDevice *const *devs, uint32_t nranks, uint64_t window_size,
                             const char *options, SceneCommDomain **out);
int32_t scene_rt_comm_destroy(SceneCommDomain *comm);

/* Optional (level 3: the window as a tensor). As scene_rt_comm_create, but
 * rank r's window may be memory of its own device: `window_addrs[r]` is a
 * device address on `devs[r]` such that [addr, addr + window_size) lies in
 * one live allocation (say a run argument of the rank's next run), else
 * the call fails naming the rank. The window is then that memory, not
 * zeroed (its contents are what the caller put there), and the
 * allocation cannot be freed until scene_rt_comm_destroy; kernels see it
 * at SceneCommCtx::windows[r] as usual, so a pointer a kernel gets into a
 * view of that tensor has the same scene_comm_offset in every rank's
 * window. `window_addrs` NULL: heap windows, exactly scene_rt_comm_create.
 * Destroyed with scene_rt_comm_destroy. */
int32_t scene_rt_comm_create2(SceneDevice *const *devs, uint32_t nranks, uint64_t window_size,
                              const uint64_t *window_addrs, const char *options,
                              SceneCommDomain **out);

/* Optional (issue 19: traces and dependency graphs). Records what the
 * next runs on `dev` do: `flags` is a set of SCENE_RT_TRACE_* bits (0 =
 * off, the default: no clock is read and nothing is kept). Each run
 * replaces the record of the one before. TIMELINE: every task (func_id,
 * block_num, its arguments' direction, dtype and shape) and every block
 * (which core lane, start, end), the orchestration's operations (submit,
 * read, write, fill, alloc, free, scopes, and the waits they caused);
 * timestamps are CLOCK_MONOTONIC nanoseconds, so another process can
 * place them. DEPS: every task's accesses and the complete list of
 * earlier accesses it conflicts with (RAW, WAR, WAW, byte range, and
 * whether that task was still pending when this one was submitted). */
#define SCENE_RT_TRACE_TIMELINE 1
#define SCENE_RT_TRACE_DEPS 2
int32_t scene_rt_trace_enable(SceneDevice *dev, uint32_t flags);
/* The record of the last traced run as JSON text (UTF-8, no NUL). Sets
 * `*len` to its length; copies it into `buf` and forgets it only when
 * `cap >= *len` (call with cap 0 first to size the buffer). No record: OK
 * with `*len = 0`. */
int32_t scene_rt_trace_take(SceneDevice *dev, char *buf, uint64_t cap, uint64_t *len);

/* Message of the last error on this thread ("" if none). Never NULL. */
const char *scene_rt_last_error(void);

/* Optional. Called by the harness's device worker (a process that exists
 * to run one device session) before scene_rt_open: from now on, a fatal
 * signal raised while user code runs, or exit() called by user code, is
 * described in the file at `path` as key=value lines (signal=, who=kernel|
 * orchestration|runtime, func_id=, core=, block=, blocks=, address=,
 * fault=, arg=, exit=called) before the process ends. A runtime without
 * this symbol still works; crashes are then reported by exit status only. */
int32_t scene_rt_crash_report(const char *path);

/* Optional (`--dump-args`, issue 19). Every later run of `dev` records each
 * task's arguments into the directory `dir` (created if missing; the
 * previous run's `task*` files in it are removed first): per task N (its
 * 0-based submit index in the run) `taskN.json` (func_id, core, block_num,
 * each argument's direction, SceneTensorDesc, buffer and span bytes, and
 * for scalars the bits), `taskN.arg<i>.in.bin` (the bytes of each tensor
 * argument's bounding span just before the task's first block) and
 * `taskN.arg<i>.out.bin` (out/inout spans after its last block). `dir`
 * NULL stops recording. A runtime without this symbol cannot dump task
 * arguments. */
int32_t scene_rt_args_record(SceneDevice *dev, const char *dir);

/* Optional (issue 28: one device worker serves many cases). Returns the
 * open device `dev` to the state scene_rt_open left it in, without closing
 * it: every registered callable is unregistered (the orchestration shared
 * objects they held are released, so one registered again starts with
 * fresh globals; handles from before the reset are unknown after it),
 * every allocation is freed (its memory reads as zero when allocated
 * again), the trace flags and the pending trace record are cleared,
 * scene_rt_args_record recording stops, and per-session counters start
 * again (the simulator's fault=fatal_on_run:K / corrupt_on_run:K count
 * runs since open or the last reset). The options given to scene_rt_open
 * stay. A device that is a rank of a live communication domain is refused
 * with SCENE_RT_E_INVALID (destroy the domain first); after a fatal error
 * it returns SCENE_RT_E_DEVICE_FATAL like every other call. Must not be
 * called while a run is in progress on `dev` (the simulator waits for the
 * run). A runtime without this symbol still works: the harness then closes
 * and reopens the device between cases. */
int32_t scene_rt_reset(SceneDevice *dev);

/* Optional (issue 29: hosted C++20 incores). As scene_rt_register_callable,
 * with SceneIncoreDesc2 incores, each SCENE_INCORE_IMAGE (treated exactly
 * as by scene_rt_register_callable) or SCENE_INCORE_HOSTED: the bytes of a
 * host shared object (built -shared -fPIC, linked against the host's C++
 * runtime as it likes). The runtime loads it once per content (identical
 * bytes share one loaded copy while any callable uses them; after every
 * callable holding it is unregistered, or scene_rt_reset, a new
 * registration starts with fresh globals), resolves `symbol` (NULL =
 * "kernel_entry"; missing: SCENE_RT_E_LOAD naming func_id and symbol) and
 * calls it once per block with the task's SceneKernelArgs, on the same
 * emulated core threads, with the same checks and crash reports as image
 * kernels. `args_convention` SCENE_KERNEL_ARGS_SCENE is the entry of
 * scene_kernel.h; SCENE_KERNEL_ARGS_CHIP_TENSOR (hosted kernels only) takes
 * the records described above, and may be refused with SCENE_RT_E_INVALID
 * by a runtime without it. Unknown kinds or conventions:
 * SCENE_RT_E_INVALID. A runtime without this symbol runs image kernels
 * only (scene_rt_register_callable).
 *
 * Hooks (the simulator): before it loads the first hosted kernel, the
 * simulator runtime adds itself to the process's global symbol scope, so
 * that a kernel's dlsym(RTLD_DEFAULT, ...) finds what PTO-ISA's CPU
 * backend asks for:
 *   void pto_cpu_sim_get_execution_context(uint32_t *block_idx,
 *                                          uint32_t *subblock_id,
 *                                          uint32_t *subblock_dim);
 * the calling emulated core thread's current block, sub-block 0 of 1 (0,
 * 0, 1 outside a kernel block). A chip_tensor kernel gets its block only
 * this way; if the runtime cannot make the hook visible, registering one
 * fails with SCENE_RT_E_LOAD saying why. */
int32_t scene_rt_register_callable2(SceneDevice *dev, const SceneCallableDesc2 *desc,
                                    uint32_t *out_handle);

#ifdef __cplusplus
}
#endif

#endif /* SCENE_RUNTIME_H */
