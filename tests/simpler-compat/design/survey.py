#!/usr/bin/env python3
"""Survey the original project's scene-test files without importing them.

Usage: python3 survey.py SIMPLER_ROOT   (a checkout of hw-native-sys/simpler)

Parses every test_*.py under tests/st/a2a3 and examples/a2a3 with `ast`,
evaluates the class bodies' CALLABLE / CASES / RTOL / ... with a small
evaluator (literals, module constants, f-strings, arithmetic, D.IN-style
directions, deepcopy, {**x}, list comprehensions, attributes of classes in
the same or an imported test file), and prints counts of what the files use.
Values it cannot evaluate become <?>.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

if len(sys.argv) != 2:
    sys.exit("usage: survey.py SIMPLER_ROOT")
ROOT = Path(sys.argv[1])
DIRS = ["tests/st/a2a3", "examples/a2a3"]
SIM = "a2a3sim"


class Unknown:
    def __repr__(self):
        return "<?>"


UNK = Unknown()


class Direction(str):
    pass


class Func:
    """A Python function value (an L3 orchestration or sub callable)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<fn {self.name}>"


def is_manual_for_platform(manual, platform):
    # Same rule as the original (scene_test.py:888-899), re-stated.
    if isinstance(manual, str):
        return manual == platform
    if isinstance(manual, (list, tuple, set, frozenset)):
        return platform in manual
    if isinstance(manual, Unknown):
        return False
    return bool(manual)


# ---------------------------------------------------------------- modules


class Module:
    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.env: dict = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.class_cache: dict[str, dict] = {}
        self.imports: list[tuple[str, str, str | None, bool]] = []  # (module, name, asname, toplevel)
        self.import_modules: list[str] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node in self.tree.body
                for a in node.names:
                    self.imports.append((node.module, a.name, a.asname, top))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.import_modules.append(a.name)
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.env[node.name] = Func(node.name)
        # direction aliases
        for mod, name, asname, _ in self.imports:
            local = asname or name
            if mod == "simpler.task_interface" and name == "ArgDirection":
                self.env[local] = "ArgDirection"
            elif mod.startswith("tests.") or mod.startswith("examples."):
                self.env[local] = ("import", mod, name)
            elif local not in self.env:
                self.env[local] = UNK
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.env[node.targets[0].id] = self.eval(node.value, {})
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.env[node.target.id] = self.eval(node.value, {})

    # -------------------------------------------------------- evaluator
    def lookup(self, name, local):
        if name in local:
            return local[name]
        if name in self.env:
            v = self.env[name]
            if isinstance(v, tuple) and v and v[0] == "import":
                return resolve_import(v[1], v[2])
            return v
        if name in self.classes:
            return ("class", self, name)
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        return UNK

    def eval(self, node, local):  # noqa: PLR0911, PLR0912
        try:
            return self._eval(node, local)
        except Exception:  # noqa: BLE001
            return UNK

    def _eval(self, node, local):  # noqa: PLR0911, PLR0912
        ev = lambda n: self.eval(n, local)  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, local)
        if isinstance(node, ast.Attribute):
            base = ev(node.value)
            if base == "ArgDirection":
                return Direction(node.attr)
            if isinstance(base, tuple) and base and base[0] == "class":
                return class_attr(base[1], base[2], node.attr)
            return UNK
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = ev(e.value)
                    out.extend(v if isinstance(v, (list, tuple)) else [UNK])
                else:
                    out.append(ev(e))
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            d = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    sub = ev(v)
                    if isinstance(sub, dict):
                        d.update(sub)
                else:
                    d[ev(k)] = ev(v)
            return d
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                else:
                    x = ev(v.value)
                    if isinstance(x, Unknown):
                        return UNK
                    parts.append(str(x))
            return "".join(parts)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(a, Unknown) or isinstance(b, Unknown):
                return UNK
            ops = {
                ast.Add: lambda x, y: x + y,
                ast.Sub: lambda x, y: x - y,
                ast.Mult: lambda x, y: x * y,
                ast.FloorDiv: lambda x, y: x // y,
                ast.Div: lambda x, y: x / y,
                ast.Mod: lambda x, y: x % y,
                ast.Pow: lambda x, y: x**y,
                ast.LShift: lambda x, y: x << y,
            }
            return ops[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp):
            a = ev(node.operand)
            if isinstance(node.op, ast.USub):
                return -a
            if isinstance(node.op, ast.Not):
                return not a
            return a
        if isinstance(node, ast.Call):
            fname = ast.unparse(node.func)
            if fname in ("deepcopy", "copy.deepcopy", "dict", "list", "tuple") and len(node.args) == 1:
                v = ev(node.args[0])
                return tuple(v) if fname == "tuple" and isinstance(v, list) else v
            return UNK
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            g = node.generators[0]
            it = ev(g.iter)
            if not isinstance(it, (list, tuple)) or not isinstance(g.target, ast.Name):
                return UNK
            out = []
            for x in it:
                loc = dict(local)
                loc[g.target.id] = x
                if all(self.eval(c, loc) for c in g.ifs):
                    out.append(self.eval(node.elt, loc))
            return out
        return UNK


MODULES: dict[Path, Module] = {}


def load(path: Path) -> Module:
    path = path.resolve()
    if path not in MODULES:
        MODULES[path] = Module(path)
    return MODULES[path]


def resolve_import(module: str, name: str):
    p = ROOT / (module.replace(".", "/") + ".py")
    if not p.exists():
        return UNK
    m = load(p)
    if name in m.classes:
        return ("class", m, name)
    return m.env.get(name, UNK)


def class_attr(mod: Module, cname: str, attr: str):
    info = class_info(mod, cname)
    if attr in info["attrs"]:
        return info["attrs"][attr]
    for base in info["bases"]:
        if isinstance(base, tuple) and base and base[0] == "class":
            v = class_attr(base[1], base[2], attr)
            if not isinstance(v, Unknown):
                return v
    return UNK


def class_info(mod: Module, cname: str) -> dict:
    if cname in mod.class_cache:
        return mod.class_cache[cname]
    node = mod.classes[cname]
    info = {"attrs": {}, "methods": [], "bases": [], "decorators": [], "level": None, "runtime": None}
    mod.class_cache[cname] = info
    for b in node.bases:
        if isinstance(b, ast.Name) and b.id == "SceneTestCase":
            info["bases"].append("SceneTestCase")
        else:
            info["bases"].append(mod.eval(b, {}))
    for d in node.decorator_list:
        src = ast.unparse(d)
        info["decorators"].append(src)
        if isinstance(d, ast.Call) and ast.unparse(d.func) == "scene_test":
            args = [mod.eval(a, {}) for a in d.args]
            kw = {k.arg: mod.eval(k.value, {}) for k in d.keywords}
            info["level"] = kw.get("level", args[0] if args else None)
            info["runtime"] = kw.get("runtime", args[1] if len(args) > 1 else None)
    local: dict = {}
    for s in node.body:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name):
                    v = mod.eval(s.value, local)
                    info["attrs"][t.id] = v
                    local[t.id] = v
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value:
            v = mod.eval(s.value, local)
            info["attrs"][s.target.id] = v
            local[s.target.id] = v
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info["methods"].append(s.name)
    return info


def is_scene_class(mod: Module, cname: str, seen=()) -> bool:
    info = class_info(mod, cname)
    for b in info["bases"]:
        if b == "SceneTestCase":
            return True
        if isinstance(b, tuple) and b and b[0] == "class" and (b[1], b[2]) not in seen:
            if is_scene_class(b[1], b[2], seen + ((mod, cname),)):
                return True
    return False


def inherited(mod, cname, key, default=None):
    v = class_attr(mod, cname, key)
    return default if isinstance(v, Unknown) else v


def inherited_level(mod, cname):
    info = class_info(mod, cname)
    if info["level"] is not None:
        return info["level"], info["runtime"]
    for b in info["bases"]:
        if isinstance(b, tuple) and b and b[0] == "class":
            return inherited_level(b[1], b[2])
    return None, None


# ---------------------------------------------------------------- survey


def main():  # noqa: PLR0912, PLR0915
    files = sorted(p for d in DIRS for p in (ROOT / d).rglob("test_*.py"))
    imports = Counter()  # "module: name" -> files
    import_files = defaultdict(set)
    per_dir = Counter()
    classes = []
    module_tests = []
    scalar_kinds = Counter()
    dtype_tokens = Counter()
    for f in files:
        rel = f.relative_to(ROOT)
        per_dir["/".join(rel.parts[:4]) if rel.parts[0] == "tests" else "/".join(rel.parts[:3])] += 1
        m = load(f)
        seen = set()
        for mod, name, _as, top in m.imports:
            if mod.split(".")[0] in ("simpler_setup", "simpler", "_task_interface"):
                key = f"{mod}: {name}" + ("" if top else "   [only inside a function]")
                if key not in seen:
                    imports[key] += 1
                    seen.add(key)
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("Scalar", "add_scalar", "args.add_scalar"):
                if ast.unparse(node.func) == "Scalar" and len(node.args) >= 2:
                    v = node.args[1]
                    if isinstance(v, ast.Call):
                        scalar_kinds[ast.unparse(v.func)] += 1
                    elif isinstance(v, ast.Constant):
                        scalar_kinds[type(v.value).__name__ + " literal"] += 1
                    else:
                        scalar_kinds["variable (" + type(v).__name__ + ")"] += 1
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
                if node.attr in (
                    "float32", "float16", "bfloat16", "int32", "int16", "int8", "uint8",
                    "int64", "uint16", "uint32", "float64", "bool",
                ):
                    dtype_tokens[node.attr] += 1
        for node in m.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                module_tests.append((str(rel), node.name, [ast.unparse(d) for d in node.decorator_list]))
        for cname in m.classes:
            if not is_scene_class(m, cname):
                continue
            info = class_info(m, cname)
            level, runtime = inherited_level(m, cname)
            classes.append((rel, m, cname, info, level, runtime))

    out = []
    w = out.append
    w(f"files: {len(files)}")
    for d, n in sorted(per_dir.items()):
        w(f"  {n:3d}  {d}")
    w("")
    w("imports from simpler / simpler_setup / _task_interface (number of files):")
    for k, n in sorted(imports.items(), key=lambda kv: (-kv[1], kv[0])):
        w(f"  {n:3d}  {k}")
    w("")
    w("module-level test_* functions (plain pytest tests, not SceneTestCase):")
    for rel, name, decs in module_tests:
        w(f"  {rel}::{name}  {' '.join('@' + d for d in decs)}")
    w("")

    collected = [c for c in classes if c[2].startswith("Test")]
    helper = [c for c in classes if not c[2].startswith("Test")]
    w(f"SceneTestCase subclasses: {len(classes)} ({len(collected)} named Test* and collected by pytest; "
      f"helpers: {', '.join(c[2] for c in helper) or '-'})")
    lv = Counter((int(c[4]) if c[4] is not None else None, c[5]) for c in collected)
    for (level, rt), n in sorted(lv.items(), key=str):
        w(f"  level {level}  runtime {rt}: {n}")
    w("")

    attr_use = Counter()
    meth_use = Counter()
    marks = Counter()
    rtol_vals = Counter()
    case_keys = Counter()
    config_keys = Counter()
    runtime_env_keys = Counter()
    manual_forms = Counter()
    orch_keys = Counter()
    incore_keys = Counter()
    core_types = Counter()
    l3_entry_keys = Counter()
    sig_dirs = Counter()
    param_dtype = Counter()
    n_cases = n_sim = n_sim_manual = 0
    buckets = Counter()
    bucket_cases = defaultdict(list)
    cls_rows = []
    std_methods = {"generate_args", "compute_golden", "compare_outputs"}
    for rel, m, cname, info, level, runtime in collected:
        for a in info["attrs"]:
            attr_use[a] += 1
        for meth in info["methods"]:
            meth_use[meth] += 1
        for d in info["decorators"]:
            if d.startswith("pytest.mark"):
                marks[d] += 1
        pm = info["attrs"].get("pytestmark")
        if pm is not None:
            marks["pytestmark = ..."] += 1
        rt, at = inherited(m, cname, "RTOL", 1e-5), inherited(m, cname, "ATOL", 1e-5)
        rtol_vals[f"RTOL={rt} ATOL={at}"] += 1
        callable_spec = inherited(m, cname, "CALLABLE", {}) or {}
        if isinstance(callable_spec, dict):
            entries = []
            if "callables" in callable_spec:
                cl = callable_spec.get("callables")
                for e in cl if isinstance(cl, list) else []:
                    if isinstance(e, dict):
                        l3_entry_keys[",".join(sorted(map(str, e)))] += 1
                        if "orchestration" in e:
                            entries.append(e)
            else:
                entries.append(callable_spec)
            for e in entries:
                orch = e.get("orchestration", {})
                if isinstance(orch, dict):
                    for k in orch:
                        orch_keys[k] += 1
                    sig = orch.get("signature", [])
                    for d in sig if isinstance(sig, list) else [UNK]:
                        sig_dirs[str(d)] += 1
                incs = e.get("incores", [])
                for k in incs if isinstance(incs, list) else []:
                    if isinstance(k, dict):
                        for kk in k:
                            incore_keys[kk] += 1
                        core_types[str(k.get("core_type"))] += 1
        cases = inherited(m, cname, "CASES", []) or []
        overrides = sorted(x for x in info["methods"] if x not in std_methods)
        test_methods = [x for x in info["methods"] if x.startswith("test_")]
        # bucket
        if level is not None and int(level) == 3:
            bucket = "L3"
        elif set(test_methods) - {"test_run"} or {"_run_and_validate_l2", "_run_and_validate"} & set(overrides):
            bucket = "L2, white-box (own test_* methods or _run_and_validate_l2 override)"
        elif "test_run" in test_methods:
            bucket = "L2, test_run override (calls super; post-checks only with a diagnostic flag)"
        elif any(x.startswith("_") for x in overrides):
            bucket = "L2, standard flow + private hook override"
        else:
            bucket = "L2, standard flow"
        buckets[bucket] += 1
        c_sim = c_man = 0
        for case in cases if isinstance(cases, list) else []:
            if not isinstance(case, dict):
                continue
            n_cases += 1
            for k in case:
                case_keys[k] += 1
            cfg = case.get("config", {})
            if isinstance(cfg, dict):
                for k in cfg:
                    config_keys[k] += 1
                re_ = cfg.get("runtime_env", {})
                if isinstance(re_, dict):
                    for k, v in re_.items():
                        runtime_env_keys[f"{k} ({'list' if isinstance(v, list) else 'scalar'})"] += 1
            if "manual" in case:
                mv = case["manual"]
                manual_forms[type(mv).__name__ + (f" {mv}" if isinstance(mv, (list, str)) else f" {mv}")] += 1
            params = case.get("params", {})
            if isinstance(params, dict) and "dtype" in params:
                param_dtype[str(params["dtype"])] += 1
            plats = case.get("platforms", [])
            if isinstance(plats, list) and SIM in plats:
                n_sim += 1
                c_sim += 1
                man = is_manual_for_platform(case.get("manual"), SIM)
                if man:
                    n_sim_manual += 1
                    c_man += 1
                bucket_cases[bucket].append((man, f"{cname}::{case.get('name')}"))
        cls_rows.append((str(rel), cname, level, runtime, len(cases) if isinstance(cases, list) else "?", c_sim, c_man,
                         bucket, overrides))

    w("class attributes set in the class body (classes):")
    for k, n in attr_use.most_common():
        w(f"  {n:3d}  {k}")
    w("methods defined in the class body (classes):")
    for k, n in meth_use.most_common():
        w(f"  {n:3d}  {k}")
    w("pytest marks on classes:")
    for k, n in marks.most_common():
        w(f"  {n:3d}  {k}")
    w("effective RTOL/ATOL (classes):")
    for k, n in rtol_vals.most_common():
        w(f"  {n:3d}  {k}")
    w("")
    w("CALLABLE: orchestration keys (chip entries):")
    for k, n in orch_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("CALLABLE: incore keys (incores):")
    for k, n in incore_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("incore core_type:")
    for k, n in core_types.most_common():
        w(f"  {n:3d}  {k}")
    w("L3 CALLABLE['callables'] entry key sets:")
    for k, n in l3_entry_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("orchestration signature directions (entries):")
    for k, n in sig_dirs.most_common():
        w(f"  {n:3d}  {k}")
    w("")
    w(f"CASES: {n_cases} cases in {len(collected)} collected classes")
    w("case keys (cases):")
    for k, n in case_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("config keys (cases):")
    for k, n in config_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("config.runtime_env keys (cases):")
    for k, n in runtime_env_keys.most_common():
        w(f"  {n:3d}  {k}")
    w("'manual' values (cases):")
    for k, n in manual_forms.most_common():
        w(f"  {n:3d}  {k}")
    w("params['dtype'] values (cases):")
    for k, n in param_dtype.most_common():
        w(f"  {n:3d}  {k}")
    w("Scalar(name, value) value expressions (call sites):")
    for k, n in scalar_kinds.most_common():
        w(f"  {n:3d}  {k}")
    w("torch dtype tokens (occurrences, all files):")
    for k, n in dtype_tokens.most_common():
        w(f"  {n:4d}  torch.{k}")
    w("")
    w(f"cases listing {SIM}: {n_sim}; manual on {SIM}: {n_sim_manual}; "
      f"per-PR (not manual) on {SIM}: {n_sim - n_sim_manual}")
    w("")
    w(f"classes and {SIM} cases by how the class runs:")
    for b, n in sorted(buckets.items()):
        cs = bucket_cases[b]
        w(f"  {b}: {n} classes; {SIM} cases {len(cs)} (manual {sum(1 for x in cs if x[0])}, "
          f"per-PR {sum(1 for x in cs if not x[0])})")
    by_rt = Counter()
    for r in cls_rows:
        by_rt[(f"L{r[2]}", r[3], "cases")] += r[4] if isinstance(r[4], int) else 0
        by_rt[(f"L{r[2]}", r[3], SIM)] += r[5]
        by_rt[(f"L{r[2]}", r[3], "manual")] += r[6]
    w(f"by level/runtime: cases | listing {SIM} | manual on {SIM} | per-PR on {SIM}")
    for lvl, rtm in sorted({(k[0], k[1]) for k in by_rt}, key=str):
        c, s_, mn = by_rt[(lvl, rtm, "cases")], by_rt[(lvl, rtm, SIM)], by_rt[(lvl, rtm, "manual")]
        w(f"  {lvl} {rtm}: {c} | {s_} | {mn} | {s_ - mn}")
    w("")
    w(f"per class: file | class | level runtime | cases | {SIM} cases | manual on {SIM} | kind | other methods")
    for r in cls_rows:
        w(f"  {r[0]} | {r[1]} | L{r[2]} {r[3]} | {r[4]} | {r[5]} | {r[6]} | {r[7]} | {','.join(r[8]) or '-'}")
    w("")
    w(f"{SIM} cases, per-PR (not manual), standard L2 flow:")
    for b in ("L2, standard flow", "L2, standard flow + private hook override",
              "L2, test_run override (calls super; post-checks only with a diagnostic flag)"):
        for man, label in bucket_cases.get(b, []):
            if not man:
                w(f"  [{b.split(', ', 1)[1].split(' (')[0]}] {label}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
