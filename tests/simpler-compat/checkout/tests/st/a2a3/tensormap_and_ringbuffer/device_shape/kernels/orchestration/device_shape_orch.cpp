/*
 * shape = {clusters, AIV cores} as the runtime reports them: the original's
 * tests size SPMD launches by rt_available_cluster_count(), so its device
 * shape is part of what they expect. Args: shape [2] i32 (out).
 */
#include <stdint.h>

#include "pto_orchestration_api.h"  // NOLINT(build/include_subdir)

extern "C" {

__attribute__((visibility("default"))) void aicpu_orchestration_entry(const ChipTaskArgs &orch_args) {
    const ChipTensor &shape = orch_args.tensor(0).ref();
    uint32_t idx0[1] = {0}, idx1[1] = {1};
    set_tensor_data(shape, 1, idx0, static_cast<int32_t>(rt_available_cluster_count()));
    set_tensor_data(shape, 1, idx1, static_cast<int32_t>(rt_available_aiv_count()));
}

}  // extern "C"
