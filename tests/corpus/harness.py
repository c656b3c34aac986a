"""The corpus driver: real packages from PyPI patched everywhere their top-level names reach, and counted.

For each package of ``packages.toml`` (nothing about one package is in this code): install it pinned into
the cache, walk what its top-level names reach in its own interpreter (``reach.py survey``), generate one
spec that targets every public function, method, property accessor and class found (an insert at the
first statement and a wrap, each counting; a ``set`` of the first parameter default to a counted copy of
itself; an added method on each class), and a compiled object's pure-Python twin as a user would target
it. Then:

1. ``check`` until every transform left resolves: what it refuses is a refusal, false when callers reach
   the definition (the survey found it live);
2. run the smoke program pristine under coverage;
3. ``apply --no-verify``, ``verify`` (the proof apply runs as its last step, here per transform, so one
   not-live transform does not undo the others), the smoke program patched with the counters, which then
   checks through the public paths alone whether what callers reach carries each change; ``unapply``;
4. ``apply`` with its proof of the transforms verify called live, and ``unapply``.

Per transform: verify "live" where callers reach no change is silently wrong, and so is a hook that did
not fire where the pristine line ran; "not live" where callers reach the change is a false not-live.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from patchspec.releases.cache import cache_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PACKAGES = HERE / "packages.toml"
REACH = HERE / "reach.py"
SNIPPETS = HERE / "runtime_snippets"
COVERAGE = "coverage==7.6.1"
ADDED = "ps_corpus_added"
SPEC_NAME = "corpus"
LIVE_CLAIMS = {"live", "static"}
ADDRESS = re.compile(r"0x[0-9a-f]{6,}|(?<=@ )\d{8,}")   # an object's address, as repr shows it


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    top: str
    smoke: str
    deps: tuple[str, ...] = ()
    slice: bool = False
    compiled: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def packages(path: Path = PACKAGES) -> list[Package]:
    entries = tomllib.loads(path.read_text())["package"]
    return [Package(e["name"], e["version"], e["import"], e["smoke"], tuple(e.get("deps", ())),
                    e.get("slice", False), e.get("compiled", False)) for e in entries]


def open_classes(path: Path = PACKAGES) -> dict[str, str]:
    """The classes found and not fixed yet, each with the issue that carries it (``[open]``)."""
    return tomllib.loads(path.read_text()).get("open", {})


def _pip_target(dest: Path, requirements: list[str]) -> Path:
    """``pip install --target`` once into the cache; an interrupted install is redone, never half used."""
    if (dest / ".complete").exists():
        return dest
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                           "--target", str(partial), *requirements], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(requirements)}: {done.stderr.strip().splitlines()[-1:]}")
    (partial / ".complete").write_text("")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest


def install(pkg: Package) -> Path:
    return _pip_target(cache_dir() / "corpus" / pkg.key, [f"{pkg.name}=={pkg.version}", *pkg.deps])


def coverage_dir() -> Path:
    return _pip_target(cache_dir() / "corpus" / COVERAGE.replace("==", "-"), [COVERAGE])


def reach(request: dict, work: Path) -> dict:
    ask, answer = work / "request.json", work / "answer.json"
    ask.write_text(json.dumps(request))
    answer.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, str(REACH), str(ask), str(answer)], capture_output=True, text=True,
                          cwd=work, timeout=600)
    if done.returncode != 0 or not answer.exists():
        raise RuntimeError(f"reach.py {request['mode']}: {done.stderr.strip()[-2000:]}")
    return json.loads(answer.read_text())


# -- the package's definitions as its source says them ----------------------------------------------------

@dataclass
class Definition:
    file: str                     # relative to the root
    qualname: str
    first: int                    # the first decorator's line, else the def's (a code object's co_firstlineno)
    node: ast.AST


def definitions(root: Path, rel: str) -> list[Definition]:
    """Every def and class of a file at module and class level (inside if/try/with blocks too)."""
    try:
        tree = ast.parse((root / rel).read_bytes())
    except (SyntaxError, ValueError):
        return []
    found: list[Definition] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                found.append(Definition(rel, prefix + node.name, first, node))
                if isinstance(node, ast.ClassDef):
                    walk(node.body, f"{prefix}{node.name}.")
            else:
                for block in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, block, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                        walk([s for h in inner for s in (h.body if isinstance(h, ast.excepthandler) else [h])],
                             prefix)
    walk(tree.body, "")
    return found


# -- the generated transforms ---------------------------------------------------------------------------

@dataclass
class Transform:
    id: str
    kind: str                     # insert_before, wrap, set, add_method
    file: str
    function: str                 # the spec's target name
    body: dict                    # the transform as the spec writes it
    check: dict                   # what reach.py checks on the public paths
    reachable: bool               # callers reach this definition (the survey found it live, not a compiled twin)
    lines: list[int] = field(default_factory=list)   # pristine lines whose running means the hook must fire
    hit: str | None = None        # the counter that fires when it runs
    source: str = ""              # how the survey found it, for the report
    def_lines: tuple[int, ...] = ()   # its definition's first decorator and def lines
    branch: str | None = None     # the if/try block, when the refusal asked for one


class Generator:
    def __init__(self, root: Path, survey: dict) -> None:
        self.root = root
        self.survey = survey
        self.pkgdir = Path(survey["pkgdir"])
        self.files = sorted(str(p.relative_to(root)) for p in
                            ([self.pkgdir] if self.pkgdir.is_file() else self.pkgdir.rglob("*.py")))
        self.index: dict[str, list[Definition]] = {rel: definitions(root, rel) for rel in self.files}
        self.transforms: list[Transform] = []
        self.done: set[tuple[str, str, str]] = set()

    def rel(self, path: str) -> str:
        return str(Path(path).resolve().relative_to(self.root.resolve()))

    def add(self, kind: str, file: str, function: str, body: dict, check: dict, reachable: bool, **extra) -> None:
        if (kind, file, function) in self.done:
            return
        self.done.add((kind, file, function))
        tid = f"t{len(self.transforms)}"
        body = json.loads(json.dumps(body).replace("@ID@", tid))
        check = {"id": tid, "kind": kind, "file": file, **check, "key": f"corpus:{tid}"}
        self.transforms.append(Transform(tid, kind, file, function, body, check, reachable, **extra))

    def function(self, d: Definition, target: str, paths: list, accessor: str | None, reachable: bool,
                 source: str) -> None:
        node = d.node
        source = {"source": source, "def_lines": (d.first, node.lineno)}
        body = node.body
        stmts = body[1:] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) else body
        text = (self.root / d.file).read_text(encoding="utf-8", errors="replace")
        common = {"paths": paths, "accessor": accessor, "qualname": d.qualname}
        first_line = [stmts[0].lineno] if stmts else []
        if stmts:
            anchor = ast.get_source_segment(text, stmts[0], padded=True)
            if anchor:
                anchor = textwrap.dedent(anchor)
                self.add("insert_before", d.file, target, {"insert_before": {"anchor": anchor,
                                                                              "code": "_ch.hit('corpus:@ID@')"}},
                         common, reachable, lines=first_line, hit="key", **source)
        wrap_key = f"wrap:{self.root.resolve() / d.file}:{d.qualname}"
        self.add("wrap", d.file, target, {"wrap": {"with": "counted"}}, {**common, "wrap_key": wrap_key},
                 reachable, lines=first_line or [body[0].lineno], hit=wrap_key, **source)
        args = node.args
        positional = args.posonlyargs + args.args
        defaults = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
        defaults += [(a, v) for a, v in zip(args.kwonlyargs, args.kw_defaults, strict=True) if v is not None]
        if defaults:
            param, value = defaults[0]
            old = ast.get_source_segment(text, value)
            if old:
                self.add("set", d.file, target, {"set": {"parameter": param.arg,
                                                         "value": f"_ch.dflt('corpus:@ID@', {old})"}},
                         common, reachable, lines=list(range(d.first, node.lineno + 1)), hit="key", **source)

    def klass(self, d: Definition, paths: list, reachable: bool, source: str) -> None:
        self.add("add_method", d.file, d.qualname, {"add_method": {"name": ADDED, "with": "added"}},
                 {"paths": paths, "qualname": d.qualname}, reachable, source=source,
                 def_lines=(d.first, d.node.lineno))

    def find(self, rel: str, qualname: str, first: int | None = None) -> Definition | None:
        found = [d for d in self.index.get(rel, []) if d.qualname == qualname and (first is None or d.first == first)]
        return found[-1] if found else None

    def generate(self) -> list[Transform]:
        for entry in self.survey["defs"]:
            if entry["kind"] == "function":
                rel = self.rel(entry["file"])
                d = self.find(rel, entry["qualname"], entry["firstlineno"])
                if d is not None and not isinstance(d.node, ast.ClassDef):
                    self.function(d, entry["target"], entry["paths"], entry["accessor"], True, "live")
            elif not entry.get("skip"):
                d = self.class_definition(entry)
                if d is not None:
                    self.klass(d, entry["paths"], True, "live")
        for entry in self.survey["compiled"]:
            for d in self.twins(entry):
                if isinstance(d.node, ast.ClassDef):
                    self.klass(d, entry["paths"], False, f"twin of {entry['module']}.{entry['qualname']}")
                    for member in self.index[d.file]:
                        name = member.qualname[len(d.qualname) + 1:]
                        if member.qualname.startswith(d.qualname + ".") and "." not in name and _public(name) \
                                and not isinstance(member.node, ast.ClassDef):
                            self.function(member, member.qualname, [p + [name] for p in entry["paths"]], None, False,
                                          f"twin of {entry['module']}.{entry['qualname']}")
                else:
                    self.function(d, d.qualname, entry["paths"], None, False,
                                  f"twin of {entry['module']}.{entry['qualname']}")
        return self.transforms

    def class_definition(self, entry: dict) -> Definition | None:
        """The class's definition: in the file its methods' code says (a reassigned ``__module__`` misleads
        ``inspect``), else in its module's file, else the one file of the package that defines it."""
        module_file = entry.get("module_file") or ""
        candidates = [self.rel(f) for f in entry["files"]]
        if module_file.endswith(".py"):
            candidates.append(self.rel(module_file))
        candidates += self.files
        for rel in candidates:
            d = self.find(rel, entry["qualname"])
            if d is not None and isinstance(d.node, ast.ClassDef):
                return d
        return None

    def twins(self, entry: dict) -> list[Definition]:
        """What a user reading the sources would patch for a compiled object: the definition of that name in
        the ``.py`` beside the compiled module (mypyc, Cython), else in the package's other modules (a pure
        fallback such as ``_native.py``)."""
        module_file = entry.get("module_file") or ""
        qualname = entry["qualname"]
        beside = ""
        if module_file and not module_file.endswith(".py"):
            name = Path(module_file).name.split(".", 1)[0]
            beside = self.rel(str(Path(module_file).with_name(name + ".py")))
        if beside in self.index:
            d = self.find(beside, qualname)
            return [d] if d is not None else []
        return [d for rel in self.files for d in [self.find(rel, qualname)] if d is not None]


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__") and len(name) > 4)


# -- the spec and the verbs -----------------------------------------------------------------------------

def write_spec(spec_dir: Path, pkg: Package, transforms: list[Transform]) -> dict[str, range]:
    """The spec (one target per transform, so that an error's line names its transform) and its profile;
    returns each transform's lines in the spec."""
    spec_dir.mkdir(parents=True, exist_ok=True)
    if not (spec_dir / "runtime_snippets").exists():
        shutil.copytree(SNIPPETS, spec_dir / "runtime_snippets", ignore=shutil.ignore_patterns("__pycache__"))
    head = yaml.safe_dump({"spec": 1, "name": SPEC_NAME, "summary": f"the corpus run of {pkg.key}",
                           "snippets": {"package": "corpus_hooks", "alias": "_ch"}}, sort_keys=False)
    lines = head.splitlines() + ["targets:"]
    spans: dict[str, range] = {}
    for t in transforms:
        target = {"id": t.id, "file": t.file, "function": t.function, **({"branch": t.branch} if t.branch else {}),
                  "transforms": [t.body]}
        chunk = yaml.safe_dump([target], sort_keys=False, width=1000).splitlines()
        start = len(lines) + 1
        lines += ["  " + line for line in chunk]
        spans[t.id] = range(start, len(lines) + 1)
    (spec_dir / "corpus.yaml").write_text("\n".join(lines) + "\n")
    (spec_dir / "releases").mkdir(exist_ok=True)
    (spec_dir / "releases" / f"{pkg.key}.yaml").write_text(yaml.safe_dump({
        "release": pkg.key, "packages": {pkg.top: {"versions": f"=={pkg.version}", "distributions": [pkg.name]}},
        "specs": {SPEC_NAME: {}}}, sort_keys=False))
    return spans


def patchspec(*args: str, timeout: float = 900) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "patchspec", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=timeout)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        return done.returncode, {"error": {"message": (done.stderr or done.stdout).strip()[-500:], "locations": []},
                                 "results": []}


# -- the classes of what goes wrong ---------------------------------------------------------------------

def shape(text: str) -> str:
    """A message with its names, paths, numbers and quoted code taken out: one class per shape."""
    text = text.split("\n", 1)[0]
    text = re.sub(r"`[^`]*`", "`X`", text)
    text = re.sub(r"'[^']*'", "'X'", text)
    text = re.sub(r'"[^"]*"', '"X"', text)
    text = re.sub(r"(/[\w.+-]+)+", "PATH", text)
    text = re.sub(r"\b[\w]+(\.[\w<>]+)+\b", "NAME", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


@dataclass
class Tally:
    package: str
    generated: int = 0
    transforms: int = 0
    applied: int = 0
    live: int = 0
    silent_wrong: int = 0
    false_not_live: int = 0
    false_refusals: int = 0
    correct_refusals: int = 0
    correct_not_live: int = 0
    fired: int = 0
    seconds: float = 0.0
    classes: dict[str, list] = field(default_factory=dict)   # class -> [count, example]

    COUNTS = ("generated", "transforms", "applied", "live", "silent_wrong", "false_not_live", "false_refusals",
              "correct_refusals", "correct_not_live", "fired")

    FAILING = ("silent wrong", "false ", "the patched program", "the pristine smoke", "apply with its proof",
               "the driver", "check refuses", "apply refuses", "verify fails")

    def failures(self, tolerated: tuple[str, ...] = ()) -> dict[str, list]:
        """The classes that are something wrong (not a right refusal, a right not-live, or a taken way
        through), less those that start with a ``tolerated`` name."""
        return {cls: entry for cls, entry in self.classes.items()
                if cls.startswith(self.FAILING) and not cls.startswith(tolerated)}

    def note(self, cls: str, example: str) -> None:
        entry = self.classes.setdefault(cls, [0, example])
        entry[0] += 1

    def line(self) -> str:
        counts = " ".join(f"{k}={getattr(self, k)}" for k in self.COUNTS)
        return f"{self.package}: {counts} seconds={self.seconds:.0f}"

    def add(self, other: Tally) -> None:
        for k in self.COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.seconds += other.seconds
        for cls, (count, example) in other.classes.items():
            entry = self.classes.setdefault(cls, [0, example])
            entry[0] += count


# -- one package ----------------------------------------------------------------------------------------

class Run:
    def __init__(self, pkg: Package, work: Path, log=print, most: int | None = None) -> None:
        self.pkg = pkg
        self.most = most
        self.work = work
        self.log = log
        self.tally = Tally(pkg.key)
        self.root = work / "root"
        self.spec_dir = work / "spec"

    def run(self) -> Tally:
        start = time.monotonic()
        installed = install(self.pkg)
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        shutil.copytree(installed, self.root, symlinks=True, ignore=shutil.ignore_patterns(".complete"))
        steps: list[str] = []

        def step(name: str, began: float) -> float:
            now = time.monotonic()
            steps.append(f"{name} {now - began:.1f}s")
            return now

        survey = reach({"mode": "survey", "root": str(self.root), "top": self.pkg.top, "depth": 1}, self.work)
        transforms = Generator(self.root, survey).generate()
        self.tally.generated = len(transforms)
        if self.most and len(transforms) > self.most:   # an even sample, every module's share kept
            step_by = len(transforms) / self.most
            transforms = [transforms[int(i * step_by)] for i in range(self.most)]
        self.tally.transforms = len(transforms)
        began = step("survey", start)
        kept = self.settle(transforms, "check")
        began = step("check", began)
        pristine = self.smoke(str(coverage_dir()), [], survey)
        if pristine["error"]:
            self.tally.note(f"the pristine smoke program fails: {shape(pristine['error'])}",
                            f"{self.pkg.key}: {pristine['error']}")
        began = step("pristine", began)
        kept = self.settle(kept, "apply", "--no-verify")
        self.tally.applied = len(kept)
        began = step("apply", began)
        verdicts = self.verify(kept)
        began = step("verify", began)
        patched = self.smoke(None, [t.check for t in kept], survey)
        patchspec("unapply", SPEC_NAME, "--root", str(self.root))
        began = step("patched+unapply", began)
        self.judge(kept, verdicts, pristine, patched)
        self.prove_live([t for t in kept if verdicts.get(t.id, ("", ""))[0] in LIVE_CLAIMS])
        step("apply with proof+unapply", began)
        self.tally.seconds = time.monotonic() - start
        self.log(f"  {self.pkg.key}: {', '.join(steps)}")
        return self.tally

    def spec_args(self) -> list[str]:
        return [str(self.spec_dir / "corpus.yaml"), "--root", str(self.root)]

    def settle(self, transforms: list[Transform], verb: str, *extra: str) -> list[Transform]:
        """Run ``verb`` until what is left resolves; every transform it refuses is judged and dropped."""
        kept = list(transforms)
        for _ in range(len(transforms) + 1):
            if not kept:
                return kept
            spans = write_spec(self.spec_dir, self.pkg, kept)
            code, out = patchspec(verb, *self.spec_args(), *extra, "--python", sys.executable) if verb == "apply" \
                else patchspec(verb, *self.spec_args())
            refused: dict[str, str] = {}
            for row in out.get("results", []):
                if row.get("type") == "transform" and row.get("status") not in ("would-apply", "applied", None):
                    refused[row["target"]] = f"{row['status']}: {row.get('detail', '')}"
            error = out.get("error")
            if error and not refused:
                lines = [loc.get("line") for loc in error.get("locations", []) if loc.get("line")]
                hit = [tid for tid, span in spans.items() for line in lines if line in span]
                if not hit:
                    self.tally.note(f"{verb} refuses the whole spec: {shape(error['message'])}", error["message"])
                    self.log(f"  {self.pkg.key}: {verb} refused the whole spec: {error['message']}")
                    return []
                refused = {tid: error["message"] for tid in hit}
            if not refused:
                return kept
            for t in kept:
                if t.id in refused and self.take_branch(t, refused[t.id]):
                    del refused[t.id]
                elif t.id in refused:
                    self.refusal(t, verb, refused[t.id])
            kept = [t for t in kept if t.id not in refused]
        return kept

    def take_branch(self, t: Transform, message: str) -> bool:
        """A definition in several if/try blocks: choose the one the survey found live (or the one holding
        it), by the label the refusal lists for its line, as a user would."""
        listed = re.split(r" (?:defined|bound) in several branches: ", message, maxsplit=1)[-1]
        labels = {int(m.group(2)): m.group(1) for m in re.finditer(r"(?:^|, )(.+?) \(line (\d+)[:)]", listed)}
        # the block whose binding is the definition, or holds it (a method's class): the last line at or before it
        before = [line for line in labels if t.def_lines and line <= max(t.def_lines)]
        chosen = labels[max(before)] if before else None
        if t.branch is not None or chosen is None:
            return False
        t.branch = chosen
        self.tally.note(f"asks for `branch:` ({t.kind}), taken from its message", f"{self.pkg.key} {t.function}: "
                        f"{message}")
        return True

    def refusal(self, t: Transform, verb: str, message: str) -> None:
        generated_ambiguity = message.startswith("ambiguous") and t.kind == "insert_before"
        example = f"{self.pkg.key} {t.file}:{t.function} {t.kind}: {message}"
        if t.reachable and not generated_ambiguity:
            self.tally.false_refusals += 1
            self.tally.note(f"false refusal ({verb}, {t.kind}): {shape(message)}", example)
        else:
            self.tally.correct_refusals += 1
            why = "an anchor the generator took that recurs in the function" if generated_ambiguity \
                else "callers reach a compiled object, not this definition"
            self.tally.note(f"refused, rightly ({why}; {t.kind}): {shape(message)}", example)

    def verify(self, kept: list[Transform]) -> dict[str, tuple[str, str]]:
        if not kept:
            return {}
        code, out = patchspec("verify", SPEC_NAME, "--root", str(self.root), "--python", sys.executable)
        if out.get("error"):
            self.tally.note(f"verify fails: {shape(out['error']['message'])}", out["error"]["message"])
        return {row["target"]: (row["status"], row.get("detail", "")) for row in out.get("results", [])
                if row.get("type") == "transform"}

    def smoke(self, coverage: str | None, checks: list[dict], survey: dict) -> dict:
        return reach({"mode": "run", "root": str(self.root), "top": self.pkg.top, "program": self.pkg.smoke,
                      "coverage": coverage, "pkgdir": survey["pkgdir"], "checks": checks}, self.work)

    def judge(self, kept: list[Transform], verdicts: dict, pristine: dict, patched: dict) -> None:
        before, after = (ADDRESS.sub("0x?", r["stdout"]) for r in (pristine, patched))   # reprs' addresses differ
        if patched["error"] != pristine["error"] or before != after:
            # past the shorter output's end the default says it
            diff = next((f"{a!r} -> {b!r}" for a, b in zip(before.splitlines(), after.splitlines(), strict=False)
                         if a != b),
                        patched["error"] or "the output's length changed")
            self.tally.note(f"the patched program behaves otherwise: {shape(patched['error'] or 'output differs')}",
                            f"{self.pkg.key}: {diff}")
        ran_lines = pristine["lines"]
        for t in kept:
            status, detail = verdicts.get(t.id, ("no-verdict", "verify gave no row"))
            fired = bool(patched["hits"].get(t.check["key"] if t.hit == "key" else t.hit or "", 0))
            carried = bool(patched["carried"].get(t.id))
            truth = carried or fired
            ran = any(line in ran_lines.get(t.file, ()) for line in t.lines)
            example = f"{self.pkg.key} {t.file}:{t.function} {t.kind} ({t.source}): verify {status}: {detail}"
            self.tally.fired += fired
            if status in LIVE_CLAIMS:
                self.tally.live += 1
                if not truth:
                    self.tally.silent_wrong += 1
                    why = "callers reach a compiled object" if not t.reachable else "no public name carries it"
                    self.tally.note(f"silent wrong ({t.kind}, {why}): verify {status}: {shape(detail)}", example)
                elif ran and t.hit and not fired:
                    self.tally.silent_wrong += 1
                    self.tally.note(f"silent wrong ({t.kind}): the pristine line ran, the hook did not fire",
                                    example)
            elif truth:
                self.tally.false_not_live += 1
                self.tally.note(f"false not-live ({t.kind}): {shape(detail)}", example)
            else:
                self.tally.correct_not_live += 1
                self.tally.note(f"not live, rightly ({t.kind}, {'compiled' if not t.reachable else 'unreached'})"
                                f": {shape(detail)}", example)

    def prove_live(self, live: list[Transform]) -> None:
        """``apply`` with its proof, of the transforms verify called live: it must keep them applied."""
        if not live:
            return
        write_spec(self.spec_dir, self.pkg, live)
        code, out = patchspec("apply", *self.spec_args(), "--python", sys.executable)
        if code != 0:
            message = (out.get("error") or {}).get("message", f"exit {code}")
            self.tally.note(f"apply with its proof undoes what verify called live: {shape(message)}",
                            f"{self.pkg.key}: {message}")
        patchspec("unapply", SPEC_NAME, "--root", str(self.root))


def run_all(chosen: list[Package], work: Path, log=print, most: int | None = None) -> tuple[list[Tally], Tally]:
    """Each package in turn; its tally is also written to ``work/KEY.tally.json`` as soon as it is known,
    so that a run cut short, or run in shards, is still reported (``saved``)."""
    tallies = []
    for pkg in chosen:
        try:
            tally = Run(pkg, work / pkg.key, log, most).run()
        except Exception as exc:  # noqa: BLE001 - one package that cannot run is a finding, not the end
            tally = Tally(pkg.key)
            tally.note(f"the driver could not run the package: {type(exc).__name__}", f"{pkg.key}: {exc}"[:500])
        work.mkdir(parents=True, exist_ok=True)
        (work / f"{pkg.key}.tally.json").write_text(json.dumps(dataclasses.asdict(tally)))
        log(tally.line())
        tallies.append(tally)
    return tallies, totals(tallies)


def saved(works: list[Path]) -> list[Tally]:
    """The tallies a run (or its shards) wrote, in the order of packages.toml."""
    order = {p.key: i for i, p in enumerate(packages())}
    found = {t.package: t for w in works for t in (Tally(**json.loads(f.read_text())) for f in w.glob("*.tally.json"))}
    return sorted(found.values(), key=lambda t: order.get(t.package, len(order)))   # a later WORK's run wins


def totals(tallies: list[Tally]) -> Tally:
    total = Tally("total")
    for tally in tallies:
        total.add(tally)
    return total


def report(tallies: list[Tally], total: Tally) -> list[str]:
    lines = [t.line() for t in tallies]
    lines.append("classes (count, one example):")
    for cls, (count, example) in sorted(total.classes.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {count:5d}  {cls}")
        lines.append(f"         e.g. {example[:400]}")
    return lines


def counts_total(total: Tally) -> collections.OrderedDict:
    return collections.OrderedDict((k, getattr(total, k)) for k in Tally.COUNTS)
