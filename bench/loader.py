"""Bytes read and seconds per pipeline stage when vLLM's real safetensors iterator loads a generated
2-stage checkpoint, stock against the pipeline-parallel spec, side by side in one run.

The checkpoint is Llama-shaped (tied embedding, consecutive tensors per shard, as checkpoints are
saved). Each stage runs ``tests/vllm/loader_run.py`` in its own process on a gloo world of two, with the
page cache dropped before it loads; the stages load one after the other. "requested" is the bytes of
the tensors safetensors handed out; "disk" is the checkpoint pages resident afterwards, read-ahead
included (this disk reads ahead 8 MiB on a miss, so it is coarse for small shards). The last line is
key=value pairs. Usage: python bench/loader.py [--release 0.30.0] [--layers 8] [--hidden 512]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vllm"))
from vllm_checkpoint import write  # noqa: E402
from vllm_runs import release_roots, result, start_stages  # noqa: E402

from patchspec.cache import pypi_root  # noqa: E402

SHARDS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="0.30.0")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-loader-"))
    checkpoint = work / "checkpoint"
    sizes = {n: v["bytes"] for n, v in write(checkpoint, args.layers, args.hidden, SHARDS).items()}
    total = sum(f.stat().st_size for f in checkpoint.glob("*.safetensors"))
    roots = dict(zip(("stock", "patched"), release_roots(pypi_root(f"vllm=={args.release}"), work / "roots")))
    print(f"vLLM {args.release}, {args.layers} layers, hidden {args.hidden}, {SHARDS} shards, "
          f"{total / 2**20:.1f} MiB on disk ({work})", flush=True)
    print(f"{'variant':8} {'stage':>5} {'tensors':>7} {'requested MiB':>13} {'disk MiB':>8} {'seconds':>7}")
    fields = {"checkpoint_mib": f"{total / 2**20:.1f}"}
    for variant, root in roots.items():  # one variant at a time: the page cache is shared
        stages = [result(p) for p in start_stages(root, checkpoint, 2, work / "reads" / variant)]
        for rank, stage in enumerate(stages):
            requested = sum(sizes[n] for n in stage["read"]) / 2**20
            disk = stage["disk_bytes"] / 2**20
            print(f"{variant:8} {rank:>5} {len(stage['tensors']):>7} {requested:>13.1f} {disk:>8.1f} "
                  f"{stage['seconds']:>7.3f}", flush=True)
            fields |= {f"{variant}_stage{rank}_requested_mib": f"{requested:.1f}",
                       f"{variant}_stage{rank}_disk_mib": f"{disk:.1f}",
                       f"{variant}_stage{rank}_s": f"{stage['seconds']:.3f}"}
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
