"""YAML loading that remembers where every mapping key and sequence item starts, with bounded work.

Errors in a spec must name file, line and column; PyYAML's nodes carry those marks, so the loader keeps
them beside the plain data: ``LocMap`` and ``LocList`` are a dict and a list with a ``locs`` table.
What patchspec reads may be hostile: a file is read only when it is a regular file no larger than
``MAX_BYTES``; nesting deeper than ``MAX_DEPTH`` is refused while composing (before PyYAML's recursion
runs out), and a document whose aliases expand to more than ``MAX_NODES`` nodes (a billion laughs) or
refer to a node they are inside is refused before anything is built of it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from patchspec.errors import PatchspecError

MAX_BYTES = 512 * 1024   # 50 times the largest shipped spec
MAX_DEPTH = 64           # a spec's own structure is 8 deep
MAX_NODES = 100_000      # mappings, sequences and scalars, each alias counted as what it expands to


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
    depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep "
                                                  "(patchspec's limit)", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        data = LocMap()
        data.start = _mark(node)
        self.flatten_mapping(node)
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.MarkedYAMLError(problem=f"a mapping key must be text, not a "
                                           f"{'sequence' if isinstance(key_node, yaml.SequenceNode) else 'mapping'}",
                                           problem_mark=key_node.start_mark)
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


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _bounded(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past ``MAX_NODES`` or ``MAX_DEPTH``, or loop; each node is
    measured once (without recursion), so an alias bomb costs its size on disk, not its expansion."""
    size: dict[int, tuple[int, int]] = {}   # id(node) -> (nodes, depth) expanded
    open_: set[int] = set()
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, measured = todo.pop()
        if measured:
            open_.discard(id(node))
            parts = [size[id(child)] for child in _children(node)]
            size[id(node)] = (1 + sum(n for n, _ in parts), 1 + max((d for _, d in parts), default=0))
            if size[id(node)][0] > MAX_NODES:
                raise yaml.MarkedYAMLError(problem=f"aliases expand this to more than {MAX_NODES:,} nodes "
                                           "(patchspec's limit)", problem_mark=node.start_mark)
            if size[id(node)][1] > MAX_DEPTH:
                raise yaml.MarkedYAMLError(problem=f"aliases nest this more than {MAX_DEPTH} levels deep "
                                           "(patchspec's limit)", problem_mark=node.start_mark)
        elif id(node) in open_:
            raise yaml.MarkedYAMLError(problem="an alias refers to a node it is inside",
                                       problem_mark=node.start_mark)
        elif id(node) not in size:
            open_.add(id(node))
            todo.append((node, True))
            todo.extend((child, False) for child in _children(node))


def read(path: Path, what: str) -> bytes:
    """The bytes of the file at ``path``, refused in one line unless it is a regular file of at most
    ``MAX_BYTES`` (a FIFO, ``/dev/zero`` or a directory is never read: it could block or never end)."""
    file = str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise PatchspecError(f"{what} is not a regular file; nothing was read", file=file)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise PatchspecError(f"cannot read {what}: {exc.strerror}", file=file) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):   # replaced since the check
            raise PatchspecError(f"{what} is not a regular file; nothing was read", file=file)
        data = handle.read(MAX_BYTES + 1)
    _check_size(len(data), file)
    return data


def _check_size(size: int, file: str) -> None:
    if size > MAX_BYTES:
        raise PatchspecError(f"larger than {MAX_BYTES // 1024} KiB, the most patchspec reads of a YAML file",
                             file=file, line=1, col=1)


def load(text: str, file: str):
    """Parse YAML text; a syntax error, or a document over the limits, becomes a ``PatchspecError`` at its
    line and column."""
    _check_size(len(text) if len(text) > MAX_BYTES else len(text.encode("utf-8", "surrogatepass")), file)
    loader = None
    try:
        loader = _Loader(text)   # the reader refuses a non-printable character here already
        node = loader.get_single_node()
        if node is None:
            return None
        _bounded(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        raise PatchspecError(f"YAML: {what}", file=file, line=mark.line + 1 if mark else None,
                             col=mark.column + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise PatchspecError(f"YAML: the control character U+{exc.character:04X} is not allowed in YAML",
                             file=file, line=line, col=col) from None
    except yaml.YAMLError as exc:
        raise PatchspecError(f"YAML: {exc}", file=file) from None
    finally:
        if loader is not None:
            loader.dispose()


def locate(data, path) -> tuple[int, int]:
    """The line and column of the node at ``path`` (keys and indexes), or of its deepest known parent."""
    where = getattr(data, "start", (1, 1))
    for part in path:
        try:
            if isinstance(data, LocMap):
                where = data.locs.get(part, where)
            elif isinstance(data, LocList):
                where = data.locs[part]
            data = data[part]
        except (KeyError, IndexError, TypeError):
            break
    return where
