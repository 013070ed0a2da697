"""The scene-test class API as the original's `test_*.py` files use it,
written by scenes from its names and behaviour
(tests/simpler-compat/design/test-files.md)."""
from __future__ import annotations

import copy
import enum
import inspect
import sys
from pathlib import Path
from typing import Any, NamedTuple

_ALLOWED_CONFIG = {"aicpu_thread_num", "runtime_env", "device_count", "num_sub_workers"}
_ALLOWED_RUNTIME_ENV = {"ring_task_window", "ring_heap", "ring_dep_pool"}


class SceneTestLevel(enum.IntEnum):
    CHIP = 2
    NODE = 3
    NETWORK1 = 4


def _level(level):
    try:
        return SceneTestLevel(int(level))
    except ValueError:
        raise ValueError(f"Unsupported scene test level {level!r}") from None


def scene_level(level):
    def decorate(obj):
        obj._st_level = _level(level)
        return obj

    return decorate


class TensorArg(NamedTuple):
    name: str
    value: Any


class Scalar(NamedTuple):
    name: str
    value: Any


class TaskArgsBuilder:
    def __init__(self, *specs):
        object.__setattr__(self, "_specs", [])
        for s in specs:
            if isinstance(s, TensorArg):
                self._add(s, tensor=True)
            elif isinstance(s, Scalar):
                self._add(s, tensor=False)

    def _add(self, spec, tensor):
        if any(s.name == spec.name for s in self._specs):
            raise ValueError(f"TaskArgsBuilder: duplicate argument name {spec.name!r}")
        if hasattr(type(self), spec.name) or spec.name.startswith("_"):
            raise ValueError(f"TaskArgsBuilder: argument name {spec.name!r} conflicts with builder attributes/methods")
        if tensor and any(isinstance(s, Scalar) for s in self._specs):
            raise ValueError(f"Cannot add tensor after scalar: {spec.name!r}")
        self._specs.append(spec)

    def add_tensor(self, name, value):
        self._add(TensorArg(name, value), tensor=True)

    def add_scalar(self, name, value):
        self._add(Scalar(name, value), tensor=False)

    def __getattr__(self, name):
        if not name.startswith("_"):
            for s in object.__getattribute__(self, "_specs"):
                if s.name == name:
                    return s.value
        raise AttributeError(f"TaskArgsBuilder has no argument {name!r}")

    def clone(self):
        out = TaskArgsBuilder()
        for s in self._specs:
            v = s.value
            if isinstance(s, TensorArg):
                v = v.clone() if hasattr(v, "clone") else copy.deepcopy(v)
            else:
                v = copy.copy(v)
            out._specs.append(type(s)(s.name, v))
        return out

    @property
    def specs(self):
        return self._specs

    def tensor_names(self):
        return [s.name for s in self._specs if isinstance(s, TensorArg)]


class CallableNamespace:
    def __init__(self, entries):
        self._entries = dict(entries)
        self._kept = []

    def __getattr__(self, name):
        try:
            return self.__dict__["_entries"][name]
        except KeyError:
            raise AttributeError(name) from None

    def keep(self, *objs):
        self._kept.extend(objs)
        return objs[0] if len(objs) == 1 else objs


def _check_mapping(where, field, value, allowed):
    """`value` (a case's `config` or its `runtime_env`) is a mapping of
    allowed keys; the errors name the class, the case and the field."""
    if not isinstance(value, dict):
        raise TypeError(f"{where}: {field} must be a mapping")
    bad = set(value) - allowed
    if bad:
        raise ValueError(f"{where}: unknown {field} keys {sorted(bad)}; allowed {sorted(allowed)}")


def _check_configs(cls):
    """Every case's `config` (and its `runtime_env`), checked when the
    class is made, as the original does."""
    for case in getattr(cls, "CASES", []) or []:
        if not isinstance(case, dict):
            raise TypeError(f"{cls.__name__}: a case must be a mapping")
        where = f"{cls.__name__}::{case.get('name')}"
        config = case.get("config", {})
        _check_mapping(where, "config", config, _ALLOWED_CONFIG)
        _check_mapping(where, "runtime_env", config.get("runtime_env", {}), _ALLOWED_RUNTIME_ENV)


def _resolve(entry, base):
    if isinstance(entry, dict) and isinstance(entry.get("source"), str) and not Path(entry["source"]).is_absolute():
        entry["source"] = str(base / entry["source"])


def _defining_file(cls):
    """The file that defines `cls`: its module's, else (a module being
    executed that is not in `sys.modules` yet) the file of the class
    statement that the decorator is applied in."""
    try:
        return inspect.getfile(cls)
    except TypeError:
        return sys._getframe(2).f_code.co_filename


def scene_test(level, runtime):
    def decorate(cls):
        _check_configs(cls)
        cls._st_level = _level(level)
        cls._st_runtime = runtime
        base = Path(_defining_file(cls)).parent
        spec = getattr(cls, "CALLABLE", {}) or {}
        if cls._st_level == SceneTestLevel.CHIP:
            _resolve(spec.get("orchestration"), base)
            for inc in spec.get("incores", []):
                _resolve(inc, base)
        else:
            for entry in spec.get("callables", []):
                if isinstance(entry, dict):
                    _resolve(entry.get("orchestration"), base)
                    for inc in entry.get("incores", []):
                        _resolve(inc, base)
        return cls

    return decorate


def is_manual_for_platform(manual, platform):
    """Whether a case's `manual` makes it manual on `platform`: a string
    names the one platform, a list / tuple / set the platforms, anything
    else counts as a bool (`True`: everywhere; missing / `None` / `False`:
    nowhere)."""
    if manual is None or manual is False:
        return False
    if isinstance(manual, str):
        return manual == platform
    if isinstance(manual, (list, tuple, set, frozenset)):
        return platform in manual
    return bool(manual)


def _allclose(actual, expected, rtol, atol):
    """torch.allclose for torch tensors; the same rule (|a - e| <= atol +
    rtol * |e|, NaN never equal) for numpy arrays. Returns (close,
    max_diff)."""
    if hasattr(actual, "float") and hasattr(actual, "abs"):  # torch
        import torch

        ok = torch.allclose(actual, expected, rtol=rtol, atol=atol)
        diff = (actual.float() - expected.float()).abs().max().item() if actual.numel() else 0.0
        return ok, diff
    import numpy as np

    a, e = np.asarray(actual), np.asarray(expected)
    ok = a.shape == e.shape and bool(np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=False))
    d = np.abs(a.astype(np.float64) - e.astype(np.float64)) if a.shape == e.shape else np.array([np.inf])
    return ok, float(d.max()) if d.size else 0.0


def _compare_outputs(test_args, golden_args, output_names, rtol, atol):
    for name in output_names:
        actual = getattr(test_args, name)
        expected = getattr(golden_args, name)
        ok, diff = _allclose(actual, expected, rtol, atol)
        if not ok:
            raise AssertionError(f"Golden mismatch on {name!r}: max_diff={diff}, rtol={rtol}, atol={atol}")


class SceneTestCase:
    CALLABLE: dict = {}
    CASES: list = []
    RTOL = 1e-5
    ATOL = 1e-5
    SKIP_GOLDEN = False
    RUNTIME_ENV: dict = {}

    def generate_args(self, params):
        raise NotImplementedError

    def compute_golden(self, args, params):
        raise NotImplementedError

    def compare_outputs(self, test_args, golden_args, output_names, params):
        _compare_outputs(test_args, golden_args, output_names, self.RTOL, self.ATOL)

    @staticmethod
    def run_module(module_name):
        raise SystemExit("run these files with `scene run <file>`")


# Names white-box files import; not part of the flow scenes drives.
def _unsupported(name):
    def f(*a, **k):
        raise NotImplementedError(f"simpler_setup.scene_test.{name} is not available under scenes")

    return f


for _n in ["_outputs_dir", "_sanitize_for_filename", "_build_chip_task_args", "_build_l2_ref_args",
           "_rehosted_buffer_for"]:
    globals()[_n] = _unsupported(_n)


class ArgRef:
    """One of the case's TensorArgs named as a level-3 task argument: what
    the original's rehosted buffer handle names. scenes holds the tensor's
    value on the host and gives each task the current one."""

    __slots__ = ("name", "shapes", "dtype")

    def __init__(self, name, shapes=None, dtype=None):
        self.name = name
        self.shapes = shapes
        self.dtype = dtype

    def __repr__(self):
        return f"ArgRef({self.name!r})"


def _rehosted_ref(test_args, name):
    """The case's tensor `name` as a task argument."""
    if name not in test_args.tensor_names():
        raise ValueError(f"L3 tensor arg {name!r} is not a TensorArg of the case")
    return ArgRef(name)


def _rehosted_ref_for(test_args, tensor):
    """The case's tensor that is `tensor` (the same object) as a task argument."""
    for s in test_args.specs:
        if isinstance(s, TensorArg) and s.value is tensor:
            return ArgRef(s.name)
    raise ValueError("tensor is not a rehosted arg (not one of the case's TensorArgs)")


def _build_l3_task_args(test_args, orch_signature, worker=None):
    """Every TensorArg of the case in order, tagged from the orchestration's
    signature (IN: INPUT, OUT: OUTPUT_EXISTING, INOUT: INOUT), then its
    Scalars: (TaskArgs, names of the OUT / INOUT tensors)."""
    from simpler.task_interface import ArgDirection, TaskArgs, TensorArgType

    tags = {
        ArgDirection.IN: TensorArgType.INPUT,
        ArgDirection.OUT: TensorArgType.OUTPUT_EXISTING,
        ArgDirection.INOUT: TensorArgType.INOUT,
    }
    chip_args, outputs = TaskArgs(), []
    i = 0
    for s in test_args.specs:
        if isinstance(s, TensorArg):
            if i >= len(orch_signature):
                raise ValueError(
                    f"TensorArg '{s.name}' at index {i} has no matching entry in orchestration signature "
                    f"(length {len(orch_signature)}). Update CALLABLE['orchestration']['signature'] to "
                    f"match generate_args()."
                )
            d = orch_signature[i]
            chip_args.add_tensor(ArgRef(s.name), tags.get(d, TensorArgType.INPUT))
            if d in (ArgDirection.OUT, ArgDirection.INOUT):
                outputs.append(s.name)
            i += 1
        else:
            chip_args.add_scalar(s.value)
    return chip_args, outputs
