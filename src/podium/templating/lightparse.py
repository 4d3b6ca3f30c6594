"""Jinja's tree of the common templates, built without Jinja2.

Importing Jinja2 costs a cold `podium validate` about 30 ms, and the checks only read trees.
`light_parse` builds, for templates of text, `{{ }}` expressions and `{% if %}` blocks, the
tree `jinja2.Environment.parse` gives (the same node kinds, fields and line numbers) out of
this module's own node classes, which carry Jinja's class names and fields; the checks name
node kinds through podium/templating/kinds.py, which matches a class by its name, so they
walk these trees and Jinja's alike. It returns None for anything else, which then goes to
Jinja: other statements (`for`, `set`, `include`...), comments, whitespace control, dict
literals, slices, escapes in strings, non-ASCII names, numbers in forms other than `12` and
`1.5`, deep nesting. tests/test_lightparse.py compares the two trees on every template of the
examples and the corpus and on generated ones.

The expression grammar is Jinja 3.1's (parser.py), rule by rule, with its line numbers: a
node takes the line of the token its rule starts at, a comparison or a chain of operators
that of the token after its last operand, a filter that of its name, a test that of `is`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

# the deepest nesting of brackets and unary operators taken (Jinja's parser recurses about a
# dozen frames a level): past it, Jinja's own parse decides, recursion limit included
MAX_DEPTH = 12


class Node:
    """A node of the tree: its `fields` in Jinja's order, and its line."""

    fields: tuple[str, ...] = ()

    def __init__(self, *values: Any, lineno: int | None = None) -> None:
        for name, value in zip(self.fields, values, strict=True):
            setattr(self, name, value)
        self.lineno = lineno

    def iter_fields(self) -> Iterator[tuple[str, Any]]:
        for name in self.fields:
            yield name, getattr(self, name)

    def iter_child_nodes(self) -> Iterator[Node]:
        for name in self.fields:
            value = getattr(self, name)
            if type(value) is list:
                yield from (v for v in value if isinstance(v, Node))
            elif isinstance(value, Node):
                yield value

    def find_all(self, kind: Any) -> Iterator[Any]:
        """Every node under this one (not itself) that is a `kind`, depth first, as Jinja's."""
        for child in self.iter_child_nodes():
            if isinstance(child, kind):
                yield child
            yield from child.find_all(kind)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self.iter_fields())
        return f"{type(self).__name__}({inner})"


def _kind(name: str, base: type[Node], *fields: str) -> type[Node]:
    """A node class named as Jinja's, with its fields (its base's when none are given)."""
    return type(name, (base,), {"fields": fields or base.fields, "__module__": __name__})


# Jinja's classes of these trees, with their bases (kinds.py matches any name on the way up)
Stmt = _kind("Stmt", Node)
Helper = _kind("Helper", Node)
Expr = _kind("Expr", Node)
Literal = _kind("Literal", Expr)
BinExpr = _kind("BinExpr", Expr, "left", "right")
UnaryExpr = _kind("UnaryExpr", Expr, "node")
FilterTestCommon = _kind("_FilterTestCommon", Expr, "node", "name", "args", "kwargs",
                         "dyn_args", "dyn_kwargs")
Template = _kind("Template", Node, "body")
Output = _kind("Output", Stmt, "nodes")
If = _kind("If", Stmt, "test", "body", "elif_", "else_")
TemplateData = _kind("TemplateData", Literal, "data")
Const = _kind("Const", Literal, "value")
Tuple = _kind("Tuple", Literal, "items", "ctx")
List = _kind("List", Literal, "items")
Name = _kind("Name", Expr, "name", "ctx")
Getattr = _kind("Getattr", Expr, "node", "attr", "ctx")
Getitem = _kind("Getitem", Expr, "node", "arg", "ctx")
Call = _kind("Call", Expr, "node", "args", "kwargs", "dyn_args", "dyn_kwargs")
Filter = _kind("Filter", FilterTestCommon)
Test = _kind("Test", FilterTestCommon)
CondExpr = _kind("CondExpr", Expr, "test", "expr1", "expr2")
Compare = _kind("Compare", Expr, "expr", "ops")
Operand = _kind("Operand", Helper, "op", "expr")
Keyword = _kind("Keyword", Helper, "key", "value")
Concat = _kind("Concat", Expr, "nodes")
And, Or = _kind("And", BinExpr), _kind("Or", BinExpr)
Not, Neg, Pos = _kind("Not", UnaryExpr), _kind("Neg", UnaryExpr), _kind("Pos", UnaryExpr)
_MATH = {t: _kind(n, BinExpr) for t, n in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"),
                                           ("div", "Div"), ("floordiv", "FloorDiv"),
                                           ("mod", "Mod"), ("pow", "Pow"))}


class _Decline(Exception):
    """The template is not of the shapes this module takes (or is not valid): Jinja decides."""


# ---------------------------------------------------------------------------- the lexer

_TAG = re.compile(r"\{[{%#]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?")
_STRING = re.compile(r"'[ -&(-\[\]-~]*'|\"[ !#-\[\]-~]*\"")  # printable ASCII, no backslash
_AFTER_NUMBER = re.compile(r"[A-Za-z0-9_.]")
# Jinja's operators, longest first; braces (dicts), `:` (slices) and `;` are declined
_OPERATORS = {"//": "floordiv", "**": "pow", "==": "eq", "!=": "ne", ">=": "gteq",
              "<=": "lteq", "+": "add", "-": "sub", "/": "div", "*": "mul", "%": "mod",
              "~": "tilde", "[": "lbracket", "]": "rbracket", "(": "lparen", ")": "rparen",
              ">": "gt", "<": "lt", "=": "assign", ".": "dot", "|": "pipe", ",": "comma"}
_OPENERS = {"lparen": "rparen", "lbracket": "rbracket"}
Token = tuple[str, Any, int]  # (type, value, line), Jinja's token types


def _tokens(source: str) -> list[Token]:
    """Jinja's token stream of `source` (data, the tags' delimiters and what they hold, eof)."""
    if "\r" in source:
        raise _Decline  # Jinja normalises newlines in data and strings
    out: list[Token] = []
    pos, line, size = 0, 1, len(source)
    while pos < size:
        m = _TAG.search(source, pos)
        end = m.start() if m else size
        if end > pos:
            text = source[pos:end]
            out.append(("data", text, line))
            line += text.count("\n")
        if m is None:
            break
        kind = source[m.start() + 1]
        pos = m.end()
        if kind == "#" or source[pos:pos + 1] in ("-", "+"):
            raise _Decline  # a comment, or whitespace control
        variable = kind == "{"
        out.append(("variable_begin" if variable else "block_begin", None, line))
        closing = "}}" if variable else "%}"
        pos, line = _tag(source, pos, line, closing, out)
        out.append(("variable_end" if variable else "block_end", None, line))
        pos += 2
    out.append(("eof", None, line))
    return out


def _tag(source: str, pos: int, line: int, closing: str, out: list[Token]) -> tuple[int, int]:
    """The tokens of one tag up to its closing delimiter: (its position, its line)."""
    stack: list[str] = []
    while True:
        ch = source[pos:pos + 1]
        if ch in (" ", "\t", "\n"):
            line += ch == "\n"
            pos += 1
            continue
        if not ch:
            raise _Decline  # the template ends inside a tag
        if source.startswith(closing, pos):
            if stack:
                raise _Decline  # unbalanced: Jinja's lexer and parser tell what is wrong
            return pos, line
        if ch in "-+" and source.startswith(closing, pos + 1):
            raise _Decline  # `-}}`: whitespace control
        m = _NAME.match(source, pos)
        if m:
            out.append(("name", m.group(), line))
            pos = m.end()
            continue
        if ch.isdigit():
            m = _NUMBER.match(source, pos)
            if m is None or (out and out[-1][0] == "dot") or _AFTER_NUMBER.match(source, m.end()):
                raise _Decline  # `a.0`, `1e3`, `1_0`, `01`, `1.5.x`
            text = m.group()
            out.append(("float", float(text), line) if m.group(2) else ("integer", int(text), line))
            pos = m.end()
            continue
        if ch in "'\"":
            m = _STRING.match(source, pos)
            if m is None:
                raise _Decline  # an escape, a newline or a non-ASCII character in it
            out.append(("string", m.group()[1:-1], line))
            pos = m.end()
            continue
        op = _OPERATORS.get(source[pos:pos + 2]) or _OPERATORS.get(ch)
        if op is None:
            raise _Decline
        width = 2 if source[pos:pos + 2] in _OPERATORS else 1
        if op in _OPENERS:
            stack.append(_OPENERS[op])
            if len(stack) > MAX_DEPTH:
                raise _Decline
        elif op in ("rparen", "rbracket") and (not stack or stack.pop() != op):
            raise _Decline
        out.append((op, None, line))
        pos += width


# ---------------------------------------------------------------------------- the parser

_COMPARE = frozenset({"eq", "ne", "lt", "lteq", "gt", "gteq"})
_TEST_ARG_START = frozenset({"name", "string", "integer", "float", "lparen", "lbracket"})


class _Parser:
    """Jinja's parser, for the statements and expressions named in the module's docstring."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.unary = 0  # nested `not`, `-` and `+`

    # the token stream, as Jinja's TokenStream
    @property
    def current(self) -> Token:
        return self.tokens[self.at]

    def look(self) -> Token:
        return self.tokens[min(self.at + 1, len(self.tokens) - 1)]

    def next(self) -> Token:
        token = self.tokens[self.at]
        if token[0] != "eof":
            self.at += 1
        return token

    def test(self, kind: str, value: str | None = None, token: Token | None = None) -> bool:
        token = token or self.current
        return token[0] == kind and (value is None or token[1] == value)

    def skip_if(self, kind: str, value: str | None = None) -> bool:
        if self.test(kind, value):
            self.next()
            return True
        return False

    def expect(self, kind: str, value: str | None = None) -> Token:
        if not self.test(kind, value):
            raise _Decline
        return self.next()

    # the template
    def parse(self) -> Node:
        body = self.subparse(None)
        return Template(body, lineno=1)

    def subparse(self, end: tuple[str, ...] | None) -> list[Node]:
        body: list[Node] = []
        data: list[Node] = []

        def flush() -> None:
            if data:
                body.append(Output(data[:], lineno=data[0].lineno))
                data.clear()

        while not self.test("eof"):
            kind, value, line = self.current
            if kind == "data":
                data.append(TemplateData(value, lineno=line))
                self.next()
            elif kind == "variable_begin":
                self.next()
                data.append(self.parse_tuple(with_condexpr=True))
                self.expect("variable_end")
            else:  # block_begin
                flush()
                self.next()
                if end is not None and self.current[0] == "name" and self.current[1] in end:
                    return body
                body.append(self.parse_statement())
                self.expect("block_end")
        if end is not None:
            raise _Decline  # an unclosed block: Jinja's error
        flush()
        return body

    def parse_statement(self) -> Node:
        if not self.test("name", "if"):
            raise _Decline  # other tags, known or not, go to Jinja
        return self.parse_if()

    def parse_statements(self, end: tuple[str, ...], drop_needle: bool = False) -> list[Node]:
        self.expect("block_end")  # Jinja also skips a `:` here: declined by the lexer
        result = self.subparse(end)
        if drop_needle:
            self.next()
        return result

    def parse_if(self) -> Node:
        result = If(None, [], [], [], lineno=self.expect("name", "if")[2])
        node: Any = result
        while True:
            node.test = self.parse_tuple(with_condexpr=False)
            node.body = self.parse_statements(("elif", "else", "endif"))
            node.elif_ = []
            node.else_ = []
            token = self.next()
            if self.test("name", "elif", token):
                node = If(None, [], [], [], lineno=self.current[2])
                result.elif_.append(node)  # type: ignore[attr-defined]
                continue
            if self.test("name", "else", token):
                result.else_ = self.parse_statements(("endif",),  # type: ignore[attr-defined]
                                                     drop_needle=True)
            break
        return result

    # expressions, from the loosest rule to the tightest
    def parse_expression(self, with_condexpr: bool = True) -> Node:
        return self.parse_condexpr() if with_condexpr else self.parse_or()

    def parse_condexpr(self) -> Node:
        line = self.current[2]
        expr1 = self.parse_or()
        while self.skip_if("name", "if"):
            expr2 = self.parse_or()
            expr3 = self.parse_condexpr() if self.skip_if("name", "else") else None
            expr1 = CondExpr(expr2, expr1, expr3, lineno=line)
            line = self.current[2]
        return expr1

    def _chain(self, word: str, cls: type[Node], inner: Callable[[], Node]) -> Node:
        line = self.current[2]
        left = inner()
        while self.skip_if("name", word):
            left = cls(left, inner(), lineno=line)
            line = self.current[2]
        return left

    def parse_or(self) -> Node:
        return self._chain("or", Or, self.parse_and)

    def parse_and(self) -> Node:
        return self._chain("and", And, self.parse_not)

    def parse_not(self) -> Node:
        if self.test("name", "not"):
            line = self.next()[2]
            return Not(self._nested(self.parse_not), lineno=line)
        return self.parse_compare()

    def _nested(self, rule: Callable[[], Node]) -> Node:
        self.unary += 1
        if self.unary > MAX_DEPTH:
            raise _Decline
        try:
            return rule()
        finally:
            self.unary -= 1

    def parse_compare(self) -> Node:
        line = self.current[2]
        expr = self.parse_math1()
        ops: list[Node] = []
        while True:
            kind = self.current[0]
            if kind in _COMPARE:
                self.next()
                ops.append(Operand(kind, self.parse_math1()))
            elif self.skip_if("name", "in"):
                ops.append(Operand("in", self.parse_math1()))
            elif self.test("name", "not") and self.test("name", "in", self.look()):
                self.next()
                self.next()
                ops.append(Operand("notin", self.parse_math1()))
            else:
                break
            line = self.current[2]
        return Compare(expr, ops, lineno=line) if ops else expr

    def _math(self, kinds: tuple[str, ...], inner: Callable[[], Node]) -> Node:
        line = self.current[2]
        left = inner()
        while self.current[0] in kinds:
            cls = _MATH[self.next()[0]]
            left = cls(left, inner(), lineno=line)
            line = self.current[2]
        return left

    def parse_math1(self) -> Node:
        return self._math(("add", "sub"), self.parse_concat)

    def parse_concat(self) -> Node:
        line = self.current[2]
        args = [self.parse_math2()]
        while self.skip_if("tilde"):
            args.append(self.parse_math2())
        return args[0] if len(args) == 1 else Concat(args, lineno=line)

    def parse_math2(self) -> Node:
        return self._math(("mul", "div", "floordiv", "mod"), self.parse_pow)

    def parse_pow(self) -> Node:
        return self._math(("pow",), self.parse_unary)

    def parse_unary(self, with_filter: bool = True) -> Node:
        kind, _, line = self.current
        node: Node
        if kind in ("sub", "add"):
            self.next()
            operand = self._nested(lambda: self.parse_unary(False))
            node = (Neg if kind == "sub" else Pos)(operand, lineno=line)
        else:
            node = self.parse_primary()
        node = self.parse_postfix(node)
        if with_filter:
            node = self.parse_filter_expr(node)
        return node

    def parse_primary(self) -> Node:
        kind, value, line = self.current
        if kind == "name":
            self.next()
            if value in ("true", "false", "True", "False"):
                return Const(value in ("true", "True"), lineno=line)
            if value in ("none", "None"):
                return Const(None, lineno=line)
            return Name(value, "load", lineno=line)
        if kind == "string":
            self.next()
            parts = [value]
            while self.test("string"):
                parts.append(self.next()[1])
            return Const("".join(parts), lineno=line)
        if kind in ("integer", "float"):
            self.next()
            return Const(value, lineno=line)
        if kind == "lparen":
            self.next()
            node = self.parse_tuple(explicit_parentheses=True)
            self.expect("rparen")
            return node
        if kind == "lbracket":
            return self.parse_list()
        raise _Decline

    def parse_tuple(self, with_condexpr: bool = True, explicit_parentheses: bool = False
                    ) -> Node:
        line = self.current[2]
        args: list[Node] = []
        is_tuple = False
        while True:
            if args:
                self.expect("comma")
            if self.current[0] in ("variable_end", "block_end", "rparen"):
                break
            args.append(self.parse_expression(with_condexpr=with_condexpr))
            if self.current[0] != "comma":
                break
            is_tuple = True
            line = self.current[2]
        if not is_tuple:
            if args:
                return args[0]
            if not explicit_parentheses:
                raise _Decline  # `{{ }}`: Jinja's error
        return Tuple(args, "load", lineno=line)

    def parse_list(self) -> Node:
        line = self.expect("lbracket")[2]
        items: list[Node] = []
        while not self.test("rbracket"):
            if items:
                self.expect("comma")
            if self.test("rbracket"):
                break
            items.append(self.parse_expression())
        self.expect("rbracket")
        return List(items, lineno=line)

    def parse_postfix(self, node: Node) -> Node:
        while True:
            kind = self.current[0]
            if kind in ("dot", "lbracket"):
                node = self.parse_subscript(node)
            elif kind == "lparen":
                node = self.parse_call(node)
            else:
                return node

    def parse_filter_expr(self, node: Node) -> Node:
        while True:
            kind = self.current[0]
            if kind == "pipe":
                node = self.parse_filter(node)
            elif self.test("name", "is"):
                node = self.parse_test(node)
            elif kind == "lparen":
                node = self.parse_call(node)
            else:
                return node

    def parse_subscript(self, node: Node) -> Node:
        kind, _, line = self.next()
        if kind == "dot":
            attr = self.expect("name")  # `a.0` was declined by the lexer
            return Getattr(node, attr[1], "load", lineno=line)
        args: list[Node] = []
        while not self.test("rbracket"):
            if args:
                self.expect("comma")
            args.append(self.parse_expression())  # a slice's `:` was declined by the lexer
        self.expect("rbracket")
        arg = args[0] if len(args) == 1 else Tuple(args, "load", lineno=line)
        return Getitem(node, arg, "load", lineno=line)

    def parse_call_args(self) -> tuple[list[Node], list[Node]]:
        self.expect("lparen")
        args: list[Node] = []
        kwargs: list[Node] = []
        while not self.test("rparen"):
            if args or kwargs:
                self.expect("comma")
                if self.test("rparen"):
                    break  # a trailing comma
            if self.current[0] in ("mul", "pow"):
                raise _Decline  # *args, **kwargs
            if self.test("name") and self.test("assign", token=self.look()):
                key = self.next()[1]
                self.next()
                value = self.parse_expression()
                kwargs.append(Keyword(key, value, lineno=value.lineno))
            else:
                if kwargs:
                    raise _Decline  # a positional argument after a keyword: Jinja's error
                args.append(self.parse_expression())
        self.expect("rparen")
        return args, kwargs

    def parse_call(self, node: Node) -> Node:
        line = self.current[2]
        args, kwargs = self.parse_call_args()
        return Call(node, args, kwargs, None, None, lineno=line)

    def _dotted_name(self) -> Token:
        token = self.expect("name")
        name = token[1]
        while self.skip_if("dot"):
            name += "." + self.expect("name")[1]
        return (token[0], name, token[2])

    def parse_filter(self, node: Node) -> Node:
        while self.skip_if("pipe"):
            _, name, line = self._dotted_name()
            args, kwargs = self.parse_call_args() if self.test("lparen") else ([], [])
            node = Filter(node, name, args, kwargs, None, None, lineno=line)
        return node

    def parse_test(self, node: Node) -> Node:
        line = self.next()[2]
        negated = self.skip_if("name", "not")
        name = self._dotted_name()[1]
        kwargs: list[Node] = []
        if self.test("lparen"):
            args, kwargs = self.parse_call_args()
        elif self.current[0] in _TEST_ARG_START and not (
                self.current[0] == "name" and self.current[1] in ("else", "or", "and")):
            if self.test("name", "is"):
                raise _Decline  # chained tests: Jinja's error
            args = [self.parse_postfix(self.parse_primary())]
        else:
            args = []
        test = Test(node, name, args, kwargs, None, None, lineno=line)
        return Not(test, lineno=line) if negated else test


def light_parse(source: str) -> Node | None:
    """The tree Jinja's `Environment.parse(source)` gives (for an environment with the default
    delimiters, no extensions or line statements, `keep_trailing_newline` set), of this
    module's nodes; None for a template of other shapes, or not valid."""
    try:
        return _Parser(_tokens(source)).parse()
    except (_Decline, RecursionError):  # a long `else` chain: Jinja's parse decides
        return None
