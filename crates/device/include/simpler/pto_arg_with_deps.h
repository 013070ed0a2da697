/*
 * pto_arg_with_deps.h - the original's convenience layer over CoreTaskArgs:
 * CoreTaskArgsWithDeps<N> keeps up to N explicit dependencies itself
 * (add_dep / add_dep_wait), and rt_submit_* take it directly. Ours, after
 * the original's names and behaviour (see pto_orchestration_api.h).
 */
#ifndef SCENE_SIMPLER_PTO_ARG_WITH_DEPS_H
#define SCENE_SIMPLER_PTO_ARG_WITH_DEPS_H

#include "pto_orchestration_api.h"

template <size_t MAX_DEP_COUNT = 16>
class CoreTaskArgsWithDeps : private CoreTaskArgs {
public:
    using CoreTaskArgs::add_inout;
    using CoreTaskArgs::add_input;
    using CoreTaskArgs::add_no_dep;
    using CoreTaskArgs::add_output;
    using CoreTaskArgs::add_scalar;
    using CoreTaskArgs::add_scalars;
    using CoreTaskArgs::add_scalars_i32;
    using CoreTaskArgs::allow_early_resolve;
    using CoreTaskArgs::copy_scalars_from;
    using CoreTaskArgs::error_msg;
    using CoreTaskArgs::has_error;
    using CoreTaskArgs::launch_spec;
    using CoreTaskArgs::set_allow_early_resolve;
    using CoreTaskArgs::set_error;
    using CoreTaskArgs::set_predicate;
    using CoreTaskArgs::set_task_timing_slot;
    using CoreTaskArgs::task_timing_slot;

    /* Depend on these tasks (accumulates; more than MAX_DEP_COUNT fails
     * the submit). */
    template <typename... Ids>
    void add_dep(Ids... ids) {
        add_dep_kind(DEP_WAIT | DEP_RETAIN, ids...);
    }
    /* Ordering only (ours orders on both kinds alike). */
    template <typename... Ids>
    void add_dep_wait(Ids... ids) {
        add_dep_kind(DEP_WAIT, ids...);
    }
    void reset() {
        CoreTaskArgs::reset();
        count_ = 0;
    }
    /* What rt_submit_* submits: the arguments with the deps attached. */
    CoreTaskArgs &finalize_for_submit() {
        CoreTaskArgs::set_dependencies(nullptr, 0);
        CoreTaskArgs::set_dependencies_with_kinds(deps_, kinds_, count_);
        return *this;
    }

private:
    template <typename... Ids>
    void add_dep_kind(DepFlags kind, Ids... ids) {
        static_assert(sizeof...(Ids) >= 1, "add_dep/add_dep_wait: at least one task id");
        static_assert((std::is_same_v<std::decay_t<Ids>, PTO2TaskId> && ...),
                      "add_dep/add_dep_wait: task ids (PTO2TaskId)");
        if (count_ + sizeof...(Ids) > MAX_DEP_COUNT) {
            CoreTaskArgs::set_error(
                "CoreTaskArgsWithDeps::add_dep: more dependencies than MAX_DEP_COUNT");
            return;
        }
        ((kinds_[count_] = kind, deps_[count_] = ids, ++count_), ...);
    }

    PTO2TaskId deps_[MAX_DEP_COUNT];
    DepFlags kinds_[MAX_DEP_COUNT];
    uint32_t count_ = 0;
};

template <size_t N>
static inline TaskOutputTensors rt_submit_task(const MixedKernels &k, CoreTaskArgsWithDeps<N> &a) {
    return rt_submit_task(k, a.finalize_for_submit());
}
template <size_t N>
static inline TaskOutputTensors rt_submit_aic_task(int32_t id, CoreTaskArgsWithDeps<N> &a) {
    return rt_submit_aic_task(id, a.finalize_for_submit());
}
template <size_t N>
static inline TaskOutputTensors rt_submit_aiv_task(int32_t id, CoreTaskArgsWithDeps<N> &a) {
    return rt_submit_aiv_task(id, a.finalize_for_submit());
}
template <size_t N>
static inline TaskOutputTensors rt_submit_dummy_task(CoreTaskArgsWithDeps<N> &a) {
    return rt_submit_dummy_task(a.finalize_for_submit());
}

#endif /* SCENE_SIMPLER_PTO_ARG_WITH_DEPS_H */
