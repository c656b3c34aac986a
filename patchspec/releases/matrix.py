"""The matrix verb: the drift class of every target and transform on several roots, one column each."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from patchspec.compiler.drift import USES, Drift
from patchspec.releases.report import drift
from patchspec.results import Record


@dataclass
class Matrix:
    columns: list[tuple[str, str]]              # (root, release compared with)
    rows: list[tuple[str, int, str]]            # (target, transform index, kind)
    cells: dict[tuple[str, int], list[Drift]]   # one drift class per column

    @property
    def code(self) -> int:
        return max((c.severity for cells in self.cells.values() for c in cells), default=0)

    def records(self) -> list[Record]:
        return [MatrixColumn(root, release) for root, release in self.columns] + [
            MatrixRow(t, i, k, self.cells[(t, i)]) for t, i, k in self.rows]


@dataclass(frozen=True)
class MatrixColumn(Record):
    """A root of the matrix and the release it was compared with."""

    TYPE: ClassVar[str] = "matrix-column"
    root: str
    release: str


@dataclass(frozen=True)
class MatrixRow(Record):
    """A transform (or a snippet binding) of the matrix: its drift class on each root, in column order."""

    TYPE: ClassVar[str] = "matrix-row"
    target: str
    index: int
    kind: str
    cells: list[Drift]


def matrix(spec_path: str, roots: list[str], release: str = "auto", use_cache: bool = True) -> Matrix:
    """One row per target and transform, one column per root, each cell the drift class there; then one
    row per snippet binding that does not hold on some root (``bound`` where it does)."""
    results = [drift(spec_path, root, release, use_cache=use_cache) for root in roots]
    out = Matrix([(root, r.release) for root, r in zip(roots, results, strict=True)], [], {})
    for result in results:
        for row in result.rows:
            if row.kind == USES:  # said below, for every root
                continue
            key = (row.target, row.index)
            if key not in out.cells:
                out.rows.append((row.target, row.index, row.kind))
                out.cells[key] = []
            out.cells[key].append(row.drift)
    failing = {b.target for r in results for b in r.bindings if b.severity}
    for target in dict.fromkeys(b.target for r in results for b in r.bindings if b.target in failing):
        out.rows.append((target, 0, USES))
        out.cells[(target, 0)] = [next((b.drift for b in r.bindings if b.target == target), Drift.NOT_CHECKED)
                                  for r in results]
    return out
