"""YAML loading that remembers where every mapping key and sequence item starts.

Errors in a spec must name file, line and column; PyYAML's nodes carry those marks, so the loader keeps
them beside the plain data: ``LocMap`` and ``LocList`` are a dict and a list with a ``locs`` table.
"""
from __future__ import annotations

import yaml

from patchspec.errors import PatchspecError


class LocMap(dict):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.locs: dict[object, tuple[int, int]] = {}
        self.start: tuple[int, int] = (1, 1)


class LocList(list):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.locs: list[tuple[int, int]] = []
        self.start: tuple[int, int] = (1, 1)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        data = LocMap()
        data.start = _mark(node)
        self.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in data:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark)
            data[key] = self.construct_object(value_node, deep=True)
            data.locs[key] = _mark(value_node) if isinstance(value_node, yaml.CollectionNode) \
                else _mark(key_node)
        return data

    def construct_sequence(self, node, deep=False):
        data = LocList(self.construct_object(child, deep=True) for child in node.value)
        data.start = _mark(node)
        data.locs = [_mark(child) for child in node.value]
        return data


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _Loader.construct_sequence)


def load(text: str, file: str):
    """Parse YAML text; a syntax error becomes a ``PatchspecError`` at its line and column."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader derives from SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        raise PatchspecError(f"YAML: {what}", file=file, line=mark.line + 1 if mark else None,
                             col=mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise PatchspecError(f"YAML: {exc}", file=file) from None


def locate(data, path) -> tuple[int, int]:
    """The line and column of the node at ``path`` (keys and indexes), or of its deepest known parent."""
    where = getattr(data, "start", (1, 1))
    for part in path:
        locs = getattr(data, "locs", None)
        try:
            if isinstance(data, LocMap):
                where = locs.get(part, where)
            elif isinstance(data, LocList):
                where = locs[part]
            data = data[part]
        except (KeyError, IndexError, TypeError):
            break
    return where
