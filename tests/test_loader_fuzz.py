"""Property tests: no input makes the loader, the checker or the template engine crash.

Valid workflows (the article's and small ones covering every step type) are mutated at random
(lines deleted, duplicated, swapped, re-indented, truncated; characters, bytes and YAML values
inserted) and validated in-process: the only outcomes allowed are a LoadResult whose
diagnostics are well formed, or FileUnreadable. Hostile templates may only fail with
RenderFailure, and never reach Python internals.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.check.validate import validate_file
from podium.language.load import LoadResult
from podium.language.model import STEP_KEYS, STEP_TYPES
from podium.language.source import FileUnreadable
from podium.templating import RenderFailure, TemplateEngine

ROOT = Path(__file__).resolve().parents[1]

SMALL_WORKFLOWS = [
    """\
workflow:
  name: small
  entry_point: check
  input:
    ticket: {type: string, default: T-1}
  limits: {max_iterations: 5}
agents:
  - name: check
    type: script
    command: ./check.sh
    args: ["{{ workflow.input.ticket }}"]
    output:
      ok: {type: boolean}
    routes:
      - {to: work, when: "{{ check.output.ok }}"}
      - {to: stop}
  - name: work
    prompt: |
      Work on {{ workflow.input.ticket }}.
      {% if check is defined %}{{ check.output.ok }}{% endif %}
    output:
      summary: {type: string, pattern: "^.+$"}
      tags: {type: array, items: {type: string, enum: [a, b]}}
    routes: [{to: pause}]
  - name: pause
    type: wait
    duration: 2s
    routes: [{to: gate}]
  - name: gate
    type: human_gate
    prompt: "Accept {{ work.output.summary }}?"
    options:
      - {label: Yes, value: "yes", route: $end}
      - {label: No, value: "no", route: stop}
  - name: stop
    type: terminate
    status: failed
    reason: stopped
    output_template: {summary: stopped}
output:
  summary: "{{ work.output.summary }}"
""",
    """\
workflow:
  name: groups
  entry_point: fan
  input:
    files: {type: array}
agents:
  - {name: a, prompt: "A", output: {v: {type: number, minimum: 0}}}
  - {name: b, type: set, values: {x: "{{ workflow.input.files | length }}"}}
  - name: sub
    type: workflow
    workflow: child.yaml
    input_mapping: {n: "{{ fan.outputs.a.v }}"}
parallel:
  - name: fan
    agents: [a, b]
    failure_mode: continue_on_error
    routes: [{to: each}]
for_each:
  - name: each
    type: for_each
    source: workflow.input.files
    as: file
    max_concurrent: 2
    agent: {name: item, type: set, value: "{{ file }}-{{ _index }}", output_type: string}
    routes: [{to: sub}]
output:
  items: "{{ each.outputs | tojson }}"
""",
]
SEEDS = [
    (ROOT / "examples" / "dev-review" / "workflow.yaml").read_bytes(),
    (ROOT / "examples" / "review-counter" / "workflow.yaml").read_bytes(),
    *(text.encode() for text in SMALL_WORKFLOWS),
]
CHILD = b"workflow: {name: child, entry_point: s}\nagents:\n  - {name: s, type: set, value: 1}\n"

YAML_VALUES = st.one_of(
    st.sampled_from([
        "", "null", "~", "true", "no", "0", "-1", "0x1F", "1e309", ".nan", "-.inf", "''", '""',
        "[]", "{}", "[1, 2]", "{a: 1}", "[[[[", "{{", "}}", "*anchor", "&a 1", "<<: *a",
        "!file nope.md", "!file .", "!!str 1", "!!int x", "!!binary AA==", "!custom x",
        "${NOPE}", "${A:-b}", "$${ESC}", "'{{ x'", '"{{ a.output.b }}"', '"{% for %}"',
        "|", ">-", "|+\n  text", "- a\n- b", "? k\n: v", "@", "`", "%YAML 1.1", "---", "...",
        "$end", "type: script", "{{ ''.__class__ }}", "'\\x00'", '"\\uD800"', "\t",
    ]),
    st.text(max_size=12).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.recursive(st.sampled_from(["1", "x", "true", "null"]),
                 lambda inner: st.one_of(
                     st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
                     st.dictionaries(st.sampled_from(["a", "b", "to", "name"]), inner,
                                     max_size=3).map(
                         lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}")),
                 max_leaves=6),
)
NOISE = st.one_of(
    st.text(alphabet=" \t:-[]{}#&*!|>'\"%@`,?$\\\n{}%.", max_size=8),
    st.text(max_size=8),
)


_WORD = re.compile(rb"[A-Za-z_$][A-Za-z0-9_]*")
# every name and key of the seeds, plus the language's keywords: swapping one word for another
# keeps the YAML readable and gives the semantic checks something to chew on
WORDS = sorted({w for seed in SEEDS for w in _WORD.findall(seed)}
               | {k.encode() for k in (*STEP_KEYS["agent"], *STEP_TYPES, "parallel",
                                       "for_each", "explicit", "last_only", "output", "outputs",
                                       "errors", "count", "input", "when", "to", "$end")})
# structure-keeping operations are drawn more often than destructive ones
OPERATIONS = ["word"] * 5 + ["value"] * 3 + ["delete"] * 2 + [
    "duplicate", "swap", "chars", "bytes", "indent", "truncate"]


@st.composite
def mutated_workflows(draw: st.DrawFn) -> bytes:
    lines = draw(st.sampled_from(SEEDS)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            lines = [b"\n"]
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(OPERATIONS))
        if op == "word":
            spans = [m.span() for m in _WORD.finditer(lines[i])]
            if spans:
                start, end = draw(st.sampled_from(spans))
                lines[i] = lines[i][:start] + draw(st.sampled_from(WORDS)) + lines[i][end:]
        elif op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op in ("chars", "bytes"):
            noise = draw(NOISE).encode() if op == "chars" else draw(st.binary(max_size=6))
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + noise + lines[i][at:]
        elif op == "indent":
            delta = draw(st.integers(-4, 4))
            body = lines[i].lstrip(b" ")
            width = max(0, len(lines[i]) - len(body) + delta)
            lines[i] = b" " * width + body
        elif op == "value":
            head, sep, _ = lines[i].partition(b": ")
            value = draw(YAML_VALUES).encode()
            lines[i] = (head + sep + value + b"\n") if sep else (lines[i] + value + b"\n")
        else:
            text = b"".join(lines)
            lines = [text[: draw(st.integers(0, len(text)))]]
    return b"".join(lines)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "child.yaml").write_bytes(CHILD)
    (folder / "prompt.md").write_text("# A prompt\n\nWith {{ workflow.input.ticket }}\n")
    return folder


def _check_result(result: LoadResult) -> None:
    assert isinstance(result, LoadResult)
    for d in result.sink.items:
        line = d.format()
        assert len(line.splitlines()) == 1, line
        assert "\x1b" not in line, line
        assert d.line >= 1, line
        assert d.col >= 1, line
        assert d.message.strip(), line
        assert d.severity in ("error", "warning")
    if result.model is None:
        assert result.sink.errors, "no model but no error either"


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=mutated_workflows())
def test_mutated_workflows_never_crash(workdir: Path, data: bytes) -> None:
    path = workdir / "wf.yaml"
    path.write_bytes(data)
    try:
        result = validate_file(path, environ={"HOME": "/home/user", "A": "x"})
    except FileUnreadable:
        return
    _check_result(result)


def test_seeds_are_valid(workdir: Path) -> None:
    for seed in SEEDS:
        (workdir / "seed.yaml").write_bytes(seed)
        result = validate_file(workdir / "seed.yaml", environ={})
        assert [d.format() for d in result.sink.errors] == []
        assert result.model is not None


# --------------------------------------------------------------------------- templates

HOSTILE = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ x.__class__.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ request.application.__globals__ }}",
    "{{ x.__dict__ }}",
    "{{ ''.format.__globals__ }}",
    "{{ '{0.__class__}'.format(x) }}",
    "{{ range(10**9) | list }}",
    "{{ range(10**9) | length }}",
    "{{ 'x' * 10**9 }}",
    "{{ 10**9 * 'x' }}",
    "{{ [0] * 10**9 }}",
    "{{ 2 ** (10 ** 9) }}",
    "{{ 10 ** 5000 }}",
    "{{ 10**9**10**9**10**9**10**9**10 }}",
    "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    "{{ x" + ".a" * 20000 + " }}",
    "{% if 1 %}" * 3000 + "{% endif %}" * 3000,
    "{% set ns = namespace(s='xx') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s | length }}",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% macro f() %}{{ f() }}{{ f() }}{% endmacro %}{{ f() }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
    "{% include 'x' %}",
    "{% import 'os' as os %}",
    "{% extends 'base' %}",
    "{{ x | attr('__class__') }}",
    "{{ (x|attr('__class__')).__base__ }}",
    "{{ {}.update(a=1) }}",
    "{{ [].append(1) }}",
    "{{ 1 / 0 }}",
    "{{ undefined.attr }}",
    "{% if %}",
    "{{ x",
    "{{ '%s' % x }}",
    "{{ x | tojson | fromjson }}",
]
SAFE_CONTEXT = {"x": {"a": 1}, "items": [1, 2]}


def _render(engine: TemplateEngine, source: str) -> str | None:
    try:
        return engine.render(source, SAFE_CONTEXT)
    except RenderFailure:
        return None


@pytest.mark.parametrize("source", HOSTILE, ids=[f"{i:02d}-{s[:30]}" for i, s in enumerate(HOSTILE)])
def test_hostile_templates_only_fail_cleanly(source: str) -> None:
    out = _render(TemplateEngine(), source)
    if out is not None:  # rendered: then nothing of Python's internals leaked out
        for leak in ("<class", "<module", "<function", "<built-in"):
            assert leak not in out
        assert len(out) <= 2_000_000


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ x | attr('__class__') }}",
])
def test_sandbox_escapes_fail(source: str) -> None:
    with pytest.raises(RenderFailure) as failure:
        TemplateEngine().render(source, SAFE_CONTEXT)
    assert failure.value.kind in ("security", "undefined")


@pytest.mark.parametrize("source", ["''.__class__", "loop.__class__", "x.__class__.__mro__",
                                    "cycler.__init__.__globals__", "2 ** (10 ** 9)",
                                    "'x' * 10 ** 9", "undefined_name", "x.a.__class__"])
def test_hostile_expressions_fail_cleanly(source: str) -> None:
    with pytest.raises(RenderFailure):
        TemplateEngine().evaluate(source, SAFE_CONTEXT)


@pytest.mark.parametrize("source", ["{{ 'x' * 10**9 }}", "{{ range(10**9) | list }}",
                                    "{{ 2 ** (10 ** 9) }}"])
def test_huge_values_are_refused_before_they_are_built(source: str) -> None:
    with pytest.raises(RenderFailure):
        TemplateEngine().render(source, SAFE_CONTEXT)


def _template_parts() -> Iterator[str]:
    yield from ("{{ ", " }}", "{% ", " %}", "{# ", " #}", "for x in ", "if ", "endif",
                "endfor", "macro m(a)", "endmacro", "m(1)", "set y = ", "x.", "a", "__class__",
                "__globals__", "mro()", "|", "attr(", "'", '"', "(", ")", "[", "]", "*", "**",
                "10**9", "range(", "~", "+", "caller()", "loop.", "namespace(", "lipsum",
                "cycler", "self", "super()", "include ", "import ", "-", ".", ",", "\n")


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(list(_template_parts())), max_size=14))
def test_random_templates_only_fail_with_render_failure(parts: list[str]) -> None:
    source = "".join(parts)
    engine = TemplateEngine()
    out = _render(engine, source)
    if out is not None:  # globals may print their repr, but no module is ever reached
        assert "<module" not in out
    with contextlib.suppress(RenderFailure):
        engine.evaluate(source, SAFE_CONTEXT)
