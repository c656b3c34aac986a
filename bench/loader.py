"""Bytes read and seconds per pipeline stage for each of vLLM's weight iterators and load strategies
on a generated 2-stage checkpoint, stock against the pipeline-parallel spec, side by side in one run.

The checkpoint is Llama-shaped (tied embedding, consecutive tensors per shard, as checkpoints are
saved), as safetensors shards and the same shards as ``.bin`` files. Each stage runs
``tests/vllm/loader_run.py`` in its own process on a gloo world of two, with the page cache dropped
before each load; the stages load one after the other. The kinds are ``loader_run.KINDS`` plus the
lazy safetensors iterator; fastsafetensors and instanttensor need CUDA, so their rows run vLLM's
iterators for them with the libraries' device readers replaced by CPU readers of every file handed to
them, as theirs read on the device (what the spec changes for them is that file list). "requested" is the
bytes of the tensors safetensors handed out (the kinds that read through its ``safe_open``); "disk" is the
checkpoint pages resident afterwards, read-ahead included. The last line is key=value pairs.
Usage: python bench/loader.py [--release 0.30.0] [--layers 8] [--hidden 512]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vllm"))
from loader_run import KINDS  # noqa: E402
from vllm_checkpoint import write  # noqa: E402
from vllm_runs import release_roots, result, start_stages  # noqa: E402

from patchspec.releases.cache import pypi_root  # noqa: E402

SHARDS = 4
# Kinds that read without safetensors' safe_open: no tensor-level count, pages only.
UNNAMED = {"eager", "pt", "pt-multithread", "npcache"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="0.30.0")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-loader-"))
    checkpoint = work / "checkpoint"
    sizes = {n: v["bytes"] for n, v in write(checkpoint, args.layers, args.hidden, SHARDS, pt=True).items()}
    total = sum(f.stat().st_size for f in checkpoint.glob("*.safetensors"))
    roots = dict(zip(("stock", "fix"), release_roots(pypi_root(f"vllm=={args.release}"), work / "roots"), strict=True))
    kinds = ["safetensors", *KINDS]
    print(f"vLLM {args.release}, {args.layers} layers, hidden {args.hidden}, {SHARDS} shards, "
          f"{total / 2**20:.1f} MiB of safetensors on disk ({work})", flush=True)
    runs = {variant: [result(p) for p in start_stages(root, checkpoint, 2, work / "reads" / variant,
                                                      iterator=",".join(kinds))]
            for variant, root in roots.items()}  # one variant at a time: the page cache is shared
    print(f"{'kind':16} {'stage':>5} {'tensors':>15} {'requested MiB':>15} {'disk MiB':>15} "
          f"{'seconds':>15}   (stock / fix)")
    fields = {"checkpoint_mib": f"{total / 2**20:.1f}"}
    for kind in kinds:
        for rank in (0, 1):
            row = {}
            for variant in roots:
                stage = runs[variant][rank][kind]
                row[variant] = (len(stage["tensors"]), sum(sizes[n] for n in stage["read"]) / 2**20,
                                stage["disk_bytes"] / 2**20, stage["seconds"])
                fields |= {f"{kind}_stage{rank}_disk_mib_{variant}": f"{row[variant][2]:.1f}",
                           f"{kind}_stage{rank}_s_{variant}": f"{row[variant][3]:.3f}"}
            (ts, rs, ds, ss), (tf, rf, df, sf) = row["stock"], row["fix"]
            requested = "-" if kind in UNNAMED else f"{rs:.1f} / {rf:.1f}"
            print(f"{kind:16} {rank:>5} {f'{ts} / {tf}':>15} {requested:>15} "
                  f"{f'{ds:.1f} / {df:.1f}':>15} {f'{ss:.3f} / {sf:.3f}':>15}", flush=True)
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
