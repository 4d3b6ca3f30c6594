"""What the checks know of podium's templates without Jinja2: the failure they raise, how a
text is told to be a template, and the names of the environment's filters and tests.

`podium validate` of a workflow whose templates all have the shapes quickparse.py reads
never imports Jinja2 (35 ms of a cold process): the checks read those templates from their
parts, and look their filters and tests up here. tests/test_templating_text.py keeps the
names equal to what `make_environment()` holds.
"""

from __future__ import annotations

TOO_DEEP = "nesting too deep to read"
# a template this long may nest deeper than the checks and Jinja's compiler can recurse:
# parse() walks its tree once, so it is refused as TOO_DEEP here rather than at run time
WALK_FROM = 2_000


class RenderFailure(Exception):
    """A template failed; `kind` is 'undefined', 'syntax', 'security', 'size' (output or a
    value too large), 'limit' (too many steps), 'timeout' or 'error'.

    `limit` names the bound a 'size', 'limit' or 'timeout' failure reached: 'output',
    'value', 'memory', 'steps', 'time', 'step-timeout' or 'run-timeout'.
    """

    def __init__(self, kind: str, message: str, name: str | None = None,
                 lineno: int | None = None, *, limit: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.lineno = lineno
        self.limit = limit


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def is_jinja_condition(text: str) -> bool:
    """Conductor's rule: a route condition is Jinja when it contains both '{{' and '}}'."""
    return "{{" in text and "}}" in text


# the filters and tests of podium's environment, in its order (Jinja2's own, then `tojson`,
# Conductor's `json`, podium's `quote` and its internal loop guard): names to look up and
# to offer as "did you mean" hints, in the same order the environment's tables give them
FILTER_NAMES = dict.fromkeys((
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
    "escape", "filesizeformat", "first", "float", "forceescape", "format", "groupby",
    "indent", "int", "join", "last", "length", "list", "lower", "items", "map", "min", "max",
    "pprint", "random", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "trim",
    "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
    "tojson", "json", "quote", "podium:loop"))
TEST_NAMES = dict.fromkeys((
    "odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none", "boolean",
    "false", "true", "integer", "float", "lower", "upper", "string", "mapping", "number",
    "sequence", "iterable", "callable", "sameas", "escaped", "in", "==", "eq", "equalto",
    "!=", "ne", ">", "gt", "greaterthan", "ge", ">=", "<", "lt", "lessthan", "<=", "le"))
