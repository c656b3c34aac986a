"""The two-node tier reuses the e2e tier's harness (tests/e2e) and its read counter."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
