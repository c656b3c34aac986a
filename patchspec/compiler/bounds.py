"""How big and how deep a code string may be before a Python parser sees it.

libcst's native parser overflows its stack on a few thousand nested brackets (the process dies of
SIGSEGV) and its work grows faster than the text with depth (five thousand ``1+`` terms take minutes);
``ast`` and the compiler raise ``RecursionError``. So a pattern or a code string is measured first, in one
linear pass that parses nothing: its length, its bracket nesting, and an upper bound of its syntax tree's
depth (indentation, brackets, and the operators, keywords and trailers chained within one item, each of
which can add a level), and refused over the limits below, far above any code a spec carries.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    chars: int | None   # the text's length
    nesting: int        # brackets open at once
    depth: int          # the bound of the tree's depth described above


# A spec's pattern or code string (libcst needs seconds for 20,000 characters of nested brackets).
CODE = Limits(chars=20_000, nesting=50, depth=200)
# A target's definition in an installed file, which Python's own parser read first (200 brackets at most);
# libcst takes a second over 2,000 chained operators, and its visitors recurse per level.
SOURCE = Limits(chars=None, nesting=200, depth=1_000)

_CHAINING = frozenset({"not", "and", "or", "if", "else", "lambda", "await", "in", "is", "for", "yield"})
_TOKEN = re.compile(r"""
    (?P<string>(?i:[rbuf]{0,3})(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<comment>\#[^\n]*)
  | (?P<name>[^\W\d]\w*)
  | (?P<number>\d[\w.]*)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<newline>\n[ \t\f]*)
  | (?P<separator>[,;])
  | (?P<dots>\.+)
  | (?P<operator>[-+*/%@&|^~<>=!]+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def refusal(text: str, limits: Limits = CODE) -> str | None:
    """Why ``text`` is too long or too deep to hand to a parser (one phrase naming the limit), or None."""
    if limits.chars is not None and len(text) > limits.chars:
        return f"{len(text):,} characters, more than the {limits.chars:,} patchspec parses in one code string"
    indents: list[int] = []   # the indentation widths open, as Python's tokenizer keeps them
    runs: list[int] = [0]     # per open bracket (and the line outside them): what chains in its current item
    chained = 0               # sum(runs)
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "newline":
            if len(runs) == 1 and not text.endswith("\\", 0, match.start()):   # a new logical line
                chained -= runs[0]
                runs[0] = 0
                width = len(match.group().expandtabs(8)) - 1
                while indents and indents[-1] > width:
                    indents.pop()
                if width and (not indents or indents[-1] < width):
                    indents.append(width)
            continue
        if kind == "open":
            runs[-1] += 1     # a call, a subscript or a display chains onto what it follows
            chained += 1
            runs.append(0)
            if len(runs) - 1 > limits.nesting:
                return _too_nested(limits)
        elif kind == "close" and len(runs) > 1:
            chained -= runs.pop()
        elif kind == "separator":
            chained -= runs[-1]
            runs[-1] = 0
        elif kind in ("operator", "dots") or (kind == "name" and match.group() in _CHAINING):
            levels = 1 + sum(c in "-+~" for c in match.group()[1:]) if kind == "operator" else 1   # -+-x: 3
            runs[-1] += levels
            chained += levels
        elif kind == "string" and "f" in match.group()[:3].lower():
            inner = _nesting(match.group())
            if len(runs) - 1 + inner > limits.nesting:
                return _too_nested(limits)
            chained += inner   # for this token only: an f-string's fields are expressions too
            if len(indents) + len(runs) - 1 + chained > limits.depth:
                return _too_deep(limits)
            chained -= inner
            continue
        if len(indents) + len(runs) - 1 + chained > limits.depth:
            return _too_deep(limits)
    return None


def _nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}" and depth:
            depth -= 1
    return deepest


def _too_nested(limits: Limits) -> str:
    return f"brackets nested more than {limits.nesting} deep, more than patchspec parses"


def _too_deep(limits: Limits) -> str:
    return (f"nested or chained more than {limits.depth} levels deep (brackets, operators and indentation), more "
            "than patchspec parses")
