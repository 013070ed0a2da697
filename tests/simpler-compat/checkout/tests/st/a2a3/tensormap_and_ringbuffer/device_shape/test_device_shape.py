"""The device shape the original's simulator has (24 clusters of one AIC
and two AIV on a2a3, 36 on a5), as its tests see it through the
orchestration API."""

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler_setup import SceneTestCase, TaskArgsBuilder, TensorArg, scene_test


@scene_test(level=2, runtime="tensormap_and_ringbuffer")
class TestDeviceShape(SceneTestCase):
    RTOL = 0
    ATOL = 0

    CALLABLE = {
        "orchestration": {
            "source": "kernels/orchestration/device_shape_orch.cpp",
            "function_name": "aicpu_orchestration_entry",
            "signature": [D.OUT],
        },
        "incores": [],
    }

    CASES = [
        {"name": "a2a3", "platforms": ["a2a3sim"], "params": {"clusters": 24}},
        {"name": "a5", "platforms": ["a5sim"], "params": {"clusters": 36}},
    ]

    def generate_args(self, params):
        return TaskArgsBuilder(TensorArg("shape", np.zeros(2, dtype=np.int32)))

    def compute_golden(self, args, params):
        args.shape[:] = [params["clusters"], 2 * params["clusters"]]
