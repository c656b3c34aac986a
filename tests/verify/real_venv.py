"""A venv with real releases from PyPI installed by pip (their compiled modules included, which
``pypi_root``'s unpacked sources leave out), wheels taken from the cache the other tiers fill."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchspec.releases.cache import cache_dir
from tests.verify_toy import make_venv


def pip_venv(where: Path, *requirements: str) -> tuple[Path, Path]:
    """``(python, site-packages)`` of a new venv holding ``requirements`` and their dependencies, as
    ``pip install`` lays them out (wheels only; built for this interpreter, which the venv runs)."""
    python, site = make_venv(where)
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--only-binary", ":all:", "--find-links", str(wheels), "--target", str(site),
                           *requirements], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"pip could not install {' '.join(requirements)}: "
                    f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return python, site
