"""Level 3 as a program, in the original project's format: a class whose
own `test_run(self, st_worker)` allocates buffers (`create_buffer`), fills
them, runs one orchestration over views of them (`buffer.tensor(...)`)
and asserts on what the device left. `scene run` records the run while
describing the file (the buffers its tasks name become the case's
tensors, their bytes then its fixtures), runs the tasks as steps, then
runs `test_run` again with the device's outputs in the buffers: its own
asserts are the verdict. numpy arrays, so CI needs no torch."""

import numpy as np
from simpler.task_interface import ArgDirection as D
from simpler.task_interface import CallConfig, DataType, TaskArgs, TensorArgType
from simpler.worker import Worker  # noqa: F401 -- the original's files import it for methods of their own

from simpler_setup import SceneTestCase, scene_test

N = 256
SCALE = 0.5

SCALE_CALLABLE = {
    "name": "scale",
    "orchestration": {
        "source": "../vector_scale/kernels/orchestration/vector_scale_orch.cpp",
        "function_name": "aicpu_orchestration_entry",
        "signature": [D.IN, D.IN, D.OUT],
    },
    "incores": [
        {"func_id": 0, "source": "../vector_scale/kernels/aiv/kernel_add.cpp", "core_type": "aiv"},
        {"func_id": 1, "source": "../vector_scale/kernels/aiv/kernel_scale.cpp", "core_type": "aiv"},
    ],
}


def _one_task(handle, ba, bb, bf):
    def orch_fn(orch, _args, cfg):
        t = TaskArgs()
        t.add_tensor(ba.tensor((N,), DataType.FLOAT32), TensorArgType.INPUT)
        t.add_tensor(bb.tensor((N,), DataType.FLOAT32), TensorArgType.INPUT)
        t.add_tensor(bf.tensor((N,), DataType.FLOAT32), TensorArgType.OUTPUT_EXISTING)
        t.add_scalar(SCALE)
        orch.submit_next_level(handle, t, cfg, worker=0)

    return orch_fn


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestL3Program(SceneTestCase):
    CALLABLE = {"callables": [SCALE_CALLABLE]}
    CASES = [{"name": "program", "platforms": ["a2a3sim", "a2a3"]}]

    def test_run(self, st_worker):
        handle = type(self)._st_chip_handles["scale"]
        ba, bb, bf = (st_worker.create_buffer(N * 4) for _ in range(3))
        a = np.frombuffer(ba.shm.buf, dtype=np.float32)
        b = np.frombuffer(bb.shm.buf, dtype=np.float32)
        f = np.frombuffer(bf.shm.buf, dtype=np.float32)
        a[:] = np.random.rand(N)  # the harness seeds it, alike both times
        b[:] = np.arange(N, dtype=np.float32)
        f[:] = 0
        st_worker.run(_one_task(handle, ba, bb, bf), args=None, config=CallConfig())
        assert np.allclose(f, (a + b) * np.float32(SCALE), rtol=1e-6, atol=1e-6), "f is not (a + b) * scale"

    def test_buffer_backing(self, st_worker):
        """A white-box method of its own (listed, not run)."""
        assert st_worker.create_buffer(64).shm is not None


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestL3ProgramWithFixtures(SceneTestCase):
    """A test_run asking for more pytest fixtures than st_worker: listed."""

    CALLABLE = {"callables": [SCALE_CALLABLE]}
    CASES = TestL3Program.CASES

    def test_run(self, st_worker, st_platform):
        raise AssertionError("not run under scenes")


if __name__ == "__main__":
    SceneTestCase.run_module(__name__)
