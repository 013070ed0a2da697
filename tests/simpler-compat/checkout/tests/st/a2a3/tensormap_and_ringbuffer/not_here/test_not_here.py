"""Classes of the original's format that `scene run` lists as not run
here, each with its reason: level 3 whose own test_run uses what scenes'
recording st_worker does not have (it has create_buffer and one run) and
white-box (its own run of a case)."""

from simpler.task_interface import ArgDirection as D
from simpler_setup import SceneTestCase, scene_test


def orchestrate(orch, callables, task_args, config):
    raise NotImplementedError


@scene_test(level=3, runtime="tensormap_and_ringbuffer")
class TestLevelThree(SceneTestCase):
    CALLABLE = {"orchestration": orchestrate, "callables": []}
    CASES = [{"name": "two_chips", "platforms": ["a2a3sim"], "config": {"device_count": 2}, "params": {}}]

    def test_run(self, st_worker):
        # A runtime-managed intermediate of the original's Worker, which
        # scenes' recording st_worker does not have.
        st_worker.alloc_shared_tensor((16,), 0)


@scene_test(level=2, runtime="tensormap_and_ringbuffer")
class TestWhiteBox(SceneTestCase):
    CALLABLE = {
        "orchestration": {"source": "missing.cpp", "function_name": "aicpu_orchestration_entry",
                          "signature": [D.IN]},
        "incores": [],
    }
    CASES = [{"name": "slots", "platforms": ["a2a3sim"], "params": {}}]

    def _run_and_validate_l2(self, *args, **kwargs):
        raise NotImplementedError
