"""Import the original's a2a3 test files with scenes' own compatibility
packages (crates/harness/src/golden/python/compat, or COMPAT_DIR), describe
every class, and run generate_args + compute_golden of every a2a3sim case of
the standard level-2 flow; prints a JSON summary. Needs torch.
Usage: trial.py SIMPLER_ROOT [COMPAT_DIR]"""
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

root = Path(sys.argv[1]).resolve()
os.environ["SCENE_SIMPLER_ROOT"] = str(root)
compat = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[3] / "crates/harness/src/golden/python/compat"
sys.path.insert(0, str(compat))
sys.path.insert(1, str(root))  # `from tests.st... import` / `examples...`

import torch  # noqa: E402
from simpler.task_interface import ArgDirection  # noqa: E402
from simpler_setup import SceneTestCase, TensorArg, Scalar  # noqa: E402

STANDARD = {"generate_args", "compute_golden", "compare_outputs"}
files = sorted(p for d in ["tests/st/a2a3", "examples/a2a3"] for p in (root / d).rglob("test_*.py"))
summary = {"files": len(files), "import_failed": [], "classes": 0, "cases_sim": 0, "fixtures_ok": 0,
           "fixtures_failed": [], "not_standard": [], "timings": []}
for f in files:
    rel = f.relative_to(root).with_suffix("")
    modname = ".".join(rel.parts)
    try:
        spec = importlib.util.spec_from_file_location(modname, f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001
        summary["import_failed"].append(f"{rel}: {type(e).__name__}: {e}"[:200])
        continue
    for cls in vars(mod).values():
        if not (isinstance(cls, type) and issubclass(cls, SceneTestCase) and cls is not SceneTestCase
                and cls.__module__ == modname and getattr(cls, "CASES", None)):
            continue
        summary["classes"] += 1
        own = {n for n in vars(cls) if callable(vars(cls)[n]) and not n.startswith("__")}
        extra = own - STANDARD
        level = int(getattr(cls, "_st_level", 0))
        for case in cls.CASES:
            if "a2a3sim" not in case.get("platforms", []):
                continue
            summary["cases_sim"] += 1
            label = f"{rel}::{cls.__name__}::{case['name']}"
            if level != 2 or extra & {"test_run", "_run_and_validate_l2", "_build_config"} or [n for n in extra if n.startswith("test_")]:
                summary["not_standard"].append(f"{label} (level {level}; {sorted(extra)})")
                continue
            try:
                t0 = time.perf_counter()
                obj = cls()
                params = case.get("params", {})
                args = obj.generate_args(params)
                sig = cls.CALLABLE["orchestration"].get("signature", [])
                tensors = [s for s in args.specs if isinstance(s, TensorArg)]
                if len(tensors) > len(sig):
                    raise ValueError(f"{len(tensors)} tensors, signature of {len(sig)}")
                outs = [t.name for t, d in zip(tensors, sig) if d in (ArgDirection.OUT, ArgDirection.INOUT)]
                t1 = time.perf_counter()
                golden = args.clone()
                if not case.get("skip_golden", cls.SKIP_GOLDEN):
                    obj.compute_golden(golden, params)
                t2 = time.perf_counter()
                summary["fixtures_ok"] += 1
                summary["timings"].append((label, round(t1 - t0, 3), round(t2 - t1, 3),
                                           [(t.name, str(t.value.dtype).replace("torch.", ""), list(t.value.shape)) for t in tensors][:3], outs))
            except Exception as e:  # noqa: BLE001
                summary["fixtures_failed"].append(f"{label}: {type(e).__name__}: {e}"[:300])
print(json.dumps(summary, indent=1))
