/*
 * pto_orchestration_api.h - the original project's orchestration API
 * (hw-native-sys/simpler, both runtime variants: tensormap_and_ringbuffer
 * and host_build_graph), written for our runtime.
 *
 * An orchestration source written against the original includes this
 * header by the same name and compiles unchanged: its
 * `aicpu_orchestration_entry(const ChipTaskArgs &)` builds the task graph
 * with CoreTaskArgs and rt_submit_*, and its `aicpu_orchestration_config`
 * says how many arguments it expects. Everything here is ours: the names
 * and their behaviour follow the original (docs/simpler-orchestration.md
 * lists what differs); the implementation is a thin C++ layer over
 * scene_orch.h (ABI v6), so the orchestration's shared object still calls
 * the runtime only through `ctx->ops`.
 *
 * The runtime calls `scene_simpler_orchestration` (defined below, weak, so
 * any number of translation units may include this header): it builds the
 * ChipTaskArgs from the run's arguments (tensors in order, then scalars),
 * checks the expected argument count, and calls the entry. A scene selects
 * it with `[orchestration] api = "simpler"`.
 *
 * Addresses: an orchestration sees tensors at host addresses (the device
 * memory's host window, scene_orch_memory_window), as the original's sim
 * does, so `data_as<T>()` reads and writes device memory directly
 * (untracked, as in the original); tasks get device addresses.
 */
#ifndef SCENE_SIMPLER_PTO_ORCHESTRATION_API_H
#define SCENE_SIMPLER_PTO_ORCHESTRATION_API_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>
#include <new>
#include <type_traits>

#include "scene_kernel.h" /* SCENE_MAX_ARGS */
#include "scene_orch.h"

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "the original's orchestration API needs C++17 or later"
#endif

/* The original's helper macros orchestrations use: a busy-wait hint (a
 * no-op on the host), an assertion that stops the orchestration in every
 * build, and one that is only checked in debug builds (compiled out, as
 * the original's release builds do). */
#ifndef SPIN_WAIT_HINT
#define SPIN_WAIT_HINT() ((void)0)
#endif
#ifndef always_assert
#define always_assert(cond)                                                                \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "[orchestration] %s:%d: assertion failed: %s\n", __FILE__,     \
                    __LINE__, #cond);                                                      \
            abort();                                                                       \
        }                                                                                  \
    } while (0)
#endif
#ifndef debug_assert
#define debug_assert(cond) ((void)0)
#endif

/* ======================================================================
 * Data types and task ids
 * ====================================================================== */

/* The original's element types, same values (a one-byte enum). */
enum class DataType : uint8_t {
    FLOAT32,
    FLOAT16,
    INT32,
    INT16,
    INT8,
    UINT8,
    BFLOAT16,
    INT64,
    UINT64,
    UINT16,
    UINT32,
    BOOL,
    FP8E4M3FN,
    FP8E8M0,
    FP4E2M1,
    DATA_TYPE_NUM,
};

enum class AddressSpace : uint8_t { HOST = 0, DEVICE = 1 };

inline uint64_t get_element_size(DataType dtype) {
    switch (dtype) {
    case DataType::FLOAT32:
    case DataType::INT32:
    case DataType::UINT32:
        return 4;
    case DataType::FLOAT16:
    case DataType::INT16:
    case DataType::BFLOAT16:
    case DataType::UINT16:
        return 2;
    case DataType::INT64:
    case DataType::UINT64:
        return 8;
    case DataType::INT8:
    case DataType::UINT8:
    case DataType::BOOL:
    case DataType::FP8E4M3FN:
    case DataType::FP8E8M0:
    case DataType::FP4E2M1:
        return 1;
    default:
        return 0;
    }
}

inline const char *get_dtype_name(DataType dtype) {
    static const char *const names[] = {"FLOAT32", "FLOAT16", "INT32",  "INT16",     "INT8",
                                        "UINT8",   "BFLOAT16", "INT64", "UINT64",    "UINT16",
                                        "UINT32",  "BOOL",    "FP8E4M3FN", "FP8E8M0", "FP4E2M1"};
    unsigned i = static_cast<unsigned>(dtype);
    return i < sizeof(names) / sizeof(names[0]) ? names[i] : "UNKNOWN";
}

/* A value's bits in a 64-bit word, zero-extended (scalars, tensor data). */
template <typename T>
inline uint64_t to_u64(T value) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "to_u64: the type must fit in 8 bytes");
    static_assert(std::is_trivially_copyable_v<T>, "to_u64: the type must be trivially copyable");
    uint64_t u = 0;
    memcpy(&u, &value, sizeof(T));
    return u;
}

/* The low sizeof(T) bytes of a word as a T. */
template <typename T>
inline T from_u64(uint64_t bits) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "from_u64: the type must fit in 8 bytes");
    static_assert(std::is_trivially_copyable_v<T>, "from_u64: the type must be trivially copyable");
    T v;
    memcpy(&v, &bits, sizeof(T));
    return v;
}

/* A task's id: what rt_submit_* returns (TaskOutputTensors::task_id) and
 * set_dependencies / add_dep take. */
struct PTO2TaskId {
    uint64_t raw;
    static constexpr PTO2TaskId invalid() { return PTO2TaskId{UINT64_MAX}; }
    constexpr bool is_valid() const { return raw != UINT64_MAX; }
    constexpr bool is_invalid() const { return raw == UINT64_MAX; }
    constexpr bool operator==(const PTO2TaskId &o) const { return raw == o.raw; }
    constexpr bool operator!=(const PTO2TaskId &o) const { return raw != o.raw; }
};

/* Dependency-edge kinds of set_dependencies_with_kinds / add_dep_wait.
 * Our runtime orders on every kind alike (buffers live until the run or
 * their scope ends, so "retain" needs nothing more). */
enum DepFlags : uint8_t { DEP_NONE = 0, DEP_WAIT = 1, DEP_RETAIN = 2 };
constexpr DepFlags operator|(DepFlags a, DepFlags b) {
    return static_cast<DepFlags>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}

/* Error codes of rt_report_fatal (the original's values). */
#define PTO2_ERROR_NONE 0
#define PTO2_ERROR_SCOPE_DEADLOCK 1
#define PTO2_ERROR_HEAP_RING_DEADLOCK 2
#define PTO2_ERROR_FLOW_CONTROL_DEADLOCK 3
#define PTO2_ERROR_DEP_POOL_OVERFLOW 4
#define PTO2_ERROR_INVALID_ARGS 5
#define PTO2_ERROR_REQUIRE_SYNC_START_INVALID 7
#define PTO2_ERROR_TENSOR_WAIT_TIMEOUT 8
#define PTO2_ERROR_EXPLICIT_ORCH_FATAL 9

#ifndef MAX_TENSOR_DIMS
#define MAX_TENSOR_DIMS 5
#endif
inline constexpr int CORE_MAX_TENSOR_ARGS = 32;
inline constexpr int CORE_MAX_SCALAR_ARGS = 16;
inline constexpr int CHIP_MAX_TENSOR_ARGS = 256;
inline constexpr int CHIP_MAX_SCALAR_ARGS = 128;
#ifndef MAX_TENSOR_ARGS
#define MAX_TENSOR_ARGS CORE_MAX_TENSOR_ARGS
#endif
#ifndef MAX_SCALAR_ARGS
#define MAX_SCALAR_ARGS CORE_MAX_SCALAR_ARGS
#endif
inline constexpr int32_t INVALID_KERNEL_ID = -1;

enum class TensorArgType : int32_t {
    INPUT = 0,
    OUTPUT = 1,          /* the runtime allocates it (a TensorCreateInfo) */
    INOUT = 2,
    OUTPUT_EXISTING = 3, /* written, an existing tensor */
    NO_DEP = 4,          /* not tracked */
};

enum class PTO2ScopeMode : uint8_t { AUTO = 0, MANUAL = 1 };

/* ======================================================================
 * ChipTensor: the original's 128-byte tensor record
 * ====================================================================== */

struct PTOBufferHandle {
    uint64_t addr; /* host address of the buffer (bytes) */
    uint64_t size; /* bytes */
};

/* Our marks in the first padding byte of a ChipTensor the orchestration
 * made (kernels get records of the runtime's own): 1 + d, a view that
 * left its parent in dimension d; or a refused reshape. Submitting such a
 * tensor fails the run, naming why. */
#define SCENE_SIMPLER_BAD_RESHAPE 0xff

struct alignas(64) ChipTensor {
    PTOBufferHandle buffer;
    PTO2TaskId owner_task_id; /* the task that created it; invalid() for external */
    uint64_t start_offset;    /* elements from buffer.addr to the view's origin */
    int32_t version;
    uint32_t ndims;
    DataType dtype;
    bool manual_dep; /* not tracked: the orchestration orders it itself */
    bool is_contiguous;
    AddressSpace address_space;
    uint32_t shapes[MAX_TENSOR_DIMS];
    uint64_t extent_elem_cache;
    uint32_t strides[MAX_TENSOR_DIMS];
    uint8_t _pad_cl2[36];

    ChipTensor() = default;
    ChipTensor(void *addr, uint64_t size_bytes, const uint32_t in_shapes[], uint32_t in_ndims,
               DataType in_dtype, int32_t in_version, bool in_manual_dep = false,
               AddressSpace in_space = AddressSpace::HOST) {
        init_external(addr, size_bytes, in_shapes, in_ndims, in_dtype, in_version, in_manual_dep,
                      in_space);
    }

    void init_external(void *addr, uint64_t size_bytes, const uint32_t in_shapes[],
                       uint32_t in_ndims, DataType in_dtype, int32_t in_version,
                       bool in_manual_dep = false, AddressSpace in_space = AddressSpace::HOST) {
        memset(static_cast<void *>(this), 0, sizeof(*this));
        buffer.addr = reinterpret_cast<uint64_t>(addr);
        buffer.size = size_bytes;
        owner_task_id = PTO2TaskId::invalid();
        start_offset = 0;
        version = in_version;
        ndims = in_ndims > MAX_TENSOR_DIMS ? MAX_TENSOR_DIMS : in_ndims;
        dtype = in_dtype;
        manual_dep = in_manual_dep;
        address_space = in_space;
        set_row_major(in_shapes);
        refresh_derived();
    }

    /* shapes[0..ndims) from `in_shapes`, strides row-major over them. */
    void set_row_major(const uint32_t in_shapes[]) {
        uint32_t s = 1;
        for (int32_t i = static_cast<int32_t>(ndims) - 1; i >= 0; --i) {
            shapes[i] = in_shapes[i];
            strides[i] = s;
            s *= in_shapes[i];
        }
    }

    void init_from(const ChipTensor &other) { *this = other; }
    void copy(const ChipTensor &other) { *this = other; }

    uint64_t numel() const {
        uint64_t n = 1;
        for (uint32_t i = 0; i < ndims; i++) n *= shapes[i];
        return n;
    }
    uint64_t nbytes() const { return numel() * get_element_size(dtype); }
    /* Elements from the view's first to its last element, plus one (0 if
     * empty). */
    uint64_t extent_elem() const { return extent_elem_cache; }
    bool is_valid() const { return buffer.addr != 0 && ndims > 0; }

    /* The buffer's first byte as a T* (untracked: no waiting for tasks). */
    template <typename T>
    T *data_as() const {
        return reinterpret_cast<T *>(static_cast<uintptr_t>(buffer.addr));
    }

    /* A window of `view_shapes` elements starting at `view_offsets`, same
     * strides. A view with a zero-sized dimension captures nothing (its
     * offsets are not checked); any other view must stay inside this one,
     * or submitting it fails the run naming the dimension. */
    ChipTensor view(const uint32_t view_shapes[], const uint32_t view_offsets[],
                    bool in_manual_dep = false) const {
        ChipTensor r = *this;
        bool empty = false;
        for (uint32_t i = 0; i < ndims; i++) empty = empty || view_shapes[i] == 0;
        for (uint32_t i = 0; i < ndims; i++) {
            if (!empty) {
                if (view_offsets[i] > shapes[i] || view_shapes[i] > shapes[i] - view_offsets[i])
                    r._pad_cl2[0] = static_cast<uint8_t>(1 + i); /* left its parent */
                r.start_offset += static_cast<uint64_t>(view_offsets[i]) * strides[i];
            }
            r.shapes[i] = view_shapes[i];
        }
        r.manual_dep = in_manual_dep;
        r.refresh_derived();
        return r;
    }

    bool valid_transpose(uint32_t x, uint32_t y) const { return x < ndims && y < ndims; }
    ChipTensor transpose(uint32_t x, uint32_t y, bool in_manual_dep = false) const {
        ChipTensor r = *this;
        if (valid_transpose(x, y)) {
            uint32_t s = r.shapes[x], t = r.strides[x];
            r.shapes[x] = r.shapes[y];
            r.strides[x] = r.strides[y];
            r.shapes[y] = s;
            r.strides[y] = t;
        }
        r.manual_dep = in_manual_dep;
        r.refresh_derived();
        return r;
    }
    ChipTensor permute(const uint32_t order[], bool in_manual_dep = false) const {
        ChipTensor r = *this;
        for (uint32_t i = 0; i < ndims; i++) {
            r.shapes[i] = shapes[order[i]];
            r.strides[i] = strides[order[i]];
        }
        r.manual_dep = in_manual_dep;
        r.refresh_derived();
        return r;
    }
    ChipTensor slice(uint32_t dim, uint32_t start, uint32_t end, uint32_t step = 1,
                     bool in_manual_dep = false) const {
        ChipTensor r = *this;
        if (dim < ndims && step > 0 && start <= end && end <= shapes[dim]) {
            r.start_offset += static_cast<uint64_t>(start) * strides[dim];
            r.shapes[dim] = (end - start + step - 1) / step;
            r.strides[dim] = strides[dim] * step;
        } else {
            r._pad_cl2[0] = static_cast<uint8_t>(1 + (dim < ndims ? dim : 0));
        }
        r.manual_dep = in_manual_dep;
        r.refresh_derived();
        return r;
    }
    /* Same elements, another shape: only a contiguous tensor, same count. */
    bool valid_reshape(const uint32_t new_shapes[], uint32_t new_ndims) const {
        if (!is_contiguous || new_ndims == 0 || new_ndims > MAX_TENSOR_DIMS) return false;
        uint64_t n = 1;
        for (uint32_t i = 0; i < new_ndims; i++) n *= new_shapes[i];
        return n == numel();
    }
    ChipTensor reshape(const uint32_t new_shapes[], uint32_t new_ndims,
                       bool in_manual_dep = false) const {
        ChipTensor r = *this;
        if (!valid_reshape(new_shapes, new_ndims)) {
            r._pad_cl2[0] = SCENE_SIMPLER_BAD_RESHAPE; /* refused at submit */
            return r;
        }
        r.ndims = new_ndims;
        r.set_row_major(new_shapes);
        r.manual_dep = in_manual_dep;
        r.refresh_derived();
        return r;
    }

    /* extent_elem_cache and is_contiguous from shapes and strides. */
    void refresh_derived() {
        bool empty = false;
        uint64_t extent = 1, row_major = 1;
        bool contiguous = true;
        for (int32_t i = static_cast<int32_t>(ndims) - 1; i >= 0; --i) {
            if (shapes[i] == 0) empty = true;
            if (shapes[i] != 1 && strides[i] != row_major) contiguous = false;
            row_major *= shapes[i];
            if (shapes[i] > 0) extent += static_cast<uint64_t>(shapes[i] - 1) * strides[i];
        }
        extent_elem_cache = empty ? 0 : extent;
        is_contiguous = empty || contiguous;
    }
};

static_assert(sizeof(ChipTensor) == 128, "ChipTensor is the original's 128-byte record");
static_assert(offsetof(ChipTensor, owner_task_id) == 16, "ChipTensor layout");
static_assert(offsetof(ChipTensor, start_offset) == 24, "ChipTensor layout");
static_assert(offsetof(ChipTensor, ndims) == 36, "ChipTensor layout");
static_assert(offsetof(ChipTensor, dtype) == 40, "ChipTensor layout");
static_assert(offsetof(ChipTensor, shapes) == 44, "ChipTensor layout");
static_assert(offsetof(ChipTensor, extent_elem_cache) == 64, "ChipTensor layout");
static_assert(offsetof(ChipTensor, strides) == 72, "ChipTensor layout");

/* A contiguous tensor over memory the orchestration already has (a run
 * argument's data_as pointer, or part of one). */
inline ChipTensor make_tensor_external(void *addr, const uint32_t shapes[], uint32_t ndims,
                                       DataType dtype = DataType::FLOAT32, bool manual_dep = false,
                                       int32_t version = 0,
                                       AddressSpace address_space = AddressSpace::HOST) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < ndims; i++) n *= shapes[i];
    return ChipTensor(addr, n * get_element_size(dtype), shapes, ndims, dtype, version, manual_dep,
                      address_space);
}

/* A possibly strided tensor whose first element is at `addr`. */
inline ChipTensor make_tensor_strided(void *addr, const uint32_t shapes[], const uint32_t strides[],
                                      uint32_t ndims, DataType dtype = DataType::FLOAT32,
                                      bool manual_dep = false, int32_t version = 0,
                                      AddressSpace address_space = AddressSpace::HOST) {
    ChipTensor t = make_tensor_external(addr, shapes, ndims, dtype, manual_dep, version,
                                        address_space);
    for (uint32_t i = 0; i < t.ndims; i++) t.strides[i] = strides[i];
    t.refresh_derived();
    t.buffer.size = t.extent_elem_cache * get_element_size(dtype);
    return t;
}

/* What the runtime allocates for an output (CoreTaskArgs::add_output): a
 * contiguous tensor of `shapes`, zero-filled unless set_initial_value. */
class alignas(64) TensorCreateInfo {
public:
    TensorCreateInfo() = default;
    TensorCreateInfo(const uint32_t shapes_in[], uint32_t ndims_in,
                     DataType dtype_in = DataType::FLOAT32, bool manual_dep_in = false)
        : initial_value(0), has_initial_value(false), ndims(ndims_in), dtype(dtype_in),
          manual_dep(manual_dep_in) {
        if (ndims > MAX_TENSOR_DIMS) ndims = MAX_TENSOR_DIMS;
        for (uint32_t i = 0; i < ndims; i++) shapes[i] = shapes_in[i];
    }
    void copy(const TensorCreateInfo &other) { *this = other; }
    template <typename T = uint64_t>
    void set_initial_value(T value) {
        has_initial_value = true;
        initial_value = to_u64(value);
    }
    uint64_t numel() const {
        uint64_t n = 1;
        for (uint32_t i = 0; i < ndims; i++) n *= shapes[i];
        return n;
    }
    uint64_t nbytes() const { return numel() * get_element_size(dtype); }
    uint64_t buffer_size_bytes() const { return nbytes(); }

    uint64_t initial_value = 0;
    bool has_initial_value = false;
    uint32_t ndims = 0;
    DataType dtype = DataType::FLOAT32;
    bool manual_dep = false;
    uint32_t shapes[MAX_TENSOR_DIMS] = {};
};

/* A contiguous tensor of `ci`'s shape and dtype over `addr` (what
 * orchestrations that sub-allocate a scratch tensor themselves use). */
inline void init_tensor_from_create_info(ChipTensor &t, const TensorCreateInfo &ci, void *addr,
                                         uint64_t buffer_size) {
    t = ChipTensor(addr, buffer_size, ci.shapes, ci.ndims, ci.dtype, 0, ci.manual_dep);
}

/* ======================================================================
 * Task arguments
 * ====================================================================== */

/* A tensor slot: a ChipTensor or, for a runtime-allocated output, a
 * TensorCreateInfo (the slot's tag says which). */
class TensorRef {
    union {
        const ChipTensor *ptr_;
        const TensorCreateInfo *create_info_;
    };

public:
    TensorRef() : ptr_(nullptr) {}
    TensorRef(const TensorRef &) = delete;
    TensorRef &operator=(const TensorRef &) = delete;
    TensorRef &operator=(const ChipTensor *p) {
        ptr_ = p;
        return *this;
    }
    TensorRef &operator=(const TensorCreateInfo *ci) {
        create_info_ = ci;
        return *this;
    }
    const ChipTensor &ref() const { return *ptr_; }
    const TensorCreateInfo &create_info() const { return *create_info_; }
};

/* Dispatch predicates: run the task only if `operand OP target`. */
enum class PredicateOp : uint8_t { NONE = 0, EQ, NE, GT, LT, GE, LE };
struct CorePredicateOperand {
    const ChipTensor *tensor{nullptr};
    uint32_t ndims{0};
    uint32_t indices[MAX_TENSOR_DIMS]{};
};
struct CoreTaskPredicate {
    CorePredicateOperand operand;
    PredicateOp op{PredicateOp::NONE};
    int64_t target{0};
};

/* SPMD launch parameters: how many blocks a task runs. */
class PTO2LaunchSpec {
public:
    constexpr PTO2LaunchSpec() = default;
    int16_t block_num() const { return block_num_; }
    void set_block_num(int16_t n) { block_num_ = n; }
    /* a5's name for the same field. */
    void set_core_num(int16_t n) { block_num_ = n; }
    int16_t core_num() const { return block_num_; }
    /* Every block starts together: ours starts a task's blocks as cores
     * free up, which the simulator's blocks never wait on each other for
     * (accepted, documented). */
    bool require_sync_start() const { return require_sync_start_; }
    void set_require_sync_start(bool v) { require_sync_start_ = v; }

private:
    int16_t block_num_{1};
    bool require_sync_start_{false};
};

template <typename T>
inline constexpr bool scene_simpler_is_tensor_v =
    std::is_same_v<std::decay_t<T>, ChipTensor> || std::is_same_v<std::decay_t<T>, TensorCreateInfo>;

/* One task's arguments: tensors (in add order), then scalars, which is
 * the order its kernels receive them in. Errors (too many, a NULL
 * dependency array) are kept and fail the submit. */
template <size_t MaxT, size_t MaxS>
struct Arg {
    TensorRef tensors_[MaxT];
    TensorArgType tags_[MaxT];
    uint64_t scalars_[MaxS];
    int32_t tensor_count_{0};
    int32_t scalar_count_{0};
    bool has_error{false};
    const char *error_msg{nullptr};
    PTO2LaunchSpec launch_spec;

    Arg() = default;
    Arg(const Arg &) = delete;
    Arg &operator=(const Arg &) = delete;

    const TensorRef &tensor(int32_t i) const { return tensors_[i]; }
    uint64_t scalar(int32_t i) const { return scalars_[i]; }
    uint64_t &scalar(int32_t i) { return scalars_[i]; }
    const uint64_t *scalars() const { return scalars_; }
    const TensorArgType &tag(int32_t i) const { return tags_[i]; }
    int32_t tensor_count() const { return tensor_count_; }
    int32_t scalar_count() const { return scalar_count_; }

    void set_error(const char *msg) {
        if (!has_error) {
            has_error = true;
            error_msg = msg;
        }
    }
    void clear() {
        tensor_count_ = 0;
        scalar_count_ = 0;
        has_error = false;
        error_msg = nullptr;
        explicit_deps_ = nullptr;
        explicit_dep_count_ = 0;
        explicit_dep_kinds_ = nullptr;
        allow_early_resolve_ = false;
        predicate_ = CoreTaskPredicate{};
    }
    void reset() {
        clear();
        launch_spec = PTO2LaunchSpec{};
    }

    template <typename... Ts>
    void add_input(const Ts &...ts) {
        static_assert((std::is_same_v<Ts, ChipTensor> && ...), "add_input takes ChipTensors");
        add_tensors(TensorArgType::INPUT, ts...);
    }
    /* TensorCreateInfos: the runtime allocates them (OUTPUT); ChipTensors:
     * existing tensors written whole (OUTPUT_EXISTING). */
    template <typename... Ts>
    void add_output(const Ts &...ts) {
        static_assert((scene_simpler_is_tensor_v<Ts> && ...),
                      "add_output takes ChipTensors or TensorCreateInfos");
        if constexpr ((std::is_same_v<Ts, TensorCreateInfo> && ...)) {
            add_tensors(TensorArgType::OUTPUT, ts...);
        } else {
            static_assert((std::is_same_v<Ts, ChipTensor> && ...),
                          "add_output: all ChipTensors or all TensorCreateInfos");
            add_tensors(TensorArgType::OUTPUT_EXISTING, ts...);
        }
    }
    template <typename... Ts>
    void add_inout(const Ts &...ts) {
        static_assert((std::is_same_v<Ts, ChipTensor> && ...), "add_inout takes ChipTensors");
        add_tensors(TensorArgType::INOUT, ts...);
    }
    template <typename... Ts>
    void add_no_dep(const Ts &...ts) {
        static_assert((std::is_same_v<Ts, ChipTensor> && ...), "add_no_dep takes ChipTensors");
        add_tensors(TensorArgType::NO_DEP, ts...);
    }

    template <typename... Ts>
    void add_scalar(Ts &&...vs) {
        static_assert(sizeof...(Ts) >= 1, "add_scalar: at least one value");
        static_assert(((std::is_arithmetic_v<std::decay_t<Ts>> || std::is_enum_v<std::decay_t<Ts>>) &&
                       ...),
                      "add_scalar: arithmetic or enum values");
        if (static_cast<size_t>(scalar_count_) + sizeof...(Ts) > MaxS) {
            set_error("add_scalar: more scalars than a task takes");
            return;
        }
        ((scalars_[scalar_count_++] = to_u64(vs)), ...);
    }
    void add_scalars(const uint64_t *values, int count) {
        if (count < 0 || static_cast<size_t>(scalar_count_ + count) > MaxS) {
            set_error("add_scalars: more scalars than a task takes");
            return;
        }
        for (int i = 0; i < count; i++) scalars_[scalar_count_++] = values[i];
    }
    void add_scalars_i32(const int32_t *values, int count) {
        if (count < 0 || static_cast<size_t>(scalar_count_ + count) > MaxS) {
            set_error("add_scalars_i32: more scalars than a task takes");
            return;
        }
        for (int i = 0; i < count; i++) scalars_[scalar_count_++] = to_u64(values[i]);
    }
    template <size_t T2, size_t S2>
    void copy_scalars_from(const Arg<T2, S2> &src, int src_offset, int count) {
        if (src_offset < 0 || count < 0 || src_offset + count > src.scalar_count() ||
            static_cast<size_t>(scalar_count_ + count) > MaxS) {
            set_error("copy_scalars_from: out of range");
            return;
        }
        for (int i = 0; i < count; i++) scalars_[scalar_count_++] = src.scalar(src_offset + i);
    }

    /* Explicit dependencies (on top of those the tensors imply): the array
     * must outlive the submit. At most once per task (0 clears). */
    void set_dependencies(const PTO2TaskId *deps, uint32_t count) {
        set_dependencies_with_kinds(deps, nullptr, count, true);
    }
    void set_dependencies_with_kinds(const PTO2TaskId *deps, const DepFlags *kinds, uint32_t count) {
        if (count > 0 && kinds == nullptr) {
            set_error("set_dependencies_with_kinds: kinds must not be null when count > 0");
            return;
        }
        set_dependencies_with_kinds(deps, kinds, count, false);
    }
    uint32_t explicit_dep_count() const { return explicit_dep_count_; }
    PTO2TaskId explicit_dep(uint32_t i) const { return explicit_deps_[i]; }
    const PTO2TaskId *explicit_deps_data() const { return explicit_deps_; }

    void set_allow_early_resolve(bool v = true) { allow_early_resolve_ = v; }
    bool allow_early_resolve() const { return allow_early_resolve_; }
    void set_predicate(const CoreTaskPredicate &p) { predicate_ = p; }
    const CoreTaskPredicate &predicate() const { return predicate_; }
    /* Profiling and dump selections of the original: accepted, no effect
     * here (--dump-args and traces cover them). */
    void set_task_timing_slot(int32_t slot) { task_timing_slot_ = slot; }
    int32_t task_timing_slot() const { return task_timing_slot_; }
    template <typename... Ts>
    void dump(Ts &&...) {}

private:
    template <typename... Ts>
    void add_tensors(TensorArgType tag, const Ts &...ts) {
        if (static_cast<size_t>(tensor_count_) + sizeof...(Ts) > MaxT) {
            set_error("add_input/add_output/add_inout: more tensors than a task takes");
            return;
        }
        if (scalar_count_ > 0) {
            set_error("a tensor added after a scalar: the original's kernels take tensors first");
            return;
        }
        ((tensors_[tensor_count_] = &ts, tags_[tensor_count_] = tag, tensor_count_++), ...);
    }
    void set_dependencies_with_kinds(const PTO2TaskId *deps, const DepFlags *kinds, uint32_t count,
                                     bool) {
        if (count == 0) {
            explicit_deps_ = nullptr;
            explicit_dep_count_ = 0;
            explicit_dep_kinds_ = nullptr;
            return;
        }
        if (deps == nullptr) {
            set_error("set_dependencies: deps must not be null when count > 0");
            return;
        }
        if (explicit_deps_ != nullptr) {
            set_error("set_dependencies: may be called at most once per task");
            return;
        }
        explicit_deps_ = deps;
        explicit_dep_kinds_ = kinds;
        explicit_dep_count_ = count;
    }

    const PTO2TaskId *explicit_deps_{nullptr};
    const DepFlags *explicit_dep_kinds_{nullptr};
    uint32_t explicit_dep_count_{0};
    bool allow_early_resolve_{false};
    CoreTaskPredicate predicate_{};
    int32_t task_timing_slot_{-1};
};

using CoreTaskArgs = Arg<CORE_MAX_TENSOR_ARGS, CORE_MAX_SCALAR_ARGS>;

/* The orchestration's own arguments: the run's tensors, then its scalars. */
struct ChipTaskArgs {
    TensorRef tensors_[CHIP_MAX_TENSOR_ARGS];
    uint64_t scalars_[CHIP_MAX_SCALAR_ARGS];
    int32_t tensor_count_{0};
    int32_t scalar_count_{0};

    ChipTaskArgs() = default;
    ChipTaskArgs(const ChipTaskArgs &) = delete;
    ChipTaskArgs &operator=(const ChipTaskArgs &) = delete;

    const TensorRef &tensor(int32_t i) const { return tensors_[i]; }
    uint64_t scalar(int32_t i) const { return scalars_[i]; }
    const uint64_t *scalars() const { return scalars_; }
    int32_t tensor_count() const { return tensor_count_; }
    int32_t scalar_count() const { return scalar_count_; }
};

/* The kernels of one task: a kernel id (func_id) per slot of a cluster,
 * or INVALID_KERNEL_ID. */
struct MixedKernels {
    int32_t aic_kernel_id{INVALID_KERNEL_ID};
    int32_t aiv0_kernel_id{INVALID_KERNEL_ID};
    int32_t aiv1_kernel_id{INVALID_KERNEL_ID};
};

/* What a submit returns: the task's id and the tensors the runtime
 * allocated for it (its add_output(TensorCreateInfo)s, in order). They
 * live until the run ends. */
class TaskOutputTensors {
public:
    TaskOutputTensors() = default;
    TaskOutputTensors(PTO2TaskId id, const ChipTensor *outputs, uint32_t count)
        : task_id_(id), outputs_(outputs), output_count_(count) {}
    bool empty() const { return output_count_ == 0; }
    uint32_t size() const { return output_count_; }
    /* Output `index`. Past the outputs (the empty result of a failed or
     * skipped submit, as the original returns after a fatal error), the
     * run fails with that (unless it failed already: the first message
     * stands) and an empty tensor comes back, which every later call
     * ignores, so the orchestration returns and the report names the
     * first error rather than a crash. */
    const ChipTensor &get_ref(uint32_t index) const &;
    const ChipTensor &get_ref(uint32_t index) const && = delete;
    PTO2TaskId task_id() const { return task_id_; }

private:
    PTO2TaskId task_id_{PTO2TaskId::invalid()};
    const ChipTensor *outputs_{nullptr};
    uint32_t output_count_{0};
};

#ifndef PTO2_ORCHESTRATION_CONFIG_DEFINED
#define PTO2_ORCHESTRATION_CONFIG_DEFINED
struct PTO2OrchestrationConfig {
    int expected_arg_count;
};
#endif

/* ======================================================================
 * The runtime: our state behind the original's calls
 * ====================================================================== */

/* One run of the orchestration (the original's PTO2Runtime is opaque to
 * orchestrations too; code that only passes current_runtime() around
 * compiles). */
struct PTO2Runtime {
    SceneOrchCtx *ctx;
    bool fatal;
    PTO2ScopeMode pending_scope_mode;
    uint64_t device_base, host_base, window_len;
    /* Runtime-created outputs, one contiguous block per submit (what
     * TaskOutputTensors indexes), freed when the entry returns. */
    std::vector<ChipTensor *> output_blocks;

    /* A block of `n` outputs living until the entry returns; NULL (and
     * the run failed) when host memory is out. */
    ChipTensor *new_outputs(uint32_t n) {
        ChipTensor *block = new (std::nothrow) ChipTensor[n];
        if (block != nullptr) output_blocks.push_back(block);
        return block;
    }
    ~PTO2Runtime() {
        for (ChipTensor *b : output_blocks) delete[] b;
    }
};

inline thread_local PTO2Runtime *scene_simpler_runtime_ = nullptr;

static inline PTO2Runtime *current_runtime() { return scene_simpler_runtime_; }

/* Log levels of LOG_*: errors and warnings go to stderr; info, debug and
 * timing only when SCENE_ORCH_LOG is info, debug or timing (ordered
 * error < warn < info < timing < debug). */
inline int scene_simpler_log_level() {
    static int level = [] {
        const char *v = getenv("SCENE_ORCH_LOG");
        if (!v) return 1;
        if (!strcmp(v, "debug")) return 4;
        if (!strcmp(v, "timing")) return 3;
        if (!strcmp(v, "info")) return 2;
        if (!strcmp(v, "error")) return 0;
        return 1;
    }();
    return level;
}

__attribute__((format(printf, 3, 4))) inline void scene_simpler_log(int level, const char *func,
                                                                    const char *fmt, ...) {
    static const char *const names[] = {"ERROR", "WARN", "INFO", "TIMING", "DEBUG"};
    if (level > scene_simpler_log_level()) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[orchestration %s] %s: %s\n", names[level], func, buf);
}

#define LOG_ERROR(fmt, ...) scene_simpler_log(0, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_WARN(fmt, ...) scene_simpler_log(1, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_INFO(fmt, ...) scene_simpler_log(2, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_TIMING(fmt, ...) scene_simpler_log(3, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_DEBUG(fmt, ...) scene_simpler_log(4, __FUNCTION__, fmt, ##__VA_ARGS__)

/* The run fails with this message (the first one reported); every later
 * rt_* call does nothing, as in the original. */
__attribute__((format(printf, 4, 5))) inline void scene_simpler_fatal(PTO2Runtime *rt, int32_t code,
                                                                      const char *func,
                                                                      const char *fmt, ...) {
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "%s (error %d): ", func, code);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && static_cast<size_t>(n) < sizeof msg) vsnprintf(msg + n, sizeof msg - n, fmt, ap);
    va_end(ap);
    if (rt == nullptr) {
        fprintf(stderr, "[orchestration ERROR] %s (outside a run)\n", msg);
        return;
    }
    if (!rt->fatal) scene_orch_fail(rt->ctx, msg);
    rt->fatal = true;
}

#define rt_report_fatal(code, fmt, ...) \
    scene_simpler_fatal(current_runtime(), (code), __FUNCTION__, (fmt), ##__VA_ARGS__)

static inline bool rt_is_fatal() {
    PTO2Runtime *rt = current_runtime();
    return rt == nullptr || rt->fatal;
}

/* A failed runtime call: the run fails with the runtime's message. */
inline void scene_simpler_failed(PTO2Runtime *rt, int32_t status, const char *what) {
    const char *why = scene_orch_last_error(rt->ctx);
    scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what, "%s (status %d)",
                        why && *why ? why : "the runtime refused it", status);
}

/* Host address (what orchestrations see) -> device address (what tasks
 * get); 0 for an address outside device memory. */
inline uint64_t scene_simpler_device_addr(const PTO2Runtime *rt, uint64_t host) {
    if (host >= rt->host_base && host - rt->host_base < rt->window_len)
        return rt->device_base + (host - rt->host_base);
    return 0;
}
inline uint64_t scene_simpler_host_addr(const PTO2Runtime *rt, uint64_t device) {
    return rt->host_base + (device - rt->device_base);
}

inline bool scene_simpler_dtype(DataType d, uint32_t *out) {
    switch (d) {
    case DataType::FLOAT32: *out = SCENE_DTYPE_F32; return true;
    case DataType::FLOAT16: *out = SCENE_DTYPE_F16; return true;
    case DataType::BFLOAT16: *out = SCENE_DTYPE_BF16; return true;
    case DataType::INT32: case DataType::UINT32: *out = SCENE_DTYPE_I32; return true;
    case DataType::INT16: case DataType::UINT16: *out = SCENE_DTYPE_I16; return true;
    case DataType::INT64: case DataType::UINT64: *out = SCENE_DTYPE_I64; return true;
    case DataType::INT8: *out = SCENE_DTYPE_I8; return true;
    case DataType::UINT8: case DataType::FP8E4M3FN: case DataType::FP8E8M0:
    case DataType::FP4E2M1: *out = SCENE_DTYPE_U8; return true;
    case DataType::BOOL: *out = SCENE_DTYPE_BOOL; return true;
    default: return false;
    }
}

inline bool scene_simpler_from_scene_dtype(uint32_t d, DataType *out) {
    switch (d) {
    case SCENE_DTYPE_F32: *out = DataType::FLOAT32; return true;
    case SCENE_DTYPE_F16: *out = DataType::FLOAT16; return true;
    case SCENE_DTYPE_BF16: *out = DataType::BFLOAT16; return true;
    case SCENE_DTYPE_I32: *out = DataType::INT32; return true;
    case SCENE_DTYPE_I16: *out = DataType::INT16; return true;
    case SCENE_DTYPE_I64: *out = DataType::INT64; return true;
    case SCENE_DTYPE_I8: *out = DataType::INT8; return true;
    case SCENE_DTYPE_U8: case SCENE_DTYPE_BYTES: *out = DataType::UINT8; return true;
    case SCENE_DTYPE_BOOL: *out = DataType::BOOL; return true;
    default: return false;
    }
}

/* A tensor as a task argument (device address, view), or false with a
 * message in `why`. */
inline bool scene_simpler_task_arg(const PTO2Runtime *rt, const ChipTensor &t, uint32_t direction,
                                   SceneTaskArgV2 *out, char *why, size_t why_len) {
    memset(static_cast<void *>(out), 0, sizeof *out);
    uint32_t dtype;
    if (!scene_simpler_dtype(t.dtype, &dtype)) {
        snprintf(why, why_len, "dtype %u has no element type here", static_cast<unsigned>(t.dtype));
        return false;
    }
    if (t.ndims == 0 || t.ndims > MAX_TENSOR_DIMS) {
        snprintf(why, why_len, "%u dimensions (1 to %d)", t.ndims, MAX_TENSOR_DIMS);
        return false;
    }
    uint64_t dev = scene_simpler_device_addr(rt, t.buffer.addr);
    if (dev == 0) {
        snprintf(why, why_len,
                 "its buffer (host address %#llx) is not device memory: pass run arguments, views of "
                 "them, or runtime-created outputs",
                 static_cast<unsigned long long>(t.buffer.addr));
        return false;
    }
    if (t._pad_cl2[0] == SCENE_SIMPLER_BAD_RESHAPE) {
        snprintf(why, why_len,
                 "it is a reshape the original refuses (of a non-contiguous tensor, or to another "
                 "element count)");
        return false;
    }
    out->direction = direction | (t.manual_dep ? SCENE_DIR_MANUAL_DEP : 0u);
    /* 1 + d: a view left its parent in dimension d (ChipTensor::view). */
    out->view_error = t._pad_cl2[0];
    out->value = dev;
    out->size = t.buffer.size;
    out->desc.dtype = dtype;
    out->desc.rank = t.ndims;
    out->desc.offset = t.start_offset;
    for (uint32_t i = 0; i < t.ndims; i++) {
        out->desc.shape[i] = t.shapes[i];
        out->desc.strides[i] = t.strides[i];
    }
    /* An empty view captures no bytes: nothing to check or order. */
    if (t.extent_elem_cache == 0) out->view_error = 0;
    return true;
}

inline uint32_t scene_simpler_direction(TensorArgType tag) {
    switch (tag) {
    case TensorArgType::INPUT: return SCENE_DIR_IN;
    case TensorArgType::OUTPUT:
    case TensorArgType::OUTPUT_EXISTING: return SCENE_DIR_OUT;
    case TensorArgType::NO_DEP: return SCENE_DIR_INOUT | SCENE_DIR_MANUAL_DEP;
    default: return SCENE_DIR_INOUT;
    }
}

/* Allocates a runtime-created output (zero or its initial value). */
inline bool scene_simpler_create(PTO2Runtime *rt, const TensorCreateInfo &ci, PTO2TaskId owner,
                                 ChipTensor *out) {
    uint64_t bytes = ci.nbytes(), dev = 0;
    if (ci.ndims == 0 || get_element_size(ci.dtype) == 0) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, "add_output",
                            "a TensorCreateInfo with %u dimensions and dtype %s", ci.ndims,
                            get_dtype_name(ci.dtype));
        return false;
    }
    int32_t rc = scene_orch_malloc(rt->ctx, bytes ? bytes : 1, &dev);
    if (rc != SCENE_RT_OK) {
        scene_simpler_failed(rt, rc, "add_output (allocating a runtime-created output)");
        return false;
    }
    uint64_t es = get_element_size(ci.dtype);
    if (ci.has_initial_value && bytes) {
        rc = scene_orch_fill(rt->ctx, dev, 0, bytes, &ci.initial_value, static_cast<uint32_t>(es));
    } else if (bytes) {
        uint64_t zero = 0;
        rc = scene_orch_fill(rt->ctx, dev, 0, bytes, &zero, static_cast<uint32_t>(es));
    }
    if (rc != SCENE_RT_OK) {
        scene_simpler_failed(rt, rc, "add_output (filling a runtime-created output)");
        return false;
    }
    *out = ChipTensor(reinterpret_cast<void *>(scene_simpler_host_addr(rt, dev)), bytes, ci.shapes,
                      ci.ndims, ci.dtype, 0, ci.manual_dep);
    out->owner_task_id = owner;
    return true;
}

/* Allocates every runtime-created output of `args` (its
 * TensorCreateInfos, in order) into one block, `*outputs` (`*count` of
 * them; NULL when none). False, and the run failed, when one cannot be. */
template <size_t MaxT, size_t MaxS>
inline bool scene_simpler_create_outputs(PTO2Runtime *rt, const Arg<MaxT, MaxS> &args,
                                         const char *what, ChipTensor **outputs, uint32_t *count) {
    uint32_t n = 0;
    for (int32_t i = 0; i < args.tensor_count(); i++) n += args.tag(i) == TensorArgType::OUTPUT;
    *outputs = nullptr;
    *count = n;
    if (n == 0) return true;
    if ((*outputs = rt->new_outputs(n)) == nullptr) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what, "out of host memory");
        return false;
    }
    uint32_t k = 0;
    for (int32_t i = 0; i < args.tensor_count(); i++) {
        if (args.tag(i) == TensorArgType::OUTPUT &&
            !scene_simpler_create(rt, args.tensor(i).create_info(), PTO2TaskId::invalid(),
                                  &(*outputs)[k++]))
            return false;
    }
    return true;
}

/* Submits `args` to `kernels` (all INVALID_KERNEL_ID: a dependency-only
 * task). */
template <size_t MaxT, size_t MaxS>
inline TaskOutputTensors scene_simpler_submit(const MixedKernels &kernels,
                                              const Arg<MaxT, MaxS> &args, const char *what) {
    PTO2Runtime *rt = current_runtime();
    if (rt == nullptr || rt->fatal) return TaskOutputTensors{};
    if (args.has_error) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what, "%s",
                            args.error_msg ? args.error_msg : "invalid task arguments");
        return TaskOutputTensors{};
    }
    const int32_t nt = args.tensor_count(), ns = args.scalar_count();
    if (nt + ns > SCENE_MAX_ARGS) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what,
                            "%d tensors and %d scalars: this runtime takes %d arguments per task", nt,
                            ns, SCENE_MAX_ARGS);
        return TaskOutputTensors{};
    }
    /* Runtime-created outputs first: they are allocated in the current
     * scope, before the task that writes them exists. */
    uint32_t created = 0;
    ChipTensor *outputs = nullptr;
    if (!scene_simpler_create_outputs(rt, args, what, &outputs, &created)) return TaskOutputTensors{};
    uint32_t next_output = 0;
    SceneTaskArgV2 ta[SCENE_MAX_ARGS];
    char why[256];
    for (int32_t i = 0; i < nt; i++) {
        const ChipTensor *t;
        if (args.tag(i) == TensorArgType::OUTPUT) {
            t = &outputs[next_output++];
        } else {
            t = &args.tensor(i).ref();
        }
        if (!scene_simpler_task_arg(rt, *t, scene_simpler_direction(args.tag(i)), &ta[i], why,
                                    sizeof why)) {
            scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what, "tensor argument %d: %s", i, why);
            return TaskOutputTensors{};
        }
    }
    for (int32_t i = 0; i < ns; i++) {
        memset(static_cast<void *>(&ta[nt + i]), 0, sizeof ta[0]);
        ta[nt + i].direction = SCENE_DIR_SCALAR;
        ta[nt + i].value = args.scalar(i);
    }
    SceneSubmit s;
    memset(static_cast<void *>(&s), 0, sizeof s);
    s.kernels = scene_mixed(kernels.aic_kernel_id, kernels.aiv0_kernel_id, kernels.aiv1_kernel_id);
    int16_t blocks = args.launch_spec.block_num();
    s.block_num = blocks > 0 ? static_cast<uint32_t>(blocks) : 1u;
    s.args = ta;
    s.num_args = static_cast<uint32_t>(nt + ns);
    /* An invalid id (an external tensor's owner_task_id, a task never
     * submitted) names no task: it orders nothing, as in the original. */
    /* No cap on their number, as in the original (its runtime imposes
     * none; dep_gen's 64 is a cap of its diagnostic record only): up to
     * 64 on the stack, more in a vector. */
    uint64_t small_deps[64];
    std::vector<uint64_t> many_deps;
    uint64_t *deps = small_deps;
    if (args.explicit_dep_count() > sizeof small_deps / sizeof small_deps[0]) {
        many_deps.resize(args.explicit_dep_count());
        deps = many_deps.data();
    }
    uint32_t nd = 0;
    for (uint32_t i = 0; i < args.explicit_dep_count(); i++) {
        PTO2TaskId d = args.explicit_dep(i);
        if (d.is_invalid()) continue;
        deps[nd++] = d.raw;
    }
    s.deps = nd ? deps : nullptr;
    s.num_deps = nd;
    const CoreTaskPredicate &p = args.predicate();
    if (p.op != PredicateOp::NONE) {
        const ChipTensor *pt = p.operand.tensor;
        if (pt == nullptr || p.operand.ndims != pt->ndims) {
            scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what,
                                "set_predicate: the operand needs a tensor and one index per "
                                "dimension");
            return TaskOutputTensors{};
        }
        uint64_t elem = pt->start_offset;
        for (uint32_t d = 0; d < pt->ndims; d++) elem += uint64_t{p.operand.indices[d]} * pt->strides[d];
        uint64_t es = get_element_size(pt->dtype);
        s.predicate.op = static_cast<uint32_t>(p.op);
        s.predicate.elem_size = static_cast<uint32_t>(es);
        s.predicate.addr = scene_simpler_device_addr(rt, pt->buffer.addr);
        s.predicate.offset = elem * es;
        s.predicate.target = p.target;
    }
    uint64_t id = UINT64_MAX;
    int32_t rc = scene_orch_submit_task(rt->ctx, &s, &id);
    if (rc != SCENE_RT_OK) {
        scene_simpler_failed(rt, rc, what);
        return TaskOutputTensors{};
    }
    PTO2TaskId tid{id};
    for (uint32_t i = 0; i < created; i++) outputs[i].owner_task_id = tid;
    return TaskOutputTensors(tid, outputs, created);
}

inline const ChipTensor &TaskOutputTensors::get_ref(uint32_t index) const & {
    if (index < output_count_) return outputs_[index];
    static const ChipTensor none{};
    PTO2Runtime *rt = current_runtime();
    if (rt != nullptr && !rt->fatal)
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, "TaskOutputTensors::get_ref",
                            "output %u of a task with %u runtime-created outputs", index,
                            output_count_);
    return none;
}

/* ======================================================================
 * The original's calls
 * ====================================================================== */

static inline TaskOutputTensors rt_submit_task(const MixedKernels &mixed_kernels,
                                               const CoreTaskArgs &args) {
    return scene_simpler_submit(mixed_kernels, args, "rt_submit_task");
}

static inline TaskOutputTensors rt_submit_aic_task(int32_t kernel_id, const CoreTaskArgs &args) {
    MixedKernels mk;
    mk.aic_kernel_id = kernel_id;
    return scene_simpler_submit(mk, args, "rt_submit_aic_task");
}

static inline TaskOutputTensors rt_submit_aiv_task(int32_t kernel_id, const CoreTaskArgs &args) {
    MixedKernels mk;
    mk.aiv0_kernel_id = kernel_id;
    return scene_simpler_submit(mk, args, "rt_submit_aiv_task");
}

/* A task that runs no kernel but orders like one: it waits for what its
 * tensors and explicit dependencies say, and its dependents wait for it. */
static inline TaskOutputTensors rt_submit_dummy_task(const CoreTaskArgs &args) {
    return scene_simpler_submit(MixedKernels{}, args, "rt_submit_dummy_task");
}

/* Allocates outputs without a task (each its own runtime-created tensor). */
static inline TaskOutputTensors alloc_tensors(const CoreTaskArgs &args) {
    PTO2Runtime *rt = current_runtime();
    if (rt == nullptr || rt->fatal) return TaskOutputTensors{};
    for (int32_t i = 0; i < args.tensor_count(); i++) {
        if (args.tag(i) != TensorArgType::OUTPUT) {
            scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, "alloc_tensors",
                                "argument %d is not a TensorCreateInfo output", i);
            return TaskOutputTensors{};
        }
    }
    ChipTensor *outputs;
    uint32_t count;
    if (!scene_simpler_create_outputs(rt, args, "alloc_tensors", &outputs, &count))
        return TaskOutputTensors{};
    return TaskOutputTensors(PTO2TaskId::invalid(), outputs, count);
}

static inline TaskOutputTensors alloc_tensors(const TensorCreateInfo create_infos[], uint32_t count) {
    CoreTaskArgs args;
    for (uint32_t i = 0; i < count; i++) args.add_output(create_infos[i]);
    if (args.has_error) {
        rt_report_fatal(PTO2_ERROR_INVALID_ARGS, "%s", args.error_msg);
        return TaskOutputTensors{};
    }
    return alloc_tensors(args);
}

template <typename... CIs>
static inline TaskOutputTensors alloc_tensors(const CIs &...cis) {
    static_assert(sizeof...(cis) > 0, "alloc_tensors requires at least one TensorCreateInfo");
    static_assert((std::is_same_v<std::decay_t<CIs>, TensorCreateInfo> && ...),
                  "alloc_tensors only accepts TensorCreateInfo arguments");
    const TensorCreateInfo infos[] = {cis...};
    return alloc_tensors(infos, static_cast<uint32_t>(sizeof...(cis)));
}

/* A memory scope: what the runtime allocated inside it is freed once its
 * tasks finished. The mode is the original's (AUTO / MANUAL); ours tracks
 * dependencies in both alike (docs/simpler-orchestration.md). */
static inline void rt_scope_begin(PTO2ScopeMode mode = PTO2ScopeMode::AUTO) {
    PTO2Runtime *rt = current_runtime();
    if (rt == nullptr || rt->fatal) return;
    rt->pending_scope_mode = mode;
    int32_t rc = scene_orch_begin_scope(rt->ctx);
    if (rc != SCENE_RT_OK) scene_simpler_failed(rt, rc, "rt_scope_begin");
}

static inline void rt_scope_end() {
    PTO2Runtime *rt = current_runtime();
    if (rt == nullptr || rt->fatal) return;
    int32_t rc = scene_orch_end_scope(rt->ctx);
    if (rc != SCENE_RT_OK) scene_simpler_failed(rt, rc, "rt_scope_end");
}

/* Nothing to do: the runtime finishes the run when the entry returns. */
static inline void rt_orchestration_done() {}

/* The device's mixed clusters (one cube core and two vector cores each). */
static inline int32_t rt_available_cluster_count() {
    PTO2Runtime *rt = current_runtime();
    uint32_t aic = 0, aiv = 0;
    if (rt == nullptr || scene_orch_core_counts(rt->ctx, &aic, &aiv) != SCENE_RT_OK) return 0;
    uint32_t clusters = aic < aiv / 2 ? aic : aiv / 2;
    return static_cast<int32_t>(clusters);
}

/* The device's vector cores. */
static inline int32_t rt_available_aiv_count() {
    PTO2Runtime *rt = current_runtime();
    uint32_t aic = 0, aiv = 0;
    if (rt == nullptr || scene_orch_core_counts(rt->ctx, &aic, &aiv) != SCENE_RT_OK) return 0;
    return static_cast<int32_t>(aiv);
}

/* Byte offset of the element at `indices` (one per dimension) of `t`. */
inline bool scene_simpler_element(const char *what, const ChipTensor &t, uint32_t ndims,
                                  const uint32_t indices[], uint64_t *dev, uint64_t *offset,
                                  uint64_t *es) {
    PTO2Runtime *rt = current_runtime();
    if (ndims != t.ndims) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what,
                            "%u indices for a tensor of %u dimensions", ndims, t.ndims);
        return false;
    }
    uint64_t elem = t.start_offset;
    for (uint32_t d = 0; d < ndims; d++) {
        if (indices[d] >= t.shapes[d]) {
            scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what,
                                "index %u in dimension %u of a tensor of shape %u there", indices[d],
                                d, t.shapes[d]);
            return false;
        }
        elem += uint64_t{indices[d]} * t.strides[d];
    }
    *es = get_element_size(t.dtype);
    *dev = scene_simpler_device_addr(rt, t.buffer.addr);
    *offset = elem * *es;
    if (*dev == 0 || *es == 0) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, what, "the tensor is not device memory");
        return false;
    }
    return true;
}

/* The element at `indices`, once every submitted task writing it
 * finished (its bits, zero-extended; or as a T). */
template <typename T = uint64_t>
static inline T get_tensor_data(const ChipTensor &tensor, uint32_t ndims, const uint32_t indices[]) {
    PTO2Runtime *rt = current_runtime();
    uint64_t dev, off, es, bits = 0;
    if (rt == nullptr || rt->fatal ||
        !scene_simpler_element("get_tensor_data", tensor, ndims, indices, &dev, &off, &es))
        return from_u64<T>(0);
    int32_t rc = scene_orch_read(rt->ctx, dev, off, &bits, es);
    if (rc != SCENE_RT_OK) {
        scene_simpler_failed(rt, rc, "get_tensor_data");
        return from_u64<T>(0);
    }
    return from_u64<T>(bits);
}

/* Writes the element at `indices` once every in-flight task reading or
 * writing it finished; later tasks see it. */
template <typename T = uint64_t>
static inline void set_tensor_data(const ChipTensor &tensor, uint32_t ndims, const uint32_t indices[],
                                   T value) {
    PTO2Runtime *rt = current_runtime();
    uint64_t dev, off, es;
    if (rt == nullptr || rt->fatal ||
        !scene_simpler_element("set_tensor_data", tensor, ndims, indices, &dev, &off, &es))
        return;
    uint64_t bits = to_u64(value);
    int32_t rc = scene_orch_write(rt->ctx, dev, off, &bits, es);
    if (rc != SCENE_RT_OK) scene_simpler_failed(rt, rc, "set_tensor_data");
}

/* RAII scope. */
class PTO2ScopeGuard {
public:
    explicit PTO2ScopeGuard(PTO2ScopeMode mode = PTO2ScopeMode::AUTO) : open_(!rt_is_fatal()) {
        if (open_) rt_scope_begin(mode);
    }
    ~PTO2ScopeGuard() {
        if (open_) rt_scope_end();
    }
    PTO2ScopeGuard(const PTO2ScopeGuard &) = delete;
    PTO2ScopeGuard &operator=(const PTO2ScopeGuard &) = delete;

private:
    bool open_;
};

#define SCENE_SIMPLER_CAT_(x, y) x##y
#define SCENE_SIMPLER_CAT(x, y) SCENE_SIMPLER_CAT_(x, y)
#define PTO2_SCOPE_GUARD(...) \
    [[maybe_unused]] PTO2ScopeGuard SCENE_SIMPLER_CAT(scene_scope_guard_, __COUNTER__){__VA_ARGS__}
/* PTO2_SCOPE() { ... }: a scope around a block. */
#define PTO2_SCOPE(...) \
    if (PTO2ScopeGuard SCENE_SIMPLER_CAT(scene_scope_guard_, __COUNTER__){__VA_ARGS__}; true)

/* ======================================================================
 * host_build_graph's graph functions
 * ====================================================================== */

/* The original records a graph function's sub-graph once and replays it
 * on later calls with the same key; replaying is an optimisation of the
 * same tasks, so here every call runs the function: the tasks and their
 * order are those of the recorded graph. */
inline constexpr uint32_t GRAPH_MAX_TENSOR_ARGS = 128;
inline constexpr uint32_t GRAPH_MAX_SCALAR_ARGS = 64;
using GraphTaskArgs = Arg<GRAPH_MAX_TENSOR_ARGS, GRAPH_MAX_SCALAR_ARGS>;

struct GraphScopeResult {
    bool execute_block{true};
    bool recording{false};
    PTO2TaskId task_id{PTO2TaskId::invalid()};
    void *recording_handle{nullptr};
};
using GraphSubmitResult = GraphScopeResult;

using GraphFunction = void (*)(const GraphTaskArgs &);
template <typename... Config>
using GraphFunctionWithConfig = void (*)(const GraphTaskArgs &, Config...);

template <typename Function>
static inline uint64_t rt_graph_function_id(Function function) {
    static_assert(std::is_pointer_v<Function>, "a graph function is a function pointer");
    uint64_t id = 0;
    memcpy(&id, &function, sizeof(function) < sizeof(id) ? sizeof(function) : sizeof(id));
    return id;
}

inline GraphSubmitResult scene_simpler_graph_checked(const GraphTaskArgs &args) {
    PTO2Runtime *rt = current_runtime();
    if (rt == nullptr || rt->fatal) return GraphSubmitResult{false, false, PTO2TaskId::invalid(), nullptr};
    if (args.has_error) {
        scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, "rt_submit_graph", "%s",
                            args.error_msg ? args.error_msg : "invalid graph arguments");
        return GraphSubmitResult{false, false, PTO2TaskId::invalid(), nullptr};
    }
    for (int32_t i = 0; i < args.tensor_count(); i++) {
        if (args.tag(i) == TensorArgType::OUTPUT) {
            scene_simpler_fatal(rt, PTO2_ERROR_INVALID_ARGS, "rt_submit_graph",
                                "argument %d: a TensorCreateInfo cannot cross a graph boundary", i);
            return GraphSubmitResult{false, false, PTO2TaskId::invalid(), nullptr};
        }
    }
    return GraphSubmitResult{};
}

static inline GraphSubmitResult rt_submit_graph(uint64_t graph_id, GraphFunction function,
                                                const GraphTaskArgs &args) {
    (void)graph_id;
    GraphSubmitResult r = scene_simpler_graph_checked(args);
    if (r.execute_block && function != nullptr) function(args);
    return r;
}

static inline GraphSubmitResult rt_submit_graph(GraphFunction function, const GraphTaskArgs &args) {
    return rt_submit_graph(rt_graph_function_id(function), function, args);
}

template <typename... Config>
static inline GraphSubmitResult rt_submit_graph(uint64_t graph_id,
                                                GraphFunctionWithConfig<Config...> function,
                                                const GraphTaskArgs &args, Config... config) {
    (void)graph_id;
    GraphSubmitResult r = scene_simpler_graph_checked(args);
    if (r.execute_block && function != nullptr) function(args, config...);
    return r;
}

template <typename... Config>
static inline GraphSubmitResult rt_submit_graph(GraphFunctionWithConfig<Config...> function,
                                                const GraphTaskArgs &args, Config... config) {
    return rt_submit_graph(rt_graph_function_id(function), function, args, config...);
}

/* ======================================================================
 * The entry the runtime calls
 * ====================================================================== */

/* A test file's CALLABLE may name other functions (`function_name`,
 * `config_name`); the harness then defines these two. */
#ifndef SCENE_SIMPLER_ENTRY
#define SCENE_SIMPLER_ENTRY aicpu_orchestration_entry
#endif
#ifndef SCENE_SIMPLER_CONFIG
#define SCENE_SIMPLER_CONFIG aicpu_orchestration_config
#endif
#define SCENE_SIMPLER_NAME_(f) #f
#define SCENE_SIMPLER_NAME(f) SCENE_SIMPLER_NAME_(f)

extern "C" {
void SCENE_SIMPLER_ENTRY(const ChipTaskArgs &orch_args);
__attribute__((weak)) PTO2OrchestrationConfig SCENE_SIMPLER_CONFIG(const ChipTaskArgs &orch_args);
}

/* Runs the original's orchestration over the run's arguments. */
extern "C" __attribute__((weak, used, visibility("default"))) int32_t scene_simpler_orchestration(
    SceneOrchCtx *ctx, const SceneOrchArg *args, uint32_t nargs) {
    if (!scene_orch_has_v6(ctx)) {
        scene_orch_fail(ctx, "the original's orchestration API needs a runtime of orchestration ABI "
                             "v6 or later");
        return SCENE_RT_E_ABI;
    }
    PTO2Runtime rt;
    rt.ctx = ctx;
    rt.fatal = false;
    rt.pending_scope_mode = PTO2ScopeMode::AUTO;
    int32_t rc = scene_orch_memory_window(ctx, &rt.device_base, &rt.host_base, &rt.window_len);
    if (rc != SCENE_RT_OK) return rc;
    ChipTaskArgs *chip = new (std::nothrow) ChipTaskArgs();
    ChipTensor *tensors = new (std::nothrow) ChipTensor[CHIP_MAX_TENSOR_ARGS];
    rc = SCENE_RT_OK;
    char msg[256];
    if (chip == nullptr || tensors == nullptr) {
        scene_orch_fail(ctx, "out of host memory for the orchestration's arguments");
        rc = SCENE_RT_E_OOM;
    }
    for (uint32_t i = 0; rc == SCENE_RT_OK && i < nargs; i++) {
        if (args[i].direction == SCENE_DIR_SCALAR) {
            if (chip->scalar_count_ >= CHIP_MAX_SCALAR_ARGS) {
                scene_orch_fail(ctx, "more scalar arguments than an orchestration takes (128)");
                rc = SCENE_RT_E_INVALID;
                break;
            }
            chip->scalars_[chip->scalar_count_++] = args[i].value;
            continue;
        }
        if (chip->tensor_count_ >= CHIP_MAX_TENSOR_ARGS) {
            scene_orch_fail(ctx, "more tensor arguments than an orchestration takes (256)");
            rc = SCENE_RT_E_INVALID;
            break;
        }
        const SceneTensorDesc *d = scene_orch_desc(ctx, i);
        DataType dt = DataType::UINT8;
        uint32_t shapes[MAX_TENSOR_DIMS];
        uint32_t nd = 1;
        shapes[0] = static_cast<uint32_t>(args[i].size);
        if (d != nullptr && d->rank > 0) {
            if (!scene_simpler_from_scene_dtype(d->dtype, &dt) || d->rank > MAX_TENSOR_DIMS) {
                snprintf(msg, sizeof msg,
                         "run argument %u: dtype %u, rank %u has no ChipTensor (at most %d "
                         "dimensions, no f64)",
                         i, d->dtype, d->rank, MAX_TENSOR_DIMS);
                scene_orch_fail(ctx, msg);
                rc = SCENE_RT_E_INVALID;
                break;
            }
            nd = d->rank;
            for (uint32_t k = 0; k < nd; k++) shapes[k] = static_cast<uint32_t>(d->shape[k]);
        }
        ChipTensor &t = tensors[chip->tensor_count_];
        t = ChipTensor(reinterpret_cast<void *>(scene_simpler_host_addr(&rt, args[i].value)),
                       args[i].size, shapes, nd, dt, 0);
        chip->tensors_[chip->tensor_count_++] = &t;
    }
    if (rc == SCENE_RT_OK && SCENE_SIMPLER_CONFIG != nullptr) {
        PTO2OrchestrationConfig config = SCENE_SIMPLER_CONFIG(*chip);
        int got = chip->tensor_count_ + chip->scalar_count_;
        if (config.expected_arg_count > 0 && config.expected_arg_count != got) {
            snprintf(msg, sizeof msg,
                     "%s expects %d arguments, the run passes %d (%d "
                     "tensors, %d scalars): check the scene's signature",
                     SCENE_SIMPLER_NAME(SCENE_SIMPLER_CONFIG), config.expected_arg_count, got, chip->tensor_count_, chip->scalar_count_);
            scene_orch_fail(ctx, msg);
            rc = SCENE_RT_E_INVALID;
        }
    }
    if (rc == SCENE_RT_OK) {
        PTO2Runtime *outer = scene_simpler_runtime_;
        scene_simpler_runtime_ = &rt;
        SCENE_SIMPLER_ENTRY(*chip);
        scene_simpler_runtime_ = outer;
        if (rt.fatal) rc = SCENE_RT_E_ORCH;
    }
    delete chip;
    delete[] tensors;
    return rc;
}

#include "pto_arg_with_deps.h"

#endif /* SCENE_SIMPLER_PTO_ORCHESTRATION_API_H */
