/*
 * An orchestration written against the original's API (our
 * include/simpler/pto_orchestration_api.h), in its style: what CI runs in
 * place of the original's own files (issue 39).
 *
 * Args: x [N] f32 (in), y [N] f32 (out), gate [4] i32 (inout),
 * lanes [3] i32 (out), then scalars scale (f32 bits) and g.
 *
 *   gate[0] = g                         set_tensor_data
 *   scaled  = x * scale (4 blocks)      runtime-created output, x by data_as
 *   gate[1] = int(scaled[1] * 10)       get_tensor_data waits for it
 *   scope { acc = 1.0 (initial value, the 6th of six alloc_tensors);
 *           acc[N/2:] += scaled[N/2:]; y = acc }
 *   y[0] = 999 if gate[0] > 0           predicate; untracked write (no_dep)
 *   lanes = {7, 10, 11}                 mixed task: cube + both vector lanes
 *   dummy after the clobber and the mixed task
 *   gate[2] = int(y[0])                 reads y[0] untracked (manual_dep):
 *                                       only the dummy orders it after the
 *                                       clobber
 */
#include <stdint.h>

#include "pto_orchestration_api.h"  // NOLINT(build/include_subdir)

#define FUNC_SCALE 0
#define FUNC_ADD 1
#define FUNC_COPY 2
#define FUNC_CLOBBER 3
#define FUNC_LANE_AIC 4
#define FUNC_LANE_AIV 5
#define FUNC_READBACK 6

extern "C" {

__attribute__((visibility("default"))) PTO2OrchestrationConfig
aicpu_orchestration_config(const ChipTaskArgs &orch_args) {
    (void)orch_args;
    return PTO2OrchestrationConfig{
        .expected_arg_count = 6,
    };
}

__attribute__((visibility("default"))) void aicpu_orchestration_entry(const ChipTaskArgs &orch_args) {
    const ChipTensor &x = orch_args.tensor(0).ref();
    const ChipTensor &y = orch_args.tensor(1).ref();
    const ChipTensor &gate = orch_args.tensor(2).ref();
    const ChipTensor &lanes = orch_args.tensor(3).ref();
    const uint64_t scale_bits = orch_args.scalar(0);
    const int32_t g = static_cast<int32_t>(orch_args.scalar(1));
    if (rt_available_cluster_count() < 1 || rt_available_aiv_count() < 2) {
        rt_report_fatal(PTO2_ERROR_INVALID_ARGS, "a mixed task needs a cluster, found %d",
                        rt_available_cluster_count());
        return;
    }

    const uint32_t n = x.shapes[0];
    uint32_t shapes[1] = {n};
    uint32_t idx0[1] = {0}, idx1[1] = {1};
    set_tensor_data(gate, 1, idx0, g);

    ChipTensor x_ext = make_tensor_external(x.data_as<void>(), shapes, 1, DataType::FLOAT32);
    TensorCreateInfo scaled_ci(shapes, 1, DataType::FLOAT32);
    CoreTaskArgs scale_args;
    scale_args.add_input(x_ext);
    scale_args.add_output(scaled_ci);
    scale_args.add_scalar(scale_bits);
    scale_args.launch_spec.set_block_num(4);
    TaskOutputTensors scaled_out = rt_submit_aiv_task(FUNC_SCALE, scale_args);
    const ChipTensor &scaled = scaled_out.get_ref(0);

    float s1 = get_tensor_data<float>(scaled, 1, idx1);
    set_tensor_data(gate, 1, idx1, static_cast<int32_t>(s1 * 10));

    PTO2TaskId copy_id = PTO2TaskId::invalid();
    PTO2_SCOPE() {
        TensorCreateInfo acc_ci(shapes, 1, DataType::FLOAT32);
        acc_ci.set_initial_value(1.0f);
        // Six at once: the last one is used (each TaskOutputTensors
        // indexes its own outputs, however many a submit made).
        TaskOutputTensors accs = alloc_tensors(acc_ci, acc_ci, acc_ci, acc_ci, acc_ci, acc_ci);
        const ChipTensor &acc = accs.get_ref(5);
        uint32_t half[1] = {n / 2}, off[1] = {n / 2};
        ChipTensor acc_hi = acc.view(half, off);
        ChipTensor scaled_hi = scaled.view(half, off);
        CoreTaskArgs add_args;
        add_args.add_input(scaled_hi);
        add_args.add_inout(acc_hi);
        rt_submit_aiv_task(FUNC_ADD, add_args);
        CoreTaskArgs copy_args;
        copy_args.add_input(acc);
        copy_args.add_output(y);
        copy_id = rt_submit_aiv_task(FUNC_COPY, copy_args).task_id();
    }

    CoreTaskArgs clobber_args;
    clobber_args.add_no_dep(y);
    PTO2TaskId after_copy[1] = {copy_id};
    clobber_args.set_dependencies(after_copy, 1);
    CoreTaskPredicate pred;
    pred.operand.tensor = &gate;
    pred.operand.ndims = 1;
    pred.operand.indices[0] = 0;
    pred.op = PredicateOp::GT;
    pred.target = 0;
    clobber_args.set_predicate(pred);
    PTO2TaskId clobber_id = rt_submit_aic_task(FUNC_CLOBBER, clobber_args).task_id();

    MixedKernels mk;
    mk.aic_kernel_id = FUNC_LANE_AIC;
    mk.aiv0_kernel_id = FUNC_LANE_AIV;
    mk.aiv1_kernel_id = FUNC_LANE_AIV;
    CoreTaskArgs lane_args;
    lane_args.add_output(lanes);
    PTO2TaskId mixed_id = rt_submit_task(mk, lane_args).task_id();

    CoreTaskArgs join_args;
    PTO2TaskId join[2] = {clobber_id, mixed_id};
    join_args.set_dependencies(join, 2);
    PTO2TaskId dummy_id = rt_submit_dummy_task(join_args).task_id();

    uint32_t one[1] = {1};
    ChipTensor y0 = y.view(one, idx0, true);
    CoreTaskArgs readback_args;
    readback_args.add_input(y0);
    readback_args.add_inout(gate);
    PTO2TaskId after_dummy[1] = {dummy_id};
    readback_args.set_dependencies(after_dummy, 1);
    rt_submit_aiv_task(FUNC_READBACK, readback_args);

    LOG_INFO("[orch_api] submitted 8 tasks, gate %d", g);
}

}  // extern "C"
