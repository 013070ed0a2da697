"""acc += x, `rounds` times, on an INOUT tensor: a test file in the
original project's format whose class overrides `compare_outputs` (the
default comparison for `acc`, an exact check of its own for `count`)."""

import ctypes

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler_setup import Scalar, SceneTestCase, TaskArgsBuilder, TensorArg, scene_test


@scene_test(level=2, runtime="tensormap_and_ringbuffer")
class TestAccumulate(SceneTestCase):
    RTOL = 1e-5
    ATOL = 1e-5

    CALLABLE = {
        "orchestration": {
            "source": "kernels/orchestration/accumulate_orch.cpp",
            "function_name": "aicpu_orchestration_entry",
            "signature": [D.INOUT, D.IN, D.OUT],
        },
        "incores": [
            {"func_id": 0, "source": "kernels/aiv/kernel_accumulate.cpp", "core_type": "aiv"},
        ],
    }

    CASES = [
        {"name": "three_rounds", "platforms": ["a2a3sim", "a5sim"], "params": {"n": 128, "rounds": 3}},
        {"name": "one_round", "platforms": ["a2a3sim"], "params": {"n": 64, "rounds": 1},
         "config": {"aicpu_thread_num": 2}},
    ]

    def generate_args(self, params):
        n = params["n"]
        return TaskArgsBuilder(
            TensorArg("acc", np.full(n, 1.0, dtype=np.float32)),
            TensorArg("x", np.random.rand(n).astype(np.float32)),
            TensorArg("count", np.zeros(1, dtype=np.int32)),
            Scalar("rounds", ctypes.c_int64(params["rounds"])),
        )

    def compute_golden(self, args, params):
        for _ in range(params["rounds"]):
            args.acc[:] = args.acc + args.x
        args.count[0] = params["n"]

    def compare_outputs(self, test_args, golden_args, output_names, params):
        assert output_names == ["acc", "count"], output_names
        super().compare_outputs(test_args, golden_args, ["acc"], params)
        got, want = int(test_args.count[0]), int(golden_args.count[0])
        assert got == want, f"count is {got}, expected {want}"


if __name__ == "__main__":
    SceneTestCase.run_module(__name__)
