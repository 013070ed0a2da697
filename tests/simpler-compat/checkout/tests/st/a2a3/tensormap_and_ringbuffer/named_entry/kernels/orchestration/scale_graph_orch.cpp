/*
 * out = (a + b) * scale, with entry and config functions of other names
 * (the original's CALLABLE names them: `function_name`, `config_name`):
 * an add task into a tensor the runtime creates,
 * then a scale task that depends on it, four blocks each. Written against
 * the original's orchestration API, as its examples are.
 *
 * Args: a [N] f32, b [N] f32, out [N] f32, then scalar scale (f32 bits).
 */
#include <stdint.h>

#include "pto_orchestration_api.h"  // NOLINT(build/include_subdir)

#define FUNC_ADD 0
#define FUNC_SCALE 1

extern "C" {

__attribute__((visibility("default"))) PTO2OrchestrationConfig
scale_graph_config(const ChipTaskArgs &orch_args) {
    (void)orch_args;
    return PTO2OrchestrationConfig{
        .expected_arg_count = 4,
    };
}

__attribute__((visibility("default"))) void build_scale_graph(const ChipTaskArgs &orch_args) {
    const ChipTensor &a = orch_args.tensor(0).ref();
    const ChipTensor &b = orch_args.tensor(1).ref();
    const ChipTensor &out = orch_args.tensor(2).ref();
    const uint64_t scale_bits = orch_args.scalar(0);

    uint32_t shapes[1] = {a.shapes[0]};
    TensorCreateInfo sum_ci(shapes, 1, DataType::FLOAT32);
    CoreTaskArgs add;
    add.add_input(a, b);
    add.add_output(sum_ci);
    add.launch_spec.set_block_num(4);
    TaskOutputTensors sum = rt_submit_aiv_task(FUNC_ADD, add);

    CoreTaskArgs scale;
    scale.add_input(sum.get_ref(0));
    scale.add_output(out);
    scale.add_scalar(scale_bits);
    scale.launch_spec.set_block_num(4);
    rt_submit_aiv_task(FUNC_SCALE, scale);
}

}  // extern "C"
