"""A class of the original's format whose orchestration has entry and
config functions of other names (`function_name`, `config_name`), and a
test method of its own: its cases run; the method is listed as not run
(it would drive the original's private machinery)."""

import ctypes

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler_setup import Scalar, SceneTestCase, TaskArgsBuilder, TensorArg, scene_test

KERNELS = "../vector_scale/kernels"


@scene_test(level=2, runtime="tensormap_and_ringbuffer")
class TestNamedEntry(SceneTestCase):
    RTOL = 1e-6
    ATOL = 1e-6

    CALLABLE = {
        "orchestration": {
            "source": "kernels/orchestration/scale_graph_orch.cpp",
            "function_name": "build_scale_graph",
            "config_name": "scale_graph_config",
            "signature": [D.IN, D.IN, D.OUT],
        },
        "incores": [
            {"func_id": 0, "name": "ADD", "source": f"{KERNELS}/aiv/kernel_add.cpp", "core_type": "aiv"},
            {"func_id": 1, "name": "SCALE", "source": f"{KERNELS}/aiv/kernel_scale.cpp", "core_type": "aiv"},
        ],
    }

    CASES = [
        {"name": "named", "platforms": ["a2a3sim", "a2a3"], "params": {"n": 512, "scale": 1.5}},
    ]

    def generate_args(self, params):
        n = params["n"]
        return TaskArgsBuilder(
            TensorArg("a", np.random.rand(n).astype(np.float32)),
            TensorArg("b", np.random.rand(n).astype(np.float32)),
            TensorArg("out", np.zeros(n, dtype=np.float32)),
            Scalar("scale", ctypes.c_float(params["scale"])),
        )

    def compute_golden(self, args, params):
        args.out[:] = (args.a + args.b) * np.float32(args.scale.value)

    def test_prepared_twice(self):
        raise NotImplementedError("drives the original's ChipWorker")


if __name__ == "__main__":
    SceneTestCase.run_module(__name__)
