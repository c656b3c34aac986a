"""What a person reads: one line per fact for each verb's results."""
from __future__ import annotations

from pathlib import Path

from patchspec.compiler.drift import USES, Drift
from patchspec.compiler.plan import Resolved
from patchspec.errors import severity_exit
from patchspec.releases.matrix import Matrix
from patchspec.releases.report import DriftResult, row_line
from patchspec.results import Row


def check_line(r: Row) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and r.verdict is None else ""
    return f"{r.status}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} in {where}{detail}"


def plan_line(r: Resolved) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and not r.ok else f" ({r.note})" if r.note else ""
    state = "would apply" if r.ok else r.status
    return f"{state}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} at {where}{detail}"


def report_lines(result: DriftResult) -> list[str]:
    counts: dict[str, int] = {}
    for r in result.rows:
        counts[r.drift] = counts.get(r.drift, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    firsts = {r.target: r.index for r in reversed(result.rows)}
    hint = ""
    if result.baseline is None and any(r.drift in (Drift.CHANGED, Drift.TARGET_MISSING)
                                       for r in result.rows):
        hint = "; --baseline DIR (or pypi) shows what changed, where anchors moved, and ranks renamed targets"
    return [row_line(r, firsts[r.target] == r.index) for r in result.rows] + [
        f"drift of {result.spec.name} against release {result.release} ({result.note}): {summary}; "
        f"exit {severity_exit(result.code)}{hint}"]


def _transform(index: int, kind: str) -> str:
    return kind if kind == USES else f"{index} {kind}"


def matrix_markdown(m: Matrix) -> list[str]:
    head = ["target", "transform"] + [f"{Path(root).name} ({release})" for root, release in m.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for target, index, kind in m.rows:
        lines.append("| " + " | ".join([target, _transform(index, kind), *m.cells[(target, index)]]) + " |")
    return lines


def matrix_text(m: Matrix) -> list[str]:
    table = [["target", "transform"] + [Path(root).name for root, _ in m.columns]]
    table += [[target, _transform(index, kind), *m.cells[(target, index)]] for target, index, kind in m.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]

