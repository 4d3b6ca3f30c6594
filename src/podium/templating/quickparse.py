"""The commonest templates read from their parts, with no tree made.

Most templates in a workflow are text around `{{ name.attr.attr }}`, and most route
conditions `{{ name.attr >= 0.5 }}`; `podium validate` checks every one. `scan` cuts a
template of exactly those shapes into its parts (text, expressions, `if ... is defined`
tags), and the checks read what they need from them: the references a template makes
(`podium.check.references.quick_refs`) and the comparisons of a route condition
(`podium.check.enums._quick`), each compared on every template of the examples, the corpus
and generated ones with what the walk of Jinja's tree finds (tests/test_quickparse.py,
tests/test_enum_literals.py). Anything else returns None and is parsed (trees.py). Only for
an environment with the default delimiters, no line statements or extensions, and
`keep_trailing_newline` (make_environment's). Besides a comparison, a name may go through
filters without arguments (`{{ a.b | tojson }}`), or take one operation with a number
(`{{ (a.b | length) + 1 }}`), and text may hold `{% if a.b is defined %}...{% endif %}`
blocks of the same (not nested, no else, each tag on one line): a prompt's optional part.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from jinja2.environment import Environment

# Text with no brace, carriage return or NUL (Jinja normalises newlines in text and would
# see `{{`, `{%` or `{#`), then `{{ a.b.c }}`, `{{ a.b OP operand }}`, `{{ a.b | f | g }}`
# or `{{ (a.b | f) + 1 }}` with plain ASCII names, or an `if ... is defined` / `endif` tag,
# repeated. An operand is a dotted name, a decimal number, a plain quoted string or one of
# Jinja's constants.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_NAME}(?:\.{_NAME})*"
_NUMBER = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
_STRING = r"'[A-Za-z0-9_ .,:;/+=@-]*'|\"[A-Za-z0-9_ .,:;/+=@-]*\""
_OPS = {"==": "eq", "!=": "ne", "<=": "lteq", ">=": "gteq", "<": "lt", ">": "gt"}
_FILTERS = rf"(?:[ \t]*\|[ \t]*{_NAME})+"
# {{ a.b }}, {{ a.b OP operand }}, {{ a.b | f }}, or arithmetic on one number: {{ a.b + 1 }},
# {{ (a.b | length) + 1 }} (the same tree, with or without the parentheses)
_EXPR = (rf"\{{\{{([ \t\n]*)(?:({_DOTTED})(?:[ \t]*(==|!=|<=|>=|<|>)[ \t]*"
         rf"({_NUMBER}|{_STRING}|{_DOTTED})|({_FILTERS}))?"
         rf"|(?:\([ \t]*(?P<pleft>{_DOTTED})(?P<pfilters>{_FILTERS})?[ \t]*\)"
         rf"|(?P<left>{_DOTTED})(?P<lfilters>{_FILTERS})?)"
         rf"[ \t]*(?P<math>[-+*/])[ \t]*(?P<number>{_NUMBER}))[ \t\n]*\}}\}}")
# `{% if a.b is defined %}` and `{% endif %}`, each on one line (no `-` or `+` controls)
_IF = rf"\{{%[ \t]*if[ \t]+(?P<test>{_DOTTED})[ \t]+is[ \t]+defined[ \t]*%\}}"
_ENDIF = r"\{%[ \t]*endif[ \t]*%\}"
_PART = re.compile(rf"{_EXPR}|(?P<open>{_IF})|(?P<close>{_ENDIF})")
# what the text between the parts cannot hold: a template is text (part text)+, checked gap
# by gap (a part ends at its first closing brace: no other split is possible), which spares
# compiling a second regex of the whole shape in every process
_NOT_TEXT = re.compile(r"[{}\r\0]")
# names Jinja's parser reads as something other than a variable (constants, operators)
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "none": None,
              "None": None}
_WORDS = frozenset({*_CONSTANTS, "and", "or", "not", "in", "is", "if", "else", "recursive"})


# the parts `scan` cuts a template into, each (kind, value, line): text; an expression (its
# dotted name, comparison, filters and arithmetic: `Expr`); an `{% if name is defined %}` tag
# (the name's parts); its `{% endif %}`
TEXT, EXPR, OPEN, CLOSE = range(4)
Operand = tuple[bool, Any]  # (True, a constant's value) or (False, a dotted name's parts)


class Expr(NamedTuple):
    """One `{{ }}` of the shapes this module takes: `names` (a dotted name's parts) through
    `filters` (in the order written), compared with `right` by `op`, or in one operation
    `math` with the number `number` (a tuple: one is made for each expression of each
    template `validate` checks)."""

    names: tuple[str, ...]
    op: str | None
    right: Operand | None
    filters: tuple[str, ...]
    math: str | None
    number: int | float | None


Part = tuple[int, Any, int]


def scan(env: Environment | None, source: str) -> list[Part] | None:
    """`source` as its parts, in order, when it has the shapes this module takes (and `env`
    lexes as this module assumes; None stands for podium's environment, make_environment's,
    which does); None for anything else. The references (`quick_refs`) and comparisons
    (`enums._quick`) the checks read are made from them."""
    if "{" not in source or (env is not None and not plain_lexing(env)):
        return None
    parts: list[Part] = []
    open_block = False
    pos = 0
    line = 1
    for m in _PART.finditer(source):
        if m.start() > pos:
            text = source[pos:m.start()]
            if _NOT_TEXT.search(text):
                return None
            parts.append((TEXT, text, line))
            line += text.count("\n")
        pos = m.end()
        if m.group("open") is not None:
            test = _names(m.group("test"))
            if open_block or test is None:
                return None  # nested (left to Jinja), or a constant tested
            parts.append((OPEN, test, line))
            open_block = True
            continue
        if m.group("close") is not None:
            if not open_block:
                return None  # an endif without its if: Jinja's error
            parts.append((CLOSE, None, line))
            open_block = False
            continue
        lead, dotted, op, operand, filters = m.groups()[:5]
        math = m.group("math")
        if (op is not None or math is not None) and "\n" in m.group(0):
            return None  # a comparison's line numbers follow its tokens: left to Jinja
        if math is not None:
            dotted, filters = ((m.group("left"), m.group("lfilters")) if m.group("left")
                               else (m.group("pleft"), m.group("pfilters")))
        line += lead.count("\n")
        names = _names(dotted)
        if names is None:
            return None
        right = None
        if op is not None:
            right = _operand(operand)
            if right is None:
                return None
        chain: tuple[str, ...] = ()
        if filters is not None:
            chain = tuple(filters.replace("|", " ").split())
            if not _WORDS.isdisjoint(chain):
                return None
        number = None
        if math is not None:
            number = _number(m.group("number"))
        parts.append((EXPR, Expr(names, op, right, chain, math, number), line))
        line += m.group(0).count("\n") - lead.count("\n")
    if open_block or not pos:
        return None  # an if without its endif (Jinja's error), or no part at all
    if pos < len(source):
        if _NOT_TEXT.search(source, pos):
            return None
        parts.append((TEXT, source[pos:], line))
    return parts


def _names(text: str) -> tuple[str, ...] | None:
    """A dotted name's parts, or None when one of them is a constant or an operator word."""
    parts = tuple(text.split("."))
    return parts if _WORDS.isdisjoint(parts) else None


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def _operand(text: str) -> Operand | None:
    if text in _CONSTANTS:
        return True, _CONSTANTS[text]
    if text[0] in "'\"":
        return True, text[1:-1]
    if text[0].isdigit():
        return True, _number(text)
    names = _names(text)
    return None if names is None else (False, names)


def plain_lexing(env: Environment) -> bool:
    """Whether `env` lexes templates as this module assumes."""
    return (env.variable_start_string == "{{" and env.variable_end_string == "}}"
            and env.block_start_string == "{%" and env.comment_start_string == "{#"
            and env.line_statement_prefix is None and env.line_comment_prefix is None
            and not env.extensions and env.keep_trailing_newline)
