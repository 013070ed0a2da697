"""Level 3 in the original project's format: a Python orchestration on its
Worker API (`submit_next_level`, `submit_next_level_group`, `submit_sub`)
over the case's tensors, which `scene run` records and runs as level-3
steps: a chip task on every worker of the group, then a Python sub task
that depends on their outputs. numpy tensors (the original's files use
torch ones), so CI needs no torch."""

import ctypes

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler.task_interface import TaskArgs, TensorArgType

from simpler_setup import Scalar, SceneTestCase, TaskArgsBuilder, TensorArg, scene_test
from simpler_setup.scene_test import _build_l3_task_args, _rehosted_ref, _rehosted_ref_for

KERNELS = "../vector_scale/kernels"

SCALE_CALLABLE = {
    "name": "scale",
    "orchestration": {
        "source": f"{KERNELS}/orchestration/vector_scale_orch.cpp",
        "function_name": "aicpu_orchestration_entry",
        "signature": [D.IN, D.IN, D.OUT],
    },
    "incores": [
        {"func_id": 0, "source": f"{KERNELS}/aiv/kernel_add.cpp", "core_type": "aiv"},
        {"func_id": 1, "source": f"{KERNELS}/aiv/kernel_scale.cpp", "core_type": "aiv"},
    ],
}


def total(args):
    """Sub callable: g = (f0 + f1) * k, k its task's scalar, written in
    place into g's buffer."""
    f0, f1, g = (np.frombuffer(a.buffer, dtype=np.float32) for a in args)
    g[:] = (f0 + f1) * args.scalar(0)


def run_pair(orch, callables, task_args, config):
    """Worker r: f_r = (a_r + b_r) * scale, both in one group task; then
    the sub task `total`, which reads f0 and f1 and writes g (scaled by
    the task's scalar, 2)."""

    def chip(a, b, out):
        t = TaskArgs()
        t.add_tensor(_rehosted_ref_for(task_args, a), TensorArgType.INPUT)
        t.add_tensor(_rehosted_ref_for(task_args, b), TensorArgType.INPUT)
        t.add_tensor(_rehosted_ref_for(task_args, out), TensorArgType.OUTPUT_EXISTING)
        t.add_scalar(task_args.scale)
        return t

    a = task_args
    group = [chip(a.a0, a.b0, a.f0), chip(a.a1, a.b1, a.f1)]
    callables.keep(*group)
    # Members in any order: worker 1's arguments first.
    orch.submit_next_level_group(callables.scale, group[::-1], config, workers=[1, 0])

    sub = TaskArgs()
    sub.add_tensor(_rehosted_ref(task_args, "f0"), TensorArgType.INPUT)
    sub.add_tensor(_rehosted_ref(task_args, "f1"), TensorArgType.INPUT)
    sub.add_tensor(_rehosted_ref(task_args, "g"), TensorArgType.OUTPUT_EXISTING)
    sub.add_scalar(2)
    orch.submit_sub(callables.total, sub)


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestL3Pair(SceneTestCase):
    CALLABLE = {"orchestration": run_pair, "callables": [SCALE_CALLABLE, {"name": "total", "callable": total}]}

    CASES = [
        {"name": "pair", "platforms": ["a2a3sim", "a2a3"], "config": {"device_count": 2, "num_sub_workers": 1},
         "params": {"n": 512, "scale": 1.5}},
    ]

    def generate_args(self, params):
        n = params["n"]
        t = [TensorArg(name, np.random.rand(n).astype(np.float32)) for name in ("a0", "b0", "a1", "b1")]
        out = [TensorArg(name, np.zeros(n, dtype=np.float32)) for name in ("f0", "f1", "g")]
        return TaskArgsBuilder(*t, *out, Scalar("scale", ctypes.c_float(params["scale"])))

    def compute_golden(self, args, params):
        s = np.float32(params["scale"])
        args.f0[:] = (args.a0 + args.b0) * s
        args.f1[:] = (args.a1 + args.b1) * s
        args.g[:] = (args.f0 + args.f1) * 2


def run_one(orch, callables, task_args, config):
    """One chip task on worker 0 over every TensorArg, tagged from the
    signature (the original's `_build_l3_task_args`)."""
    chip_args, _ = _build_l3_task_args(task_args, callables.scale_sig)
    orch.submit_next_level(callables.scale, chip_args, config, worker=0)


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestL3One(SceneTestCase):
    CALLABLE = {"orchestration": run_one, "callables": [SCALE_CALLABLE]}

    CASES = [{"name": "one", "platforms": ["a2a3sim", "a2a3"], "config": {"device_count": 1}, "params": {}}]

    def generate_args(self, params):
        return TaskArgsBuilder(
            TensorArg("a", np.full(256, 2.0, dtype=np.float32)),
            TensorArg("b", np.full(256, 3.0, dtype=np.float32)),
            TensorArg("f", np.zeros(256, dtype=np.float32)),
            Scalar("scale", ctypes.c_float(0.5)),
        )

    def compute_golden(self, args, params):
        args.f[:] = (args.a + args.b) * np.float32(0.5)


def run_half(orch, callables, task_args, config):
    """A chip task on worker 1 of 2 only: not a step of the whole group."""
    chip_args, _ = _build_l3_task_args(task_args, callables.scale_sig)
    orch.submit_next_level(callables.scale, chip_args, config, worker=1)


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestL3Half(SceneTestCase):
    CALLABLE = {"orchestration": run_half, "callables": [SCALE_CALLABLE]}
    CASES = TestL3One.CASES
    generate_args = TestL3One.generate_args
    compute_golden = TestL3One.compute_golden
