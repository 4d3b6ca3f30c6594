"""Reading JSON text that podium did not write (script output, model answers, tool results,
command-line values): bounded nesting, bounded integers, text only, and one clear error.

`loads` is `json.loads` plus three refusals, each a `JsonLimitError` (a ValueError) whose
message completes a sentence such as "stdout JSON ...":

- nesting deeper than MAX_DEPTH arrays and objects: Python's decoder recurses, so 10,000 levels
  raise RecursionError, and a value a few hundred levels deep cannot be written back into an
  event (pydantic serializes at most ~250 levels);
- an integer longer than Python's limit for int/str conversion (4,300 digits by default);
- an escaped lone UTF-16 surrogate (`"\\ud800"`), which decodes to a string that cannot be
  encoded as UTF-8, so no event or checkpoint could hold it.

Text that is not JSON at all still raises `json.JSONDecodeError`, as before.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any

MAX_DEPTH = 100  # arrays and objects inside each other
# podium's own records (an exported event line) hold data of MAX_DEPTH inside their own fields
RECORD_MAX_DEPTH = 2 * MAX_DEPTH

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonLimitError(ValueError):
    """JSON that is well formed but past one of podium's limits; `str()` reads as the end of
    a sentence ("is nested deeper than 100 levels")."""


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """`text` as JSON, or JSONDecodeError (not JSON) / JsonLimitError (past a limit)."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise JsonLimitError(_too_deep(max_depth)) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # Python's own limit on the digits of an integer
        why = _longest_integer(text) if "integer string conversion" in str(exc) else None
        if why is None:
            raise
        raise JsonLimitError(why) from None
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise JsonLimitError(_too_deep(max_depth))
    if "\\ud" in text or "\\uD" in text:
        _check_surrogates(value)
    return value


def depth(text: str) -> int:
    """How deeply the arrays and objects of JSON text nest (0 for a scalar)."""
    structure = _STRING.sub("", text)
    steps = map(_STEP.__getitem__, _BRACKET.findall(structure))
    return max(accumulate(steps, initial=0))


def int_digits_limit() -> int:
    """The longest integer (in digits) Python converts from text here; 0 means no limit."""
    getter = getattr(sys, "get_int_max_str_digits", None)
    return int(getter()) if getter is not None else 0


def too_many_digits(text: str) -> str | None:
    """Why the integer `text` is too long to read, or None when it is not."""
    limit = int_digits_limit()
    digits = len(text.lstrip("+-"))
    if limit and digits > limit:
        return f"holds an integer of {digits:,} digits (podium reads at most {limit:,})"
    return None


_DIGITS = re.compile(r"-?\d+")
# one decoder for every read (json.loads makes one per call when given options); integers
# are Python's own (the C scanner's), whose digit limit `_longest_integer` words
_DECODER = json.JSONDecoder()


def _longest_integer(text: str) -> str | None:
    """Why the text's longest integer outside its strings is too long to read, if one is."""
    runs = _DIGITS.findall(_STRING.sub('""', text))
    return too_many_digits(max(runs, key=len)) if runs else None


def _too_deep(max_depth: int) -> str:
    return f"is nested deeper than {max_depth} levels"


def _check_surrogates(value: Any) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end] if isinstance(exc.object, str) else ""
        code = f" (\\u{ord(bad[0]):04x})" if bad else ""
        raise JsonLimitError(f"holds a lone UTF-16 surrogate{code}, which is not text") \
            from None


def check_depth(value: Any, max_depth: int = MAX_DEPTH) -> None:
    """JsonLimitError when a parsed value (lists and dicts) nests deeper than `max_depth`;
    for values another parser read (an SDK's), walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level + 1 > max_depth:
            raise JsonLimitError(_too_deep(max_depth))
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, (dict, list)))
