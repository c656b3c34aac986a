# SPDX-License-Identifier: Apache-2.0
"""The transparent joining types idna 3.7 added to ``idnadata.joining_types``, derived, not copied.

Unicode's ArabicShaping.txt gives every code point it does not list joining type T (transparent) when
its general category is Mn, Me or Cf. idna 3.7's generator added those (as ``ord('T')``) so that
``valid_contextj`` can stop at the first non-transparent neighbour. They are derived here from this
interpreter's ``unicodedata``: code points newer than its Unicode version are left out, and
``valid_contextj`` then refuses a joiner next to them (a refusal, never a wrong acceptance).
"""
from __future__ import annotations

import sys
import unicodedata

TRANSPARENT = ord("T")
CATEGORIES = frozenset({"Mn", "Me", "Cf"})


def transparent_joining_types(table: dict[int, int]) -> dict[int, int]:
    """``{code point: ord('T')}`` for every Mn/Me/Cf code point the table does not list."""
    return {cp: TRANSPARENT for cp in range(sys.maxunicode + 1)
            if cp not in table and unicodedata.category(chr(cp)) in CATEGORIES}
