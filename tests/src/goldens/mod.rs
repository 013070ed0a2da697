//! Golden functions, registered by the name scenes give in `golden = "..."`.

mod collectives;
mod common;
mod compare_demo;
mod decode_layer;
mod device_memory;
mod dtype_copy;
mod gemm;
mod host_steps;
mod hosted_names;
mod hosted_pipe_state;
mod manual_dep_columns;
mod matmul;
mod mixed_example;
mod mixed_pipeline;
mod optional_list_params;
mod paged_attention;
mod pto_pipe;
mod rmsnorm;
mod scalar_data;
mod scope_loop;
mod softmax;
mod spmd_multiblock_mix;
mod tile_add;
mod vector_example;

use scene_harness::GoldenRegistry;

pub fn register(r: GoldenRegistry) -> GoldenRegistry {
    r.register("vector_example", vector_example::golden)
        .register("gemm", gemm::golden)
        .register("matmul", matmul::golden)
        .register("softmax", softmax::golden)
        .register("rmsnorm", rmsnorm::golden)
        .register("decode_layer", decode_layer::golden)
        .register("scalar_data", scalar_data::golden)
        .register("paged_attention", paged_attention::golden)
        .register("scope_loop", scope_loop::golden)
        .register("dtype_copy", dtype_copy::golden)
        .register("compare_demo", compare_demo::golden)
        .register("allreduce_sum", collectives::allreduce_sum)
        .register("allgather", collectives::allgather)
        .register("allgather_window", collectives::allgather_window)
        .register("broadcast", collectives::broadcast)
        .register("reduce_scatter", collectives::reduce_scatter)
        .register("all_to_all", collectives::all_to_all)
        .register("ffn_tp_parallel", collectives::ffn_tp_parallel)
        .register("rank_local_linear", collectives::rank_local_linear)
        .register("l3_host_dependency", host_steps::l3_host_dependency)
        .register("tile_add", tile_add::golden)
        .register("optional_list_params", optional_list_params::golden)
        .register("device_memory", device_memory::golden)
        .register("manual_dep_columns", manual_dep_columns::golden)
        .register("mixed_example", mixed_example::golden)
        .register("hosted_pipe_state", hosted_pipe_state::golden)
        .register("hosted_names", hosted_names::golden)
        .register("pto_pipe", pto_pipe::golden)
        .register("mixed_pipeline", mixed_pipeline::golden)
        .register("spmd_multiblock_mix", spmd_multiblock_mix::golden)
}
