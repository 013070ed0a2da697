"""out = (a + b) * scale on two vector kernels: a test file in the
original project's format (hw-native-sys/simpler's `SceneTestCase`), which
`scene run` runs unchanged. Fixtures are numpy arrays here (the original's
files use torch tensors; both are taken), so CI needs no torch."""

import ctypes

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler_setup import Scalar, SceneTestCase, TaskArgsBuilder, TensorArg, scene_test


@scene_test(level=2, runtime="tensormap_and_ringbuffer")
class TestVectorScale(SceneTestCase):
    RTOL = 1e-6
    ATOL = 1e-6

    CALLABLE = {
        "orchestration": {
            "source": "kernels/orchestration/vector_scale_orch.cpp",
            "function_name": "aicpu_orchestration_entry",
            "signature": [D.IN, D.IN, D.OUT],
        },
        "incores": [
            {"func_id": 0, "name": "ADD", "source": "kernels/aiv/kernel_add.cpp", "core_type": "aiv"},
            {"func_id": 1, "name": "SCALE", "source": "kernels/aiv/kernel_scale.cpp", "core_type": "aiv"},
        ],
    }

    CASES = [
        {"name": "default", "platforms": ["a2a3sim", "a2a3"], "params": {"n": 256, "scale": 0.5}},
        {"name": "wide", "platforms": ["a2a3sim", "a2a3"], "manual": ["a2a3sim"], "params": {"n": 4096, "scale": 3.0}},
        {"name": "card_only", "platforms": ["a2a3"], "params": {"n": 1 << 22, "scale": 2.0}},
    ]

    def generate_args(self, params):
        n = params["n"]
        a = np.random.rand(n).astype(np.float32)
        b = np.random.rand(n).astype(np.float32)
        out = np.zeros(n, dtype=np.float32)
        return TaskArgsBuilder(
            TensorArg("a", a),
            TensorArg("b", b),
            TensorArg("out", out),
            Scalar("scale", ctypes.c_float(params["scale"])),
        )

    def compute_golden(self, args, params):
        args.out[:] = (args.a + args.b) * np.float32(args.scale.value)


if __name__ == "__main__":
    SceneTestCase.run_module(__name__)
