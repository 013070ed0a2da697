/*
 * acc += x, `rounds` times (a chain of tasks on one INOUT tensor), then
 * count[0] = N. Args: acc [N] f32 (inout), x [N] f32 (in), count [1] i32
 * (out), then scalar rounds (int64).
 */
#include <stdint.h>

#include "pto_orchestration_api.h"  // NOLINT(build/include_subdir)

#define FUNC_ACCUMULATE 0

extern "C" {

__attribute__((visibility("default"))) void aicpu_orchestration_entry(const ChipTaskArgs &orch_args) {
    const ChipTensor &acc = orch_args.tensor(0).ref();
    const ChipTensor &x = orch_args.tensor(1).ref();
    const ChipTensor &count = orch_args.tensor(2).ref();
    const int64_t rounds = static_cast<int64_t>(orch_args.scalar(0));
    for (int64_t r = 0; r < rounds; r++) {
        CoreTaskArgs args;
        args.add_inout(acc);
        args.add_input(x);
        args.add_output(count);
        rt_submit_aiv_task(FUNC_ACCUMULATE, args);
    }
}

}  // extern "C"
