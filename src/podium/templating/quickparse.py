"""The Jinja AST of the commonest templates, built without Jinja's lexer and parser.

Most templates in a workflow are text around `{{ name.attr.attr }}`, and most route
conditions `{{ name.attr >= 0.5 }}`; `podium validate`
parses every one, and Jinja's lexer and parser were a third of a large workflow's check.
`quick_parse` builds, for exactly that shape, the tree `Environment.parse` gives (the same
nodes, fields and line numbers; tests/test_quickparse.py compares them on every template of
the examples, the corpus and generated ones), and returns None for anything else, which then
goes to Jinja. Only for an environment with the default delimiters, no line statements or
extensions, and `keep_trailing_newline` (make_environment's). Besides a comparison, a name
may go through filters without arguments (`{{ a.b | tojson }}`), or take one operation with
a number (`{{ (a.b | length) + 1 }}`), and text may hold
`{% if a.b is defined %}...{% endif %}` blocks of the same (not nested, no else, each tag on
one line): a prompt's optional part.
"""

from __future__ import annotations

import re

from jinja2 import nodes
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
_MATH = {"+": nodes.Add, "-": nodes.Sub, "*": nodes.Mul, "/": nodes.Div}
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


def quick_parse(env: Environment, source: str) -> nodes.Template | None:
    """The tree env.parse(source) gives, when `source` is text around dotted names (or one
    comparison of a dotted name, or a dotted name through filters without arguments), and
    `{% if dotted is defined %}` blocks of those, only."""
    if "{" not in source or not _plain(env):
        return None
    body: list[nodes.Node] = []  # the template's statements (Output, If)
    data: list[nodes.Expr] = []  # the Output being gathered (as Jinja's data buffer)
    block: nodes.If | None = None  # the open `if` block
    pos = 0
    line = 1

    def flush() -> None:
        if data:
            (body if block is None else block.body).append(
                nodes.Output(data[:], lineno=data[0].lineno, environment=env))
            data.clear()

    for m in _PART.finditer(source):
        if m.start() > pos:
            text = source[pos:m.start()]
            if _NOT_TEXT.search(text):
                return None
            data.append(nodes.TemplateData(text, lineno=line, environment=env))
            line += text.count("\n")
        pos = m.end()
        if m.group("open") is not None:
            if block is not None:
                return None  # nested: left to Jinja
            flush()
            test = _dotted(m.group("test"), line, env)
            if test is None:
                return None
            block = nodes.If(nodes.Test(test, "defined", [], [], None, None, lineno=line,
                                        environment=env), [], [], [], lineno=line,
                             environment=env)
            continue
        if m.group("close") is not None:
            if block is None:
                return None  # an endif without its if: Jinja's error
            flush()
            body.append(block)
            block = None
            continue
        lead, dotted, op, operand, filters = m.groups()[:5]
        math = m.group("math")
        if (op is not None or math is not None) and "\n" in m.group(0):
            return None  # a comparison's line numbers follow its tokens: left to Jinja
        if math is not None:
            dotted, filters = ((m.group("left"), m.group("lfilters")) if m.group("left")
                               else (m.group("pleft"), m.group("pfilters")))
        line += lead.count("\n")
        node = _dotted(dotted, line, env)
        if node is None:
            return None
        if op is not None:
            right = _operand(operand, line, env)
            if right is None:
                return None
            node = nodes.Compare(node, [nodes.Operand(_OPS[op], right, environment=env)],
                                 lineno=line, environment=env)
        elif filters is not None:
            for name in filters.replace("|", " ").split():
                if name in _WORDS:
                    return None
                node = nodes.Filter(node, name, [], [], None, None, lineno=line,
                                    environment=env)
        if math is not None:
            number = _operand(m.group("number"), line, env)
            assert number is not None  # a decimal number
            node = _MATH[math](node, number, lineno=line, environment=env)
        data.append(node)
        line += m.group(0).count("\n") - lead.count("\n")
    if block is not None or not pos:
        return None  # an if without its endif (Jinja's error), or no part at all
    if pos < len(source):
        if _NOT_TEXT.search(source, pos):
            return None
        data.append(nodes.TemplateData(source[pos:], lineno=line, environment=env))
    flush()
    # every node has `env` from its construction, as set_environment() would give it
    return nodes.Template(body, lineno=1, environment=env)


def _dotted(text: str, line: int, env: Environment) -> nodes.Expr | None:
    parts = text.split(".")
    if any(p in _WORDS for p in parts):
        return None
    node: nodes.Expr = nodes.Name(parts[0], "load", lineno=line, environment=env)
    for attr in parts[1:]:
        node = nodes.Getattr(node, attr, "load", lineno=line, environment=env)
    return node


def _operand(text: str, line: int, env: Environment) -> nodes.Expr | None:
    if text in _CONSTANTS:
        return nodes.Const(_CONSTANTS[text], lineno=line, environment=env)
    if text[0] in "'\"":
        return nodes.Const(text[1:-1], lineno=line, environment=env)
    if text[0].isdigit():
        return nodes.Const(float(text) if "." in text else int(text), lineno=line,
                           environment=env)
    return _dotted(text, line, env)


def _plain(env: Environment) -> bool:
    """Whether `env` lexes templates as this module assumes."""
    return (env.variable_start_string == "{{" and env.variable_end_string == "}}"
            and env.block_start_string == "{%" and env.comment_start_string == "{#"
            and env.line_statement_prefix is None and env.line_comment_prefix is None
            and not env.extensions and env.keep_trailing_newline)
