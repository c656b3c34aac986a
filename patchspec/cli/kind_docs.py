"""The kinds' rows of the docs and the spec schema's transforms, generated from the descriptors
(``compiler.kind.Kind``) as the output schema is from the records: a kind added in one file appears in each.

``python -m patchspec.cli.kind_docs`` rewrites docs/spec-language.md's kinds table, docs/verify.md's table
of live checks and the transforms of ``patchspec/schema/spec.schema.json``; tests keep all three current.
"""
from __future__ import annotations

import json
from pathlib import Path

from patchspec.compiler.kind import Live
from patchspec.compiler.transforms import KINDS, docs_table, transform_schema
from patchspec.proof import DEFAULT

REPO = Path(__file__).resolve().parents[2]
SPEC_LANGUAGE = REPO / "docs" / "spec-language.md"
VERIFY = REPO / "docs" / "verify.md"
SCHEMA = Path(__file__).resolve().parent.parent / "schema" / "spec.schema.json"

# what each check of the probe shows (``install/probe.HOW``), in the order the verify table lists them
SHOWN_LIVE_WHEN: dict[Live | str, str] = {
    Live.CODE_LINES: (
        'the function the live name leads to, through `__wrapped__` chains, is the patched definition (its '
        "file, its first line) and its code object equals the file's text compiled now; each line the "
        'transform put there has code in it (nested code objects too); those lines are its own edits\' '
        '(`plan.edited_lines`: the spec emitted with and without the transform, mapped onto the file as '
        'patched), never the same text elsewhere in the target'),
    Live.WRAPPED: (
        "the live object's `__wrapped__` chain reaches the patched definition (as above), through a wrapper "
        "whose code is the snippet package's; a hook that returned the function itself is live too, and said "
        'so'),
    DEFAULT: (
        'the function the live name leads to is the patched definition (as above) and its '
        "`__defaults__`/`__kwdefaults__` hold the new default: equal to the spec's literal, the object its "
        'dotted name reads, or (another expression) there, computed by the patched text; a default is '
        "evaluated where the `def` runs, so no line of the function's code carries it"),
    Live.CLASS_MEMBER: (
        'the live class is the patched one (its qualified name, and its module, or, when the package '
        "reassigns `__module__` as httpx does, a function of its namespace whose code is the patched file's),"
        " it has the member in its own namespace, a method is the snippet's function"),
    Live.MODULE_NAME: 'the live module binds every name the import binds',
    Live.BINDING: (
        "the live module (or the patched class) binds each name (the target's own, or those the statements "
        'bind)'),
}


def _name(check: Live | str) -> str:
    return check.value if isinstance(check, Live) else check


def verify_table() -> str:
    """docs/verify.md's table: per check, the kinds (or the cases of a kind, ``Kind.live_cases``) it shows."""
    cases: dict[str, list[str]] = {_name(check): [] for check in SHOWN_LIVE_WHEN}
    for kind in KINDS.values():
        for check, name in kind.live_cases or ((kind.live.value, kind.name),):
            cases[check].append(name)
    rows = [f"| `{check.name if isinstance(check, Live) else check}` | {', '.join(cases[_name(check)])} | {when} |"
            for check, when in SHOWN_LIVE_WHEN.items()]
    return "\n".join(["| `Live` | kinds | shown live when |", "| --- | --- | --- |", *rows]) + "\n"


def schema_text(current: str) -> str:
    """The spec schema's text with its ``transform`` definition the registry's, one line per kind."""
    fragment = transform_schema()
    lines = ['    "transform": {'] + [f'      "{key}": {json.dumps(value)},' for key, value in fragment.items()
                                     if key != "properties"]
    lines += ['      "properties": {', *[f'        "{name}": {json.dumps(k)},' for name, k in
                                          fragment["properties"].items()]]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["      }", "    }"]
    head, rest = current.split('    "transform": {\n', 1)
    return head + "\n".join(lines) + "\n" + rest.split("\n    }\n", 1)[1]


def between(text: str, start: str, end: str, table: str) -> str:
    """``text`` with what lies between the marker lines ``start`` and ``end`` replaced by ``table``."""
    head, rest = text.split(start, 1)
    first, rest = rest.split("\n", 1)
    return f"{head}{start}{first}\n{table}{end}{rest.split(end, 1)[1]}"


SPEC_MARKERS = ("<!-- kinds:", "<!-- /kinds -->")
VERIFY_MARKERS = ("<!-- live checks:", "<!-- /live checks -->")


def generated() -> dict[Path, str]:
    """Each file as the descriptors make it."""
    return {SPEC_LANGUAGE: between(SPEC_LANGUAGE.read_text(encoding="utf-8"), *SPEC_MARKERS, docs_table()),
            VERIFY: between(VERIFY.read_text(encoding="utf-8"), *VERIFY_MARKERS, verify_table()),
            SCHEMA: schema_text(SCHEMA.read_text(encoding="utf-8"))}


if __name__ == "__main__":
    for path, text in generated().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
