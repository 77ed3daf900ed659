"""Placeholders an anonymiser wrote into a released text (``PERSON_FIRSTNAME_1``, ``[REDACTED]``, ``<NAME>``, ``***``, ...).

They are never evidence; the list is the declared configuration's ``[evidence] placeholders``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from cpa_core.common.errors import ConfigError

DEFAULT_PLACEHOLDERS = (
    r"\b[A-Z]+(?:_[A-Z]+)*_\d+\b",   # TextWash and similar: PERSON_FIRSTNAME_1, LOCATION_2, DATE_1
    r"\bPRONOUN\b",
    r"\[[^\]\n]{1,40}\]",             # [REDACTED], [NAME], [** Date **]
    r"<[A-Za-z_ -]{1,40}>",           # <PERSON>, <redacted>
    r"\*{2,}|#{3,}|X{3,}",            # masked runs
)
"""Regular expressions of anonymiser placeholders (the text they match is never evidence); the default of the
declared configuration's ``[evidence] placeholders``."""


# ------------------------------------------------------------------------------------------------
# placeholders


def check_placeholders(value: Any, where: str = "[evidence] placeholders") -> tuple[str, ...]:
    """The placeholder list as a tuple when it is a list of valid regular expressions that never match an
    empty text, else a :class:`ConfigError` naming ``where`` and the expression."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of regular expressions (strings), found {value!r}")
    for pattern in value:
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise ConfigError(f"{where}: {pattern!r} is not a valid regular expression ({error})") from None
        if compiled.fullmatch("") is not None:
            raise ConfigError(f"{where}: {pattern!r} matches an empty text, so it would mark no placeholder")
    return tuple(value)


def placeholder_regions(text: str, placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS) -> list[tuple[int, int]]:
    """The ``(start, end)`` character ranges of the text that are anonymiser placeholders (never empty)."""
    return sorted((m.start(), m.end()) for pattern in placeholders for m in re.finditer(pattern, text)
                  if m.end() > m.start())
