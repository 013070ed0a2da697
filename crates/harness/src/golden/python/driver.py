# The scene harness's Python worker (embedded in scene-harness, run with
# `python3 -u -c <this file>`). One process serves the Python goldens and
# fixtures of one scene: modules a scene imports never reach another
# scene's code.
#
# Protocol: one JSON object per line. The worker's original stdout is the
# reply channel; everything user code prints (Python or C) goes to stderr.
# Tensors never travel as text: they are .npy files in a directory the
# harness names, bf16 as uint16 bit patterns (numpy has no bfloat16).
#
#   start:   {"hello": 1, "python": ..., "numpy": ..., "torch": ... | null,
#             "packages": ["name==version", ...]}
#            or {"hello": 1, "error": "..."} (and exit)
#   request: {"op": "inputs" | "golden" | "compare" | "compare_case" | "replay_case" | "host" |
#             "describe", "id": n, ...}  ->
#            {"id": n, "ok": true, "files": [...], "opaque": [...], ...} or
#            {"id": n, "ok": false, "error": "...", "traceback": "..." | null}
#
# `compare` (after the device stage) calls the scene's
# `FUNCTION(name, actual, expected, params)` and replies
# {"passed": bool, "detail": "..."} besides the above.
#
# `compare_case` calls a test file's class's own compare_outputs on every
# output at once; `replay_case` runs a level-3 class's own
# test_run(self, st_worker) again with the device's outputs (below):
# both reply {"passed": bool, "detail": "..."}. `describe` lists a test
# file's classes and cases.
#
# `host` (a level-3 host step, between chip steps) calls the scene's
# `FUNCTION(tensors, params)` on the step's tensors (a dict of arrays,
# filled in place or returned in a dict) and saves every one of them to its
# "out" path; the harness takes back the written ones.
#
# Every string of a reply is valid UTF-8 (a lone surrogate, which JSON
# would escape as \udcXX and the harness's parser refuses, is sent as that
# text), and a reply JSON cannot carry (NaN) is replaced by an error reply
# to the same request: nothing user code returns can break the protocol.
#
# `files`: every file outside the interpreter's own directories that the
# scene's code was loaded from (sys.modules) or opened for reading, so far
# in this worker; `opaque`: modules loaded from something the harness
# cannot digest (a C extension, a zip), which make the golden uncacheable.
#
# A golden that forks must not answer for its parent: a child that comes
# back into this loop exits, and its copies of stdin and of the reply
# channel are /dev/null from the moment it is forked.

import importlib.util
import json
import os
import sys
import traceback

# Both protocol pipes move off fds 0 and 1 (to fds no child inherits:
# os.dup's are not inheritable), so neither user code nor a subprocess it
# starts can read a request or write a reply.
_proto_fd = os.dup(1)
_proto = os.fdopen(_proto_fd, "w", encoding="utf-8")
_requests_fd = os.dup(0)
_requests = os.fdopen(_requests_fd, "r", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.close(_devnull)
sys.stdin = open(os.devnull, "r")
_pid = os.getpid()


def _forked_child():
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, _requests_fd)
    os.dup2(devnull, _proto_fd)
    os.close(devnull)


os.register_at_fork(after_in_child=_forked_child)


def _only_parent():
    """A forked child that came back into the driver leaves, silently."""
    if os.getpid() != _pid:
        os._exit(0)


def _clean(obj):
    """`obj` with every string made valid UTF-8: a lone surrogate (what
    os.fsdecode makes of a byte that is not UTF-8, or '\\udc80' in user code)
    becomes the text `\\udc80`. JSON would escape it as \\udc80, which the
    harness's parser (rightly) refuses, taking the reply for a broken
    worker."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, dict):
        return {_clean(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _encode(obj):
    """One reply line; a reply JSON cannot carry (NaN, an object) becomes an
    error reply to the same request instead of a line the harness refuses."""
    try:
        return json.dumps(_clean(obj), allow_nan=False)
    except (TypeError, ValueError) as e:
        return json.dumps(
            _clean(
                {
                    "id": obj.get("id") if isinstance(obj, dict) else None,
                    "ok": False,
                    "error": "the worker's reply cannot be sent as JSON: %s" % e,
                    "traceback": None,
                }
            )
        )


def _send(obj):
    _only_parent()
    _proto.write(_encode(obj) + "\n")
    _proto.flush()


try:
    import numpy as np
except Exception as e:  # noqa: BLE001 - any import failure means "no numpy"
    _send({"hello": 1, "error": "numpy cannot be imported: %s" % e})
    sys.exit(0)

_torch = None
try:
    import torch as _torch  # noqa: F401
except Exception:  # noqa: BLE001
    _torch = None

def _system_dirs():
    """The interpreter's own directories (stdlib, site-packages): their
    files are versioned by the interpreter and the package list."""
    import site
    import sysconfig

    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(p)
    try:
        dirs.update(site.getsitepackages())
    except Exception:  # noqa: BLE001 - old virtualenvs lack it
        pass
    try:
        dirs.add(site.getusersitepackages())
    except Exception:  # noqa: BLE001
        pass
    return tuple(sorted({os.path.realpath(d).rstrip("/") + "/" for d in dirs if d}))


SYSTEM_DIRS = _system_dirs()


def _packages():
    try:
        import importlib.metadata as md

        return sorted(
            {"%s==%s" % (d.metadata["Name"], d.version) for d in md.distributions()}
        )
    except Exception as e:  # noqa: BLE001 - a broken dist must not stop the worker
        return ["unknown: %s" % e]


_opened = set()


def _audit(event, args):
    if event != "open" or os.getpid() != _pid:
        return
    path = args[0]
    if isinstance(path, int):
        return
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        return
    flags = args[2] if len(args) > 2 else None
    if isinstance(flags, int) and flags & os.O_ACCMODE == os.O_WRONLY:
        return
    _opened.add(os.path.abspath(path))


sys.addaudithook(_audit)


def _tracked(path):
    """`path` (real) when it is not the interpreter's own, else None."""
    real = os.path.realpath(path)
    if real.startswith(SYSTEM_DIRS) or real.startswith(("/dev/", "/proc/", "/sys/")):
        return None
    if "/__pycache__/" in real:
        return None
    return real


def _utf8(path):
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def dependencies():
    """The files the scene's code came from and read, and what is opaque
    (a file whose name is not UTF-8 cannot be named to the harness)."""
    files, opaque = set(), []
    modules = list(sys.modules.items())
    # Packages the interpreter installed: their submodules are versioned
    # with them, even one whose __file__ is no file (torch.classes says
    # "_classes.py").
    installed = set()
    for name, mod in modules:
        f = getattr(mod, "__file__", None)
        if "." not in name and isinstance(f, str) and os.path.isabs(f) and _tracked(f) is None:
            installed.add(name)
    for name, mod in modules:
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str):
            continue
        if name.split(".", 1)[0] in installed:
            continue
        real = _tracked(os.path.abspath(f))
        if real is None:
            continue
        if real.endswith(".py") and os.path.isfile(real):
            files.add(real)
        else:
            opaque.append(
                "module `%s` is loaded from %s, which is not Python source the harness can digest"
                % (name, f)
            )
    for path in list(_opened):
        real = _tracked(path)
        if real is not None and not os.path.isdir(real):
            files.add(real)
    for f in [f for f in files if not _utf8(f)]:
        files.discard(f)
        opaque.append("file %r was read, and its name is not UTF-8" % f)
    return sorted(files), sorted(opaque)


NP_DTYPES = {
    "f32": np.float32,
    "f64": np.float64,
    "f16": np.float16,
    "i8": np.int8,
    "u8": np.uint8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "bool": np.bool_,
}


class CaseError(Exception):
    """A problem with what user code returned: no traceback needed."""


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even, NaN kept quiet."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))
    out = (rounded >> 16).astype(np.uint16)
    out[nan] = ((u[nan] | np.uint32(0x00400000)) >> 16).astype(np.uint16)
    return out


_modules = {}


def exec_file(name, path):
    """The module `name` made from the file at `path` (in sys.modules
    only when it executed)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load(path, sys_path):
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    mod = _modules.get(path)
    if mod is None:
        mod = exec_file("scene_py_%d" % len(_modules), path)
        _modules[path] = mod
    return mod


def function(mod, path, name):
    f = getattr(mod, name, None)
    if not callable(f):
        raise CaseError("%s defines no function `%s`" % (path, name))
    return f


def uses_torch(mod, path):
    if getattr(mod, "SCENE_TENSORS", "numpy") != "torch":
        return False
    if _torch is None:
        raise CaseError(
            '%s asks for torch tensors (SCENE_TENSORS = "torch") but torch is not installed: '
            "`python3 -m pip install torch`" % path
        )
    return True


def to_numpy(value):
    """A torch tensor or array-like as numpy; bf16 torch tensors become float32."""
    if _torch is not None and isinstance(value, _torch.Tensor):
        t = value.detach().cpu()
        if t.dtype == _torch.bfloat16:
            t = t.to(_torch.float32)
        return t.numpy()
    return value


def as_tensor(name, value, spec, what):
    """`value` as the numpy array to save for `spec` (dtype, shape), or a CaseError."""
    dtype, shape = spec["dtype"], tuple(spec["shape"])
    is_bf16_torch = _torch is not None and isinstance(value, _torch.Tensor) and value.dtype == _torch.bfloat16
    value = to_numpy(value)
    if not isinstance(value, np.ndarray):
        raise CaseError(
            "%s `%s` is a %s, not an array (expected %s %s)"
            % (what, name, type(value).__name__, dtype, list(shape))
        )
    if value.shape != shape:
        raise CaseError(
            "%s `%s` has shape %s, expected %s" % (what, name, list(value.shape), list(shape))
        )
    if dtype == "bf16":
        if value.dtype == np.float32 or is_bf16_torch:
            return f32_to_bf16_bits(value)
        raise CaseError(
            "%s `%s` has dtype %s, expected bf16 (give float32 values or a torch.bfloat16 tensor)"
            % (what, name, value.dtype)
        )
    want = np.dtype(NP_DTYPES[dtype])
    if value.dtype != want:
        raise CaseError(
            "%s `%s` has dtype %s, expected %s (numpy %s)" % (what, name, value.dtype, dtype, want)
        )
    return value


def scalar_value(value):
    """A Python number for a scalar-like value (int, float, ctypes, 0-d array), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    inner = getattr(value, "value", None)  # ctypes.c_float(...)
    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return inner
    value = to_numpy(value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.shape == ()):
        return value.item()
    return None


def seed_all(seed):
    import random

    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    if _torch is not None:
        _torch.manual_seed(seed)


def op_inputs(req):
    path = req["file"]
    mod = load(path, req["sys_path"])
    gen = function(mod, path, "generate_inputs")
    seed_all(req["seed"])
    result = gen(dict(req["params"]))
    _only_parent()
    if isinstance(result, dict):
        items = list(result.items())
    else:
        try:
            items = [(n, v) for n, v in result]
        except (TypeError, ValueError):
            raise CaseError(
                "generate_inputs returned a %s, not a dict or a list of (name, value) pairs"
                % type(result).__name__
            ) from None
    specs = {t["name"]: t for t in req["tensors"]}
    written, scalars, seen = [], {}, set()
    for name, value in items:
        if not isinstance(name, str):
            raise CaseError("generate_inputs returned a name that is not a string: %r" % (name,))
        if name in seen:
            raise CaseError("generate_inputs returned `%s` twice" % name)
        seen.add(name)
        spec = specs.get(name)
        if spec is None:
            s = scalar_value(value)
            if s is None:
                raise CaseError(
                    "generate_inputs returned `%s`, which is not a tensor of the scene (tensors: %s)"
                    % (name, ", ".join(specs) or "none")
                )
            scalars[name] = s
            continue
        arr = as_tensor(name, value, spec, "generate_inputs tensor")
        np.save(spec["path"], np.ascontiguousarray(arr), allow_pickle=False)
        written.append(name)
    return {"written": written, "scalars": scalars}


def op_golden(req):
    path = req["file"]
    mod = load(path, req["sys_path"])
    compute = function(mod, path, "compute_golden")
    torch_mode = uses_torch(mod, path)
    tensors = {}
    for t in req["tensors"]:
        arr = np.load(t["path"], allow_pickle=False)
        if torch_mode and t["dtype"] == "bf16":
            arr = _torch.from_numpy(np.array(arr).view(np.int16)).view(_torch.bfloat16)
        elif torch_mode:
            arr = _torch.from_numpy(np.array(arr))
        elif t["dtype"] == "bf16":
            arr = bf16_bits_to_f32(arr)
        else:
            arr = np.array(arr)  # writable, owned
        tensors[t["name"]] = arr
    for name, value in req["scalars"].items():
        tensors[name] = value
    ret = compute(tensors, dict(req["params"]))
    _only_parent()
    if ret is not None:
        if not isinstance(ret, dict):
            raise CaseError(
                "compute_golden returned a %s; fill the outputs in place (return None) or return a dict"
                % type(ret).__name__
            )
        tensors.update(ret)
    for spec in req["outputs"]:
        name = spec["name"]
        if name not in tensors:
            raise CaseError("compute_golden removed output `%s`" % name)
        arr = as_tensor(name, tensors[name], spec, "golden output")
        np.save(spec["path"], np.ascontiguousarray(arr), allow_pickle=False)
    return {}


def load_array(t):
    """A tensor the harness wrote, as a writable numpy array (bf16 as float32)."""
    arr = np.load(t["path"], allow_pickle=False)
    if t["dtype"] == "bf16":
        return bf16_bits_to_f32(arr)
    return np.array(arr)


def op_compare(req):
    path = req["file"]
    mod = load(path, req["sys_path"])
    fname = req["function"]
    f = function(mod, path, fname)
    actual = load_array(req["actual"])
    expected = load_array(req["expected"])
    ret = f(req["name"], actual, expected, dict(req["params"]))
    _only_parent()
    if (
        not isinstance(ret, tuple)
        or len(ret) != 2
        or not isinstance(ret[0], (bool, np.bool_))
        or not isinstance(ret[1], str)
    ):
        raise CaseError(
            "%s: %s returned %s; a comparison returns (ok, detail): a bool and a string"
            % (path, fname, _short_repr(ret))
        )
    return {"passed": bool(ret[0]), "detail": ret[1]}


def op_host(req):
    """A level-3 host step: FUNCTION(tensors, params) on the step's tensors;
    for a test file of the original, its sub callable FUNCTION(args)."""
    if "simpler" in req:
        return op_host_simpler(req)
    path = req["file"]
    mod = load(path, req["sys_path"])
    fname = req["function"]
    f = function(mod, path, fname)
    tensors = {t["name"]: load_array(t) for t in req["tensors"]}
    ret = f(tensors, dict(req["params"]))
    _only_parent()
    if ret is not None:
        if not isinstance(ret, dict):
            raise CaseError(
                "%s: %s returned a %s; fill the written tensors in place (return None) or return a dict"
                % (path, fname, type(ret).__name__)
            )
        tensors.update(ret)
    for t in req["tensors"]:
        name = t["name"]
        if name not in tensors:
            raise CaseError("%s: %s removed tensor `%s`" % (path, fname, name))
        arr = as_tensor(name, tensors[name], t, "host step tensor")
        np.save(t["out"], np.ascontiguousarray(arr), allow_pickle=False)
    return {}


# ---------------------------------------------------------------------
# The original project's test files (`test_*.py` with `SceneTestCase`
# classes), run unchanged: a request that carries "simpler" names the
# file, its module name, the class and (but for `describe`) the case.
# The class's own `generate_args`, `compute_golden` and `compare_outputs`
# are called as the original's harness calls them; our `simpler_setup`
# (the compat packages) is first on sys.path.

_test_modules = {}
_templates = {}  # (file, class, case) -> the TaskArgsBuilder generate_args made
_TEMPLATES_KEPT = 4

TORCH_DTYPES = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
}


def load_test_module(sim):
    """The test file's module: imported by its dotted name from the
    checkout root (as pytest's importlib mode names it, so its relative
    and `tests.st...` imports work), else by its path."""
    path = sim["file"]
    mod = _test_modules.get(path)
    if mod is not None:
        return mod
    # Nothing is written into the user's checkout: no __pycache__.
    sys.dont_write_bytecode = True
    root = sim.get("simpler_root")
    if root:
        os.environ["SCENE_SIMPLER_ROOT"] = root
    for p in reversed(sim["sys_path"]):
        if p not in sys.path:
            sys.path.insert(0, p)
    name = sim.get("module")
    if name:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not name.startswith(e.name):
                raise
            mod = None
        if mod is not None and os.path.realpath(getattr(mod, "__file__", "") or "") != os.path.realpath(path):
            mod = None
    if mod is None:
        mod = exec_file(name or "scene_test_%d" % len(_test_modules), path)
    _test_modules[path] = mod
    return mod


def _scene_test_case():
    from simpler_setup import SceneTestCase

    return SceneTestCase


def test_classes(mod):
    """The classes the original's pytest collects from a module: `Test*`
    subclasses of SceneTestCase defined in it, with cases."""
    base = _scene_test_case()
    out = []
    for name, obj in vars(mod).items():
        if (
            isinstance(obj, type)
            and issubclass(obj, base)
            and obj is not base
            and name.startswith("Test")
            and obj.__module__ == mod.__name__
            and getattr(obj, "CASES", None)
        ):
            out.append(obj)
    return out


def find_class(sim):
    mod = load_test_module(sim)
    cls = getattr(mod, sim["class"], None)
    if not isinstance(cls, type):
        raise CaseError("%s defines no class `%s`" % (sim["file"], sim["class"]))
    return cls


def find_case(cls, sim):
    for case in cls.CASES:
        if isinstance(case, dict) and case.get("name") == sim["case"]:
            return case
    raise CaseError("%s has no case `%s`" % (cls.__name__, sim["case"]))


def _jsonable(value):
    """Params as JSON for the harness (reports, keys); what JSON cannot
    hold is sent as its repr. Generate/golden calls get the original
    objects, never these."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _direction(d):
    name = getattr(d, "name", None)
    if name in ("IN", "OUT", "INOUT", "SCALAR"):
        return name.lower()
    return repr(d)


def _manual(manual):
    """A case's `manual` as the harness models it: "never", "always" or
    the platforms (the original's is_manual_for_platform)."""
    if manual is None or manual is False:
        return "never"
    if isinstance(manual, str):
        return [manual]
    if isinstance(manual, (list, tuple, set, frozenset)):
        return sorted(str(m) for m in manual)
    return "always" if manual else "never"


def tensor_array(name, value):
    """A TensorArg's value as (numpy array to save, our dtype name): bf16
    as uint16 bits. The original takes contiguous CPU tensors of its dtype
    map only; so do we."""
    if _torch is not None and isinstance(value, _torch.Tensor):
        t = value.detach()
        if t.device.type != "cpu":
            raise CaseError("TensorArg `%s` is on %s, not the CPU" % (name, t.device))
        if not t.is_contiguous():
            raise CaseError("TensorArg `%s` is not contiguous" % name)
        dt = TORCH_DTYPES.get(str(t.dtype).replace("torch.", ""))
        if dt is None:
            raise CaseError(
                "TensorArg `%s` has dtype %s: scenes passes float32, float16, bfloat16, "
                "int8/16/32/64 and uint8 tensors" % (name, t.dtype)
            )
        if dt == "bf16":
            return t.view(_torch.int16).numpy().view(np.uint16), dt
        return t.numpy(), dt
    if isinstance(value, np.ndarray):
        if value.dtype.name not in TORCH_DTYPES:
            raise CaseError(
                "TensorArg `%s` has dtype %s: scenes passes float32, float16, int8/16/32/64 "
                "and uint8 arrays (bfloat16 as a torch tensor)" % (name, value.dtype)
            )
        if not value.flags["C_CONTIGUOUS"]:
            raise CaseError("TensorArg `%s` is not contiguous" % name)
        return value, TORCH_DTYPES[value.dtype.name]
    raise CaseError("TensorArg `%s` holds a %s, not a tensor" % (name, type(value).__name__))


def scalar_spec(name, value):
    """A Scalar as (our dtype, number) carrying the 64 bits the original's
    scalar_to_uint64 gives it: a float (Python or c_float) as f32, a
    c_double as f64, anything else as a two's-complement i64."""
    import ctypes
    import struct

    if isinstance(value, float) or isinstance(value, ctypes.c_float):
        v = value if isinstance(value, float) else value.value
        try:
            return "f32", struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            raise CaseError("Scalar `%s` = %r does not fit a float32" % (name, v)) from None
    if isinstance(value, ctypes.c_double):
        return "f64", float(value.value)
    if isinstance(value, ctypes._SimpleCData):
        value = value.value
    try:
        bits = int(value) & ((1 << 64) - 1)
    except (TypeError, ValueError):
        raise CaseError("Scalar `%s` is a %s, not a number" % (name, type(value).__name__)) from None
    return "i64", bits - (1 << 64) if bits >> 63 else bits


def generated(cls, case, seed):
    """generate_args of the case, under the seed; kept for the golden and
    the comparison of the same case. A class replaying its own test_run:
    the buffers its run names."""
    if _replays(cls):
        return recorded(cls, case, seed)
    seed_all(seed)
    builder = cls().generate_args(case.get("params", {}))
    _only_parent()
    if not hasattr(builder, "specs"):
        raise CaseError(
            "%s.generate_args returned a %s, not a TaskArgsBuilder" % (cls.__name__, type(builder).__name__)
        )
    return builder


def template(cls, case, sim, seed):
    key = (sim["file"], cls.__name__, case.get("name"))
    b = _templates.get(key)
    if b is None:
        b = generated(cls, case, seed)
        _templates[key] = b
        while len(_templates) > _TEMPLATES_KEPT:
            _templates.pop(next(iter(_templates)))
    return b


def arg_list(builder):
    out = []
    for s in builder.specs:
        if type(s).__name__ == "TensorArg":
            arr, dt = tensor_array(s.name, s.value)
            out.append({"name": s.name, "kind": "tensor", "dtype": dt, "shape": list(arr.shape)})
        else:
            dt, v = scalar_spec(s.name, s.value)
            out.append({"name": s.name, "kind": "scalar", "dtype": dt, "value": v})
    return out


def _defined_below_base(cls, attr):
    base = _scene_test_case()
    for k in cls.__mro__:
        if k is base:
            return False
        if attr in vars(k):
            return True
    return False


def describe_class(cls, req):
    platform = req["platform"]
    d = {"name": cls.__name__, "level": int(getattr(cls, "_st_level", 0) or 0)}
    d["runtime"] = getattr(cls, "_st_runtime", None)
    d["rtol"], d["atol"] = float(cls.RTOL), float(cls.ATOL)
    d["skip_golden"] = bool(getattr(cls, "SKIP_GOLDEN", False))
    d["compare_override"] = _defined_below_base(cls, "compare_outputs")
    d["overrides"] = sorted(
        m for m in ("test_run", "_run_and_validate_l2", "_run_and_validate_l3", "_build_config")
        if _defined_below_base(cls, m)
    )
    d["own_tests"] = sorted(
        n for n in dir(cls) if n.startswith("test_") and n != "test_run" and callable(getattr(cls, n, None))
    )
    d["runtime_env"] = bool(getattr(cls, "RUNTIME_ENV", None))
    spec = getattr(cls, "CALLABLE", {}) or {}
    if d["level"] == 2 and isinstance(spec, dict):
        d["orchestration"] = _orch_desc(spec.get("orchestration"))
        d["incores"] = _incores_desc(spec)
    if d["level"] == 3 and isinstance(spec, dict):
        d["l3"] = l3_describe(spec)
    d["replay"] = _replays(cls)
    cases = []
    from simpler_setup.scene_test import is_manual_for_platform

    for i, case in enumerate(cls.CASES):
        if not isinstance(case, dict):
            raise CaseError("%s.CASES[%d] is a %s, not a mapping" % (cls.__name__, i, type(case).__name__))
        c = {
            "name": str(case.get("name")),
            "platforms": [str(p) for p in case.get("platforms", [])],
            "manual": _manual(case.get("manual")),
            "params": _jsonable(case.get("params", {})),
            "config": _jsonable(case.get("config", {})),
            # A replayed test_run judges with its own asserts.
            "skip_golden": d["replay"] or bool(case.get("skip_golden", d["skip_golden"])),
        }
        wanted = platform in c["platforms"] and (
            req.get("include_manual") or not is_manual_for_platform(case.get("manual"), platform)
        )
        runs = not any(m.startswith("_run_and_validate") for m in d["overrides"])
        if d["level"] == 3:
            runs = runs and (d["replay"] or ("test_run" not in d["overrides"] and d["l3"].get("orchestration")))
        if wanted and d["level"] in (2, 3) and runs:
            try:
                builder = generated(cls, case, req["seed"])
                c["args"] = arg_list(builder)
                if d["level"] == 3:
                    c["plan"] = l3_plan(cls, case, builder)
            except NotModelled as e:
                if d["level"] != 3:
                    raise
                c["not_run"] = str(e)
                c.pop("args", None)
            except BaseException as e:  # noqa: BLE001 - user code may raise anything
                if isinstance(e, KeyboardInterrupt):
                    raise
                c["error"] = "%s: %s" % (type(e).__name__, e) if not isinstance(e, CaseError) else str(e)
                c["traceback"] = None if isinstance(e, CaseError) else user_traceback(e)
        cases.append(c)
    d["cases"] = cases
    return d


# ---------------------------------------------------------------------
# Level 3: the class's orchestration is a Python function on the
# original's Worker (`run_dag(orch, callables, task_args, config)`). At
# describe time it runs against a recorder: each `submit_next_level`,
# `submit_next_level_group` and `submit_sub` becomes a task naming its
# callable, its workers and its tensors (by TensorArg name) with their
# tags; the harness maps the tasks onto its level-3 steps.

_TAGS = {"INPUT": "input", "OUTPUT": "output", "INOUT": "inout", "OUTPUT_EXISTING": "output_existing",
         "NO_DEP": "no_dep"}


def _orch_desc(orch):
    orch = orch or {}
    return {
        "source": orch.get("source"),
        "function_name": orch.get("function_name"),
        "config_name": orch.get("config_name"),
        "signature": [_direction(x) for x in orch.get("signature", [])],
    }


def _incores_desc(spec):
    return [
        {
            "func_id": inc.get("func_id"),
            "name": inc.get("name"),
            "source": inc.get("source"),
            "core_type": inc.get("core_type"),
            "extra_include_dirs": [str(x) for x in inc.get("extra_include_dirs", [])],
        }
        for inc in spec.get("incores", [])
        if isinstance(inc, dict)
    ]


def l3_describe(spec):
    """A level-3 class's callables: chip ones (an orchestration and its
    incores) and sub ones (a Python function), and whether its
    orchestration is a function scenes can record."""
    chips, subs = [], []
    for entry in spec.get("callables", []) or []:
        if not isinstance(entry, dict):
            continue
        if "orchestration" in entry:
            chips.append({"name": entry.get("name"), "orchestration": _orch_desc(entry.get("orchestration")),
                          "incores": _incores_desc(entry)})
        elif callable(entry.get("callable")):
            subs.append(str(entry.get("name")))
    return {"orchestration": callable(spec.get("orchestration")), "chips": chips, "subs": subs}


class NotModelled(CaseError):
    """The orchestration does what scenes' level-3 steps do not model: the
    class is listed as not run, with this reason."""


class _Handle:
    """A registered callable as the recorder's orchestration sees it."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind

    def __repr__(self):
        return "<%s callable %r>" % (self.kind, self.name)


def _task_args(args, what, views):
    from simpler.task_interface import TaskArgs
    from simpler_setup.scene_test import ArgRef

    if args is None:
        return {"tensors": [], "scalars": []}
    if not isinstance(args, TaskArgs):
        raise CaseError("%s got a %s, not a TaskArgs" % (what, type(args).__name__))
    tensors = []
    for i in range(args.tensor_count()):
        ref = args.tensor(i)
        if isinstance(ref, _BufferRef):
            name = ref.record(views, "%s, tensor %d" % (what, i))
        elif isinstance(ref, ArgRef):
            name = ref.name
        else:
            raise NotModelled(
                "%s names a %s as tensor %d; scenes runs tasks on the case's TensorArgs "
                "(_build_l3_task_args, _rehosted_ref, _rehosted_ref_for) or on buffers of "
                "st_worker.create_buffer" % (what, type(ref).__name__, i)
            )
        tensors.append({"name": name, "tag": _TAGS.get(args.tag(i).name, args.tag(i).name.lower())})
    return {"tensors": tensors, "scalars": [args.scalar(i) for i in range(args.scalar_count())]}


class _Recorder:
    """The `orch` of a level-3 orchestration at describe time. `views`:
    the create_buffer buffers its tasks name (a test_run's run)."""

    def __init__(self):
        self.tasks = []
        self.views = {}

    @staticmethod
    def _handle(h, kind, what):
        if not isinstance(h, _Handle) or h.kind != kind:
            raise CaseError("%s got %r, not a %s callable of CALLABLE" % (what, h, kind))
        return h.name

    def submit_next_level(self, handle, args, config=None, *, worker):
        what = "orch.submit_next_level"
        self.tasks.append({"kind": "chip", "callable": self._handle(handle, "chip", what),
                           "workers": [int(worker)], "args": [_task_args(args, what, self.views)]})

    def submit_next_level_group(self, handle, args_list, config=None, *, workers):
        what = "orch.submit_next_level_group"
        workers = [int(w) for w in workers]
        if len(workers) != len(args_list):
            raise ValueError("workers length must match args_list length")
        if len(set(workers)) != len(workers):
            raise ValueError("workers must not contain duplicate NEXT_LEVEL worker ids")
        self.tasks.append({"kind": "chip", "callable": self._handle(handle, "chip", what),
                           "workers": workers, "args": [_task_args(a, what, self.views) for a in args_list]})

    def submit_sub(self, handle, args=None):
        what = "orch.submit_sub"
        self.tasks.append({"kind": "sub", "callable": self._handle(handle, "sub", what),
                           "args": _task_args(args, what, self.views)})

    def submit_sub_group(self, handle, args_list):
        """N sub tasks as one node: here N host steps, in the list's order."""
        what = "orch.submit_sub_group"
        name = self._handle(handle, "sub", what)
        for args in args_list:
            self.tasks.append({"kind": "sub", "callable": name, "args": _task_args(args, what, self.views)})

    def __getattr__(self, name):
        raise NotModelled(
            "the orchestration calls orch.%s; scenes maps submit_next_level, submit_next_level_group, "
            "submit_sub and submit_sub_group onto its level-3 steps, nothing else" % name
        )


def _callables(cls):
    """The class's callables as its orchestration names them: a handle per
    chip callable (and `<name>_sig`, its signature) and per sub callable."""
    entries = {}
    for entry in (getattr(cls, "CALLABLE", {}) or {}).get("callables", []) or []:
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        if "orchestration" in entry:
            entries[name] = _Handle(name, "chip")
            entries["%s_sig" % name] = list((entry.get("orchestration") or {}).get("signature", []))
        else:
            entries[name] = _Handle(name, "sub")
    return entries


def l3_plan(cls, case, builder):
    """The tasks the class's orchestration (or its own test_run's run)
    submits for `case`, in order."""
    if _replays(cls):
        tasks = builder._scene_plan
    else:
        from simpler.task_interface import CallConfig
        from simpler_setup.scene_test import CallableNamespace

        orch = _Recorder()
        cls.CALLABLE["orchestration"](orch, CallableNamespace(_callables(cls)), builder, CallConfig())
        _only_parent()
        tasks = orch.tasks
    # A chip task gets the case's Scalars, in order (what the harness passes).
    from simpler.task_interface import scalar_to_uint64

    scalars = [scalar_to_uint64(s.value) for s in builder.specs if type(s).__name__ == "Scalar"]
    for k, task in enumerate(tasks):
        for a in task["args"] if task["kind"] == "chip" else []:
            if a["scalars"] != scalars:
                raise NotModelled(
                    "task %d of the orchestration passes scalars %r; scenes passes the case's Scalars %r"
                    % (k, a["scalars"], scalars)
                )
    return tasks


# ---------------------------------------------------------------------
# Level 3 with its own `test_run(self, st_worker)`: a program on the
# original's Worker (create_buffer, fill the buffers, worker.run(orch_fn),
# read the outputs, assert). Describing a case runs it against a
# recording st_worker up to its first run: the buffers its tasks name
# become the case's tensors (their bytes then, its fixtures) and the
# tasks its steps. After the device ran them, the same method runs again
# against a replaying st_worker whose run checks the buffers hold the same
# bytes and writes the device's outputs into them; the method's own
# asserts are the verdict.

# scenes' dtypes as the original's DataType values, and back.
_DATA_TYPES = {"f32": 0, "f16": 1, "i32": 2, "i16": 3, "i8": 4, "u8": 5, "bf16": 6, "i64": 7}
_DTYPE_OF = {v: k for k, v in _DATA_TYPES.items()}
# scenes' dtypes as numpy's (bf16 as its bits), from the names tensor_array knows.
_NP_OF = {ours: np.dtype(name) for name, ours in TORCH_DTYPES.items() if ours != "bf16"}
_NP_OF["bf16"] = np.dtype(np.uint16)


def _replays(cls):
    """A level-3 class whose own test_run takes st_worker alone."""
    import inspect

    if int(getattr(cls, "_st_level", 0) or 0) != 3 or not _defined_below_base(cls, "test_run"):
        return False
    try:
        params = list(inspect.signature(cls.test_run).parameters)[1:]
    except (TypeError, ValueError):
        return False
    return params == ["st_worker"]


class _Stop(BaseException):
    """Ends a test_run at its first run once recorded (a BaseException, so
    a test's own `except Exception` does not take it)."""


class _Diverged(BaseException):
    """The replayed test_run did not do what it did when recorded."""


class _Shm:
    """A buffer's backing as the test sees it: `buf`, writable bytes."""

    def __init__(self, nbytes):
        self.buf = memoryview(bytearray(nbytes))
        self.size = nbytes

    def close(self):
        pass

    def unlink(self):
        pass


class _Buffer:
    """What st_worker.create_buffer gives: `nbytes`, `shm.buf` and
    `tensor(shapes, dtype)`, a view a task can name."""

    def __init__(self, index, nbytes):
        self.index, self.nbytes, self.shm, self.closed = index, nbytes, _Shm(nbytes), False
        self._bytes = self.shm.buf

    def tensor(self, shapes, dtype, strides=None, byte_offset=0):
        if self.closed:
            raise ValueError("Buffer: cannot view a released buffer")
        return _BufferRef(self, shapes, dtype, strides, byte_offset)

    def close(self):
        self.closed = True
        self.shm = None

    def __getattr__(self, name):
        raise NotModelled(
            "test_run reads Buffer.%s; scenes' create_buffer gives nbytes, shm.buf, tensor() and close()" % name
        )


class _BufferRef:
    """A Tensor over a create_buffer buffer, as a task argument."""

    def __init__(self, buffer, shapes, dtype, strides, byte_offset):
        self.buffer, self.shapes, self.dtype = buffer, tuple(int(x) for x in shapes), dtype
        self.strides, self.byte_offset = strides, int(byte_offset)

    def record(self, views, what):
        """The case tensor this view is (`buffer<i>`), noted in `views`."""
        b = self.buffer
        code = getattr(self.dtype, "value", self.dtype)
        dt = _DTYPE_OF.get(code) if isinstance(code, int) else None
        if dt is None:
            raise NotModelled("%s has dtype %r; scenes passes %s" % (what, self.dtype, ", ".join(_DTYPE_OF.values())))
        rows = []
        acc = 1
        for d in reversed(self.shapes):
            rows.insert(0, acc)
            acc *= d
        whole = acc * _NP_OF[dt].itemsize == b.nbytes and self.byte_offset == 0 and (
            self.strides is None or tuple(self.strides) == tuple(rows)
        )
        if not whole:
            raise NotModelled(
                "%s views part of buffer %d (%s %s at byte %d of %d bytes); scenes passes whole buffers"
                % (what, b.index, dt, list(self.shapes), self.byte_offset, b.nbytes)
            )
        name = "buffer%d" % b.index
        prev = views.get(name)
        if prev is not None and prev[1:] != (dt, self.shapes):
            raise NotModelled(
                "%s views buffer %d as %s %s, another task as %s %s; scenes passes one view of a buffer"
                % (what, b.index, dt, list(self.shapes), prev[1], list(prev[2]))
            )
        views[name] = (b, dt, self.shapes)
        return name


class _TestRunWorker:
    """st_worker of a replayed test_run: create_buffer, and run (once)."""

    def __init__(self, replay=None):
        self.buffers, self.runs, self.recorded = [], 0, None
        self._replay = replay  # (inputs: name -> bytes, outputs: name -> array)

    def create_buffer(self, nbytes):
        b = _Buffer(len(self.buffers), int(nbytes))
        self.buffers.append(b)
        return b

    def run(self, orch_fn, args=None, config=None):
        from simpler.task_interface import CallConfig

        self.runs += 1
        if self.runs > 1:
            raise NotModelled("test_run calls st_worker.run more than once; scenes runs its first run")
        if args is not None:
            raise NotModelled(
                "test_run passes args to st_worker.run; scenes runs an orchestration over "
                "create_buffer buffers (args=None)"
            )
        rec = _Recorder()
        orch_fn(rec, args, config if config is not None else CallConfig())
        _only_parent()
        if not rec.tasks:
            raise NotModelled("test_run's run submits no task")
        views = sorted(rec.views.items(), key=lambda kv: kv[1][0].index)
        if self._replay is None:
            # The case's Scalars: what its first chip task passes (each
            # chip task must pass the same, as at level 3 everywhere).
            chips = [t for t in rec.tasks if t["kind"] == "chip"]
            scalars = chips[0]["args"][0]["scalars"] if chips and chips[0]["args"] else []
            self.recorded = (self._builder(views, scalars), rec.tasks)
            raise _Stop()
        inputs, outputs = self._replay
        for name, (b, _dt, _shape) in views:
            if bytes(b._bytes) != inputs.get(name):
                raise _Diverged(
                    "test_run's run this time names %s holding other bytes than when it was described "
                    "(the harness ran the device on those): its test_run must be deterministic" % name
                )
        for name, arr in outputs.items():
            b = rec.views[name][0] if name in rec.views else None
            data = np.ascontiguousarray(arr).tobytes()
            if b is None or len(data) != b.nbytes:
                raise _Diverged("the device's output %s does not match test_run's buffers" % name)
            b._bytes[:] = data

    @staticmethod
    def _builder(views, scalars):
        """The buffers as TensorArgs `buffer<i>` (their bytes now), then
        the scalars (their 64 bits) as Scalars `scalar<i>`."""
        from simpler_setup.scene_test import Scalar, TaskArgsBuilder, TensorArg

        specs = []
        for name, (b, dt, shape) in views:
            arr = np.frombuffer(bytes(b._bytes), dtype=_NP_OF[dt]).reshape(shape).copy()
            if dt == "bf16":
                if _torch is None:
                    raise NotModelled("%s is bfloat16, which needs torch" % name)
                arr = _torch.from_numpy(arr.view(np.int16)).view(_torch.bfloat16)
            specs.append(TensorArg(name, arr))
        specs.extend(Scalar("scalar%d" % i, v) for i, v in enumerate(scalars))
        return TaskArgsBuilder(*specs)

    def __getattr__(self, name):
        raise NotModelled("test_run uses st_worker.%s; scenes' st_worker has create_buffer and run" % name)


def _bind_callables(cls):
    """What the original's fixture sets on a level-3 class before its
    test_run: its chip and sub callables' handles by name."""
    entries = _callables(cls)
    cls._st_chip_handles = {k: v for k, v in entries.items() if isinstance(v, _Handle) and v.kind == "chip"}
    cls._st_sub_handles = {k: v for k, v in entries.items() if isinstance(v, _Handle) and v.kind == "sub"}


def recorded(cls, case, seed):
    """The case's tensors (the buffers test_run's run names, as they were
    then) as a TaskArgsBuilder carrying the run's tasks (`_scene_plan`)."""
    seed_all(seed)
    _bind_callables(cls)
    worker = _TestRunWorker()
    try:
        cls().test_run(worker)
    except _Stop:
        pass
    finally:
        _only_parent()
    if worker.recorded is None:
        raise NotModelled("its test_run runs nothing on st_worker (no st_worker.run): it tests the original's Worker")
    builder, tasks = worker.recorded
    builder._scene_plan = tasks
    return builder


def _assertion(cls, e):
    """An AssertionError of test_run as a line: its message, else the
    assert statement and where it is."""
    import traceback as tb

    if str(e):
        return "%s.test_run: %s" % (cls.__name__, e)
    frames = tb.extract_tb(e.__traceback__)
    if not frames:
        return "%s.test_run: AssertionError" % cls.__name__
    f = frames[-1]
    return "%s.test_run: `%s` failed (%s:%d)" % (cls.__name__, (f.line or "assert").strip(),
                                                   os.path.basename(f.filename), f.lineno)


def op_replay_case(req):
    """The class's own test_run again, its run given the device's outputs
    (`outputs`: name, actual): its asserts judge the case."""
    sim = req["simpler"]
    cls = find_class(sim)
    case = find_case(cls, sim)
    builder = template(cls, case, sim, req["seed"])
    inputs = {s.name: np.ascontiguousarray(tensor_array(s.name, s.value)[0]).tobytes()
              for s in builder.specs if type(s).__name__ == "TensorArg"}
    outputs = {t["name"]: _load_raw({"path": t["actual"]}) for t in req["outputs"]}
    seed_all(req["seed"])
    _bind_callables(cls)
    worker = _TestRunWorker(replay=(inputs, outputs))
    try:
        cls().test_run(worker)
    except AssertionError as e:
        return {"passed": False, "detail": _assertion(cls, e)}
    except _Diverged as e:
        raise CaseError("%s.test_run could not be replayed: %s" % (cls.__name__, e)) from None
    finally:
        _only_parent()
    if worker.runs == 0:
        raise CaseError("%s.test_run did not call st_worker.run when replayed" % cls.__name__)
    return {"passed": True, "detail": "%s.test_run passed on the device's outputs" % cls.__name__}


def _data_type(dtype):
    return _DATA_TYPES.get(dtype, -1)


class MappedArg:
    """A sub callable's tensor argument as the original's sub-worker gives
    it: `buffer` (writable bytes of the tensor), `shapes`, `strides`,
    `dtype` (a DataType value), `byte_offset`."""

    def __init__(self, arr, dtype):
        self._arr = arr
        self.buffer = memoryview(arr).cast("B")
        self.shapes = tuple(arr.shape)
        self.strides = tuple(s // arr.itemsize for s in arr.strides)
        self.dtype = _data_type(dtype)
        self.byte_offset = 0


class MappedArgs(list):
    """A sub callable's arguments: the tensors (indexable) and scalars."""

    def __init__(self, tensors, scalars=()):
        super().__init__(tensors)
        self._scalars = tuple(scalars)

    def tensor_count(self):
        return len(self)

    def scalar_count(self):
        return len(self._scalars)

    def scalar(self, i):
        return self._scalars[i]


def op_host_simpler(req):
    """A test file's sub task: the CALLABLE entry named FUNCTION called
    with the task's tensors (their bytes, which it may write in place)."""
    sim = req["simpler"]
    cls = find_class(sim)
    fname = req["function"]
    fn = None
    for entry in (getattr(cls, "CALLABLE", {}) or {}).get("callables", []) or []:
        if isinstance(entry, dict) and entry.get("name") == fname and callable(entry.get("callable")):
            fn = entry["callable"]
    if fn is None:
        raise CaseError("%s: CALLABLE has no sub callable `%s`" % (cls.__name__, fname))
    arrays = [_load_raw(t) for t in req["tensors"]]  # np.load: fresh, writable
    fn(MappedArgs([MappedArg(a, t["dtype"]) for a, t in zip(arrays, req["tensors"])], req.get("scalars", [])))
    _only_parent()
    for a, t in zip(arrays, req["tensors"]):
        np.save(t["out"], np.ascontiguousarray(a), allow_pickle=False)
    return {}


def op_describe(req):
    """Every test file of the request: its classes and cases, and the
    arguments generate_args makes for the cases the run may select."""
    out = []
    for sim in req["files"]:
        entry = {"file": sim["file"]}
        try:
            mod = load_test_module(sim)
            entry["classes"] = [describe_class(cls, req) for cls in test_classes(mod)]
        except ImportError as e:
            missing = e.name or ""
            if missing in ("_task_interface", "simpler", "simpler_setup") or missing.startswith(
                ("simpler.", "simpler_setup.")
            ):
                # The original's native runtime and tools: what white-box
                # and level-3 files import. Not ours to provide.
                what = missing
                if not isinstance(e, ModuleNotFoundError):
                    # `from simpler.worker import _OFF_ACCEPTED`: a name
                    # of a module we have, which we do not define.
                    name = str(e).split("'")[1] if str(e).count("'") >= 2 else "a name"
                    what = "%s from %s" % (name, missing)
                entry["not_run"] = (
                    "it imports %s, the original's own machinery (its white-box and "
                    "level-3 tests drive it), which scenes does not provide" % what
                )
            else:
                entry["error"] = "%s: %s" % (type(e).__name__, e)
                entry["traceback"] = user_traceback(e)
        except BaseException as e:  # noqa: BLE001 - user code may raise anything
            if isinstance(e, KeyboardInterrupt):
                raise
            entry["error"] = str(e) if isinstance(e, CaseError) else "%s: %s" % (type(e).__name__, e)
            entry["traceback"] = None if isinstance(e, CaseError) else user_traceback(e)
        out.append(entry)
    _only_parent()
    return {"tests": out}


def _fill(value, arr, dtype):
    """Writes the harness's array into a TensorArg's value in place."""
    if _torch is not None and isinstance(value, _torch.Tensor):
        if dtype == "bf16":
            src = _torch.from_numpy(np.array(arr, dtype=np.uint16).view(np.int16)).view(_torch.bfloat16)
        else:
            src = _torch.from_numpy(np.array(arr))
        value.copy_(src.reshape(value.shape))
    else:
        value[...] = np.asarray(arr).reshape(value.shape)


def _load_raw(t):
    return np.load(t["path"], allow_pickle=False)


def op_inputs_simpler(req):
    sim = req["simpler"]
    cls = find_class(sim)
    case = find_case(cls, sim)
    _templates.pop((sim["file"], cls.__name__, case.get("name")), None)
    builder = template(cls, case, sim, req["seed"])
    specs = {t["name"]: t for t in req["tensors"]}
    written, scalars = [], {}
    for s in builder.specs:
        if type(s).__name__ == "TensorArg":
            spec = specs.get(s.name)
            if spec is None:
                raise CaseError("generate_args made tensor `%s`, which the scene does not have" % s.name)
            arr, dt = tensor_array(s.name, s.value)
            if dt != spec["dtype"] or list(arr.shape) != list(spec["shape"]):
                raise CaseError(
                    "generate_args made `%s` %s %s this time, %s %s before"
                    % (s.name, dt, list(arr.shape), spec["dtype"], list(spec["shape"]))
                )
            np.save(spec["path"], np.ascontiguousarray(arr), allow_pickle=False)
            written.append(s.name)
        else:
            scalars[s.name] = scalar_spec(s.name, s.value)[1]
    return {"written": written, "scalars": scalars}


def op_golden_simpler(req):
    sim = req["simpler"]
    cls = find_class(sim)
    case = find_case(cls, sim)
    args = template(cls, case, sim, req["seed"]).clone()
    for t in req["tensors"]:
        _fill(getattr(args, t["name"]), _load_raw(t), t["dtype"])
    ret = cls().compute_golden(args, case.get("params", {}))
    _only_parent()
    if ret is not None:
        raise CaseError("%s.compute_golden returned a %s; it writes the outputs in place" % (cls.__name__, type(ret).__name__))
    for spec in req["outputs"]:
        arr, dt = tensor_array(spec["name"], getattr(args, spec["name"]))
        if dt != spec["dtype"] or list(arr.shape) != list(spec["shape"]):
            raise CaseError("compute_golden left `%s` %s %s, expected %s %s"
                            % (spec["name"], dt, list(arr.shape), spec["dtype"], list(spec["shape"])))
        np.save(spec["path"], np.ascontiguousarray(arr), allow_pickle=False)
    return {}


def op_compare_case(req):
    """The class's compare_outputs(test_args, golden_args, output_names,
    params) on the device's outputs and the golden: an AssertionError is a
    failed case, anything else a comparison that could not judge."""
    sim = req["simpler"]
    cls = find_class(sim)
    case = find_case(cls, sim)
    base = template(cls, case, sim, req["seed"])
    test_args, golden_args = base.clone(), base.clone()
    for t in req["inputs"]:
        arr = _load_raw(t)
        _fill(getattr(test_args, t["name"]), arr, t["dtype"])
        _fill(getattr(golden_args, t["name"]), arr, t["dtype"])
    for t in req["outputs"]:
        _fill(getattr(test_args, t["name"]), np.load(t["actual"], allow_pickle=False), t["dtype"])
        _fill(getattr(golden_args, t["name"]), np.load(t["expected"], allow_pickle=False), t["dtype"])
    names = [t["name"] for t in req["outputs"]]
    try:
        cls().compare_outputs(test_args, golden_args, names, case.get("params", {}))
    except AssertionError as e:
        _only_parent()
        return {"passed": False, "detail": str(e) or "AssertionError"}
    _only_parent()
    return {"passed": True, "detail": "%s.compare_outputs passed" % cls.__name__}


def _short_repr(value):
    text = repr(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return "%s %s" % (type(value).__name__, text)


def user_traceback(exc):
    """The traceback without this driver's own frames."""
    tb = exc.__traceback__
    here = os.path.abspath(__file__) if "__file__" in globals() else "<string>"
    def ours(name):
        # The driver's frames, and the import machinery's between the
        # driver and a test file it imports.
        return name in (here, "<string>") or name.startswith("<frozen importlib") or (
            name.endswith(os.path.join("importlib", "__init__.py"))
        )

    while tb is not None and ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def watch_parent():
    """Exit when the process that started us goes away: the harness kills
    its child on a timeout, and when `python` was a wrapper that runs us as
    its child (a pyenv shim), that child was the wrapper, not us."""
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main():
    watch_parent()
    _send(
        {
            "hello": 1,
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "torch": getattr(_torch, "__version__", None),
            "packages": _packages(),
        }
    )
    for line in _requests:
        _only_parent()
        line = line.strip()
        if not line:
            continue
        req = {}
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "inputs":
                reply = op_inputs_simpler(req) if "simpler" in req else op_inputs(req)
            elif op == "golden":
                reply = op_golden_simpler(req) if "simpler" in req else op_golden(req)
            elif op == "describe":
                reply = op_describe(req)
            elif op == "compare_case":
                reply = op_compare_case(req)
            elif op == "replay_case":
                reply = op_replay_case(req)
            elif op == "compare":
                reply = op_compare(req)
            elif op == "host":
                reply = op_host(req)
            elif op == "quit":
                return
            else:
                raise CaseError("unknown op %r" % op)
            reply["ok"] = True
            reply["files"], reply["opaque"] = dependencies()
        except CaseError as e:
            reply = {"ok": False, "error": str(e), "traceback": None}
        except BaseException as e:  # noqa: BLE001 - user code may raise anything
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = {
                "ok": False,
                "error": "%s: %s" % (type(e).__name__, e),
                "traceback": user_traceback(e),
            }
        reply["id"] = req.get("id") if isinstance(req, dict) else None
        _send(reply)


main()
