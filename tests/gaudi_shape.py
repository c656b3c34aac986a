"""The vllm-gaudi-shaped fixture laid out as ``vllm_gaudi/`` under a root: our own CPU runner and worker in
the shape of vllm-gaudi's, kept under other names so that no tracked file has an upstream source's path."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

SHAPE = Path(__file__).resolve().parent / "fixtures" / "gaudi_shape"
LAYOUT = {"runner.py": "vllm_gaudi/v1/worker/hpu_model_runner.py", "worker.py": "vllm_gaudi/v1/worker/hpu_worker.py",
          "bucketing.py": "vllm_gaudi/extension/bucketing/common.py",
          "input_batch.py": "vllm_gaudi/v1/worker/hpu_input_batch.py",
          "runtime.py": "vllm_gaudi/extension/runtime.py"}
PACKAGES = ["vllm_gaudi", "vllm_gaudi/v1", "vllm_gaudi/v1/worker", "vllm_gaudi/extension",
            "vllm_gaudi/extension/bucketing"]


def fixture_root() -> Path:
    """A read-only root holding the fixture as ``vllm_gaudi/``, made once per content."""
    digest = hashlib.sha256(b"".join((SHAPE / name).read_bytes() for name in sorted(LAYOUT))).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f"patchspec-gaudi-fixture-{digest}"
    if not root.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
        for package in PACKAGES:
            (staging / package).mkdir(parents=True, exist_ok=True)
            (staging / package / "__init__.py").write_text('"""Fixture package in the shape of vllm-gaudi."""\n')
        for name, rel in LAYOUT.items():
            shutil.copyfile(SHAPE / name, staging / rel)
        try:
            os.rename(staging, root)
        except OSError:  # another process made it first
            shutil.rmtree(staging)
    return root
