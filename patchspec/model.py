"""The validated spec: plain frozen data, built by ``patchspec.spec`` and read by ``compiler``."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

MARKER = "# patchspec: "  # then the spec's name: the trailing comment on every line a spec writes


def package_of(rel: str) -> str:
    """The top-level import name a root-relative file belongs to (``docopt`` for a one-module ``docopt.py``)."""
    first, sep, _ = rel.partition("/")
    return first if sep else first.removesuffix(".py")


@dataclass(frozen=True)
class Loc:
    """Where a YAML node starts (1-based line and column), for error messages."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Transform:
    kind: str
    params: dict[str, str]
    index: int
    loc: Loc
    param_locs: dict[str, Loc] = field(default_factory=dict, compare=False)
    acknowledge: frozenset[str] = frozenset()   # the rules of its kind the spec means to pass (``acknowledge:``)

    def at(self, key: str) -> Loc:
        return self.param_locs.get(key, self.loc)


@dataclass(frozen=True)
class Target:
    id: str
    file: str
    function: str
    transforms: tuple[Transform, ...]
    loc: Loc
    branch: str | None = None   # which ``if``/``try`` block's definition, when several define the name

    @property
    def package(self) -> str:
        return package_of(self.file)


@dataclass(frozen=True)
class ObsoleteWhen:
    file: str
    function: str
    contains: str
    loc: Loc


@dataclass(frozen=True)
class Spec:
    name: str
    summary: str
    snippet_package: str | None   # None: no snippets (a spec of rewrites only)
    alias: str | None
    targets: tuple[Target, ...]
    obsolete_when: tuple[ObsoleteWhen, ...]
    path: str
    sha256: str
    snippet_dir: str | None = None
    order: int = 0              # stacking: specs editing one place apply by (order, name)
    snippets_loc: Loc | None = field(default=None, compare=False)   # the ``snippets:`` key in the spec
    deprecations: tuple[str, ...] = field(default=(), compare=False)  # keys of an older format, read all the same

    @property
    def rank(self) -> tuple[int, str]:
        """Where this spec's edits go among other specs' edits of the same place."""
        return self.order, self.name

    def with_targets(self, targets: tuple[Target, ...]) -> Spec:
        return replace(self, targets=targets)

    @property
    def marker(self) -> str:
        return f"{MARKER}{self.name}"
