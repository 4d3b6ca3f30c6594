"""The Jinja AST of the commonest templates, built without Jinja's lexer and parser.

Most templates in a workflow are text around `{{ name.attr.attr }}`, and most route
conditions `{{ name.attr >= 0.5 }}`; `podium validate`
parses every one, and Jinja's lexer and parser were a third of a large workflow's check.
`quick_parse` builds, for exactly that shape, the tree `Environment.parse` gives (the same
nodes, fields and line numbers; tests/test_quickparse.py compares them on every template of
the examples, the corpus and generated ones), and returns None for anything else, which then
goes to Jinja. Only for an environment with the default delimiters, no line statements or
extensions, and `keep_trailing_newline` (make_environment's).
"""

from __future__ import annotations

import re

from jinja2 import nodes
from jinja2.environment import Environment

# Text with no brace, carriage return or NUL (Jinja normalises newlines in text and would
# see `{{`, `{%` or `{#`), then `{{ a.b.c }}` or `{{ a.b OP operand }}` with plain ASCII
# names, repeated. An operand is a dotted name, a decimal number, a plain quoted string or
# one of Jinja's constants.
_TEXT = r"[^{}\r\0]*"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_NAME}(?:\.{_NAME})*"
_NUMBER = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
_STRING = r"'[A-Za-z0-9_ .,:;/+=@-]*'|\"[A-Za-z0-9_ .,:;/+=@-]*\""
_OPS = {"==": "eq", "!=": "ne", "<=": "lteq", ">=": "gteq", "<": "lt", ">": "gt"}
_EXPR = (rf"\{{\{{([ \t\n]*)({_DOTTED})(?:[ \t]*(==|!=|<=|>=|<|>)[ \t]*"
         rf"({_NUMBER}|{_STRING}|{_DOTTED}))?[ \t\n]*\}}\}}")
_WHOLE = re.compile(rf"{_TEXT}(?:{_EXPR}{_TEXT})+")
_PART = re.compile(_EXPR)
# names Jinja's parser reads as something other than a variable (constants, operators)
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "none": None,
              "None": None}
_WORDS = frozenset({*_CONSTANTS, "and", "or", "not", "in", "is", "if", "else", "recursive"})


def quick_parse(env: Environment, source: str) -> nodes.Template | None:
    """The tree env.parse(source) gives, when `source` is text around dotted names (or one
    comparison of a dotted name) only."""
    if _WHOLE.fullmatch(source) is None or not _plain(env):
        return None
    body: list[nodes.Expr] = []
    pos = 0
    line = 1
    for m in _PART.finditer(source):
        if m.start() > pos:
            text = source[pos:m.start()]
            body.append(nodes.TemplateData(text, lineno=line))
            line += text.count("\n")
        lead, dotted, op, operand = m.groups()
        if op is not None and "\n" in m.group(0):
            return None  # a comparison's line numbers follow its tokens: left to Jinja
        line += lead.count("\n")
        node = _dotted(dotted, line)
        if node is None:
            return None
        if op is not None:
            right = _operand(operand, line)
            if right is None:
                return None
            node = nodes.Compare(node, [nodes.Operand(_OPS[op], right)], lineno=line)
        body.append(node)
        line += m.group(0).count("\n") - lead.count("\n")
        pos = m.end()
    if pos < len(source):
        body.append(nodes.TemplateData(source[pos:], lineno=line))
    template = nodes.Template([nodes.Output(body, lineno=body[0].lineno)], lineno=1)
    template.set_environment(env)
    return template


def _dotted(text: str, line: int) -> nodes.Expr | None:
    parts = text.split(".")
    if any(p in _WORDS for p in parts):
        return None
    node: nodes.Expr = nodes.Name(parts[0], "load", lineno=line)
    for attr in parts[1:]:
        node = nodes.Getattr(node, attr, "load", lineno=line)
    return node


def _operand(text: str, line: int) -> nodes.Expr | None:
    if text in _CONSTANTS:
        return nodes.Const(_CONSTANTS[text], lineno=line)
    if text[0] in "'\"":
        return nodes.Const(text[1:-1], lineno=line)
    if text[0].isdigit():
        return nodes.Const(float(text) if "." in text else int(text), lineno=line)
    return _dotted(text, line)


def _plain(env: Environment) -> bool:
    """Whether `env` lexes templates as this module assumes."""
    return (env.variable_start_string == "{{" and env.variable_end_string == "}}"
            and env.block_start_string == "{%" and env.comment_start_string == "{#"
            and env.line_statement_prefix is None and env.line_comment_prefix is None
            and not env.extensions and env.keep_trailing_newline)
