"""Recorded steps -> the spec's YAML, its snippet module (when code moved there) and the files on disk.

Each step becomes the transform that mirrors it (``replace``, ``remove``, ``set``, ``guard``,
``insert_before``/``insert_after``, ``add_method``, ``add_attribute``, ``add_import``). The insert kinds
take one line of code: a multi-line statement inserted next to an anchor becomes a ``replace`` of the
anchor by both. A ``guard`` names its run of statements in full up to three statements, else by its
first and last with ``...`` between.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from patchspec.errors import PatchspecError
from patchspec.record.diff import Drafted, Step
from patchspec.record.targets import SNIPPET_ALIAS


@dataclass
class Draft:
    """The spec and snippet module a recording comes to, before it is written."""

    name: str
    summary: str
    targets: list[Drafted]
    imports: dict[str, list[str]]       # file -> add_import statements
    snippet_code: list[str]              # moved definitions, in order
    snippet_imports: list[str]

    @property
    def package(self) -> str:
        return self.name.replace("-", "_")

    @property
    def alias(self) -> str:
        return "_" + self.package

    @property
    def has_snippets(self) -> bool:
        return bool(self.snippet_code)

    def spec_data(self) -> dict:
        data: dict = {"spec": 1, "name": self.name, "summary": self.summary}
        if self.has_snippets:
            data["snippets"] = {"package": self.package, "alias": self.alias}
        ids: set[str] = set()
        targets = []
        pending_imports = {f: list(v) for f, v in self.imports.items()}
        for target in self.targets:
            transforms = [t for step in target.steps for t in transform_of(step, self.alias)]
            transforms = [{"add_import": {"import": i}} for i in pending_imports.pop(target.file, [])] + transforms
            if not transforms:
                continue
            targets.append({"id": _unique_id(target.qualname, ids), "file": target.file,
                            "function": target.qualname, "transforms": transforms})
        for file, statements in pending_imports.items():   # a file whose only change is an import
            raise PatchspecError(f"{file}: the change only adds imports ({statements[0]}): nothing to carry")
        data["targets"] = targets
        return data

    def spec_text(self) -> str:
        return ("# Drafted by patchspec record: each transform says one statement of the change; review it\n"
                "# against the change, then apply it.\n" + yaml.dump(self.spec_data(), Dumper=_Dumper,
                                                                    sort_keys=False, width=110,
                                                                    allow_unicode=True))

    def snippet_text(self) -> str:
        head = [f'"""The runtime of the {self.name} spec, recorded by patchspec record: the code its change '
                'adds, which the patched\nfiles bind (add_method, add_import). Imports nothing from patchspec."""',
                "from __future__ import annotations", ""]
        if self.snippet_imports:
            head += [*self.snippet_imports, ""]
        head += ["# What the hooks rely on in the patched package (see `patchspec check`).",
                 "USES: dict[str, list[str]] = {}"]
        return "\n".join(head) + "\n\n\n" + "\n\n\n".join(self.snippet_code) + "\n"


def transform_of(step: Step, alias: str) -> list[dict]:
    keys = {k: v.replace(SNIPPET_ALIAS, alias) if k == "value" else v for k, v in step.keys.items()}
    if step.kind == "replace":
        return [{"replace": {"pattern": keys["pattern"], "by": keys["code"]}}]
    if step.kind == "remove":
        return [{"remove": {"statement": keys["anchor"]}}]
    if step.kind == "set":
        return [{"set": {k: keys[k] for k in ("parameter", "name", "value") if k in keys}}]
    if step.kind == "guard":
        return [{"guard": {"statements": keys["statements"], "by": keys["by"]}}]
    if step.kind in ("insert_before", "insert_after"):
        lines = keys["code"].split("\n")
        if all(_one_statement(line) for line in lines):
            return [{step.kind: {"anchor": keys["anchor"], "code": line}} for line in lines]
        both = [keys["code"], keys["full"]] if step.kind == "insert_before" else [keys["full"], keys["code"]]
        return [{"replace": {"pattern": keys["full"], "by": "\n".join(both)}}]
    return [{step.kind: dict(keys)}]


def _one_statement(line: str) -> bool:
    try:
        return len(ast.parse(line).body) == 1 and not line[:1].isspace()
    except SyntaxError:
        return False


def _unique_id(qualname: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", qualname.lower()).strip("-") or "target"
    found, n = base, 2
    while found in taken:
        found, n = f"{base}-{n}", n + 1
    taken.add(found)
    return found


class _Dumper(yaml.SafeDumper):
    """Code on several lines as a block scalar (``|``), as a person writes it."""


def _str(dumper: yaml.SafeDumper, value: str):
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value.rstrip("\n") + "\n", style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def paths(draft: Draft, directory: Path, release: str) -> dict[str, Path]:
    out = {"spec": directory / f"{draft.name}.yaml", "profile": directory / "releases" / f"{release}.yaml"}
    if draft.has_snippets:
        out["snippets"] = directory / "runtime_snippets" / draft.package / "__init__.py"
    return out


def write(draft: Draft, where: dict[str, Path]) -> list[Path]:
    """The spec and snippet module (the profile is drafted after them); refuses to overwrite anything."""
    existing = [p for p in where.values() if p.exists()]
    if existing:
        raise PatchspecError(f"{existing[0]} exists; nothing was written", file=str(existing[0]))
    texts = {where["spec"]: draft.spec_text()}
    if "snippets" in where:
        texts[where["snippets"]] = draft.snippet_text()
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(texts)


def remove(written: list[Path], directory: Path, created: bool) -> None:
    """Take back what ``write`` (and the profile draft) wrote, and the directories left empty (``directory``
    itself when record ``created`` it)."""
    for path in written:
        path.unlink(missing_ok=True)
        for parent in path.parents:
            if not parent.exists():
                continue
            if not parent.is_relative_to(directory) or (parent == directory and not created) \
                    or any(parent.iterdir()):
                break
            parent.rmdir()
