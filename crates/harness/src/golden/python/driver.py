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
#   request: {"op": "inputs" | "golden" | "compare" | "host", "id": n, ...}  ->
#            {"id": n, "ok": true, "files": [...], "opaque": [...], ...} or
#            {"id": n, "ok": false, "error": "...", "traceback": "..." | null}
#
# `compare` (after the device stage) calls the scene's
# `FUNCTION(name, actual, expected, params)` and replies
# {"passed": bool, "detail": "..."} besides the above.
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
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str):
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


def load(path, sys_path):
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    mod = _modules.get(path)
    if mod is None:
        name = "scene_py_%d" % len(_modules)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
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
    """A level-3 host step: FUNCTION(tensors, params) on the step's tensors."""
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


def _short_repr(value):
    text = repr(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return "%s %s" % (type(value).__name__, text)


def user_traceback(exc):
    """The traceback without this driver's own frames."""
    tb = exc.__traceback__
    here = os.path.abspath(__file__) if "__file__" in globals() else "<string>"
    while tb is not None and tb.tb_frame.f_code.co_filename in (here, "<string>"):
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
                reply = op_inputs(req)
            elif op == "golden":
                reply = op_golden(req)
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
