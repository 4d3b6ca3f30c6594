"""Bad input of every kind gets one clear line and a non-zero exit from `podium validate`.

Empty, binary, non-UTF-8, huge and hostile files (alias bombs, 10,000-deep nesting of YAML or
of a template), YAML of the wrong shape, a directory and a missing file: each run of the real CLI prints exactly one
line (stdout and stderr together) naming the file, never a traceback.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

Runner = Callable[..., subprocess.CompletedProcess[str]]

DEPTH = 10_000


def _alias_bomb() -> bytes:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
        prev = name
    return ("\n".join(lines) + "\n").encode()


def _string_alias_bomb() -> bytes:
    """One 1 MB string aliased 2,000 times (2 GB once expanded), far under the node limit,
    in a workflow that is valid otherwise."""
    aliases = ", ".join(["*big"] * 2_000)
    return (f'workflow:\n  name: bomb\n  entry_point: a\n  description: &big "{"x" * 1_000_000}"\n'
            f"agents:\n  - name: a\n    type: set\n    value: [{aliases}]\n").encode()


def _ten_megabytes() -> bytes:
    head = b"workflow:\n  name: big\n  entry_point: a\nagents:\n  - name: a\n    prompt: |\n"
    line = b"      " + b"x" * 93 + b"\n"
    return head + line * (10 * 1024 * 1024 // len(line) + 1)


def _deep_block_mappings() -> bytes:
    # block mappings nested 2,500 deep with one-space indentation (about 3 MB)
    return "".join(" " * i + "a:\n" for i in range(2_500)).encode() + b" " * 2_500 + b"1\n"


CONTENT_CASES: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"  \n\t\n   \n",
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00",
    "latin-1": "workflow:\n  name: café\n  entry_point: a\n".encode("latin-1"),
    "ten-megabytes": _ten_megabytes(),
    "alias-bomb": _alias_bomb(),
    "string-alias-bomb": _string_alias_bomb(),
    "deep-flow": b"[" * DEPTH + b"]" * DEPTH + b"\n",
    "deep-flow-mappings": b"{a: " * DEPTH + b"1" + b"}" * DEPTH + b"\n",
    "deep-block": b"- " * DEPTH + b"x\n",
    "deep-block-mappings": _deep_block_mappings(),
    "deep-template": (b"workflow: {name: t, entry_point: a}\nagents:\n  - name: a\n"
                      b"    prompt: '{{ " + b"(" * DEPTH + b"1" + b")" * DEPTH + b" }}'\n"),
    "long-template-chain": (b"workflow: {name: t, entry_point: a}\nagents:\n  - name: a\n"
                            b"    prompt: '{{ a" + b".output" * DEPTH + b" }}'\n"),
    "mapping-for-list": b"workflow:\n  name: t\n  entry_point: a\nagents: {a: 1}\n",
    "list-root": b"- workflow: {name: t}\n- agents: []\n",
    "scalar-root": b"just some text\n",
    "number-root": b"42\n",
    "two-documents": b"workflow: {name: t, entry_point: a}\n---\nagents: []\n",
    "tab-indent": b"workflow:\n\tname: t\n",
    "unclosed-quote": b'workflow:\n  name: "t\n  entry_point: a\n',
    "unknown-tag": b"workflow: !!python/object:os.system {}\n",
}

# a few words every message must contain: it says what is wrong
EXPECTED_WORDS = {
    "empty": "empty",
    "whitespace": "empty",
    "binary": "binary",
    "latin-1": "UTF-8",
    "ten-megabytes": "too large",
    "alias-bomb": "alias",
    "string-alias-bomb": "alias bomb",
    "deep-flow": "nesting",
    "deep-flow-mappings": "nesting",
    "deep-block": "nesting",
    "deep-block-mappings": "nesting",
    "deep-template": "nesting too deep",
    "long-template-chain": "nesting too deep",
    "mapping-for-list": "must be a list",
    "list-root": "must be a mapping",
    "scalar-root": "must be a mapping",
    "number-root": "must be a mapping",
    "two-documents": "more than one YAML document",
    "tab-indent": "YAML",
    "unclosed-quote": "YAML",
    "unknown-tag": "tag",
}


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    combined = proc.stdout + proc.stderr
    assert "Traceback" not in combined
    lines = combined.splitlines()
    assert len(lines) == 1, combined[:2000]
    return lines[0]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("case", sorted(CONTENT_CASES))
def test_bad_content_gives_one_located_line(podium_cli: Runner, tmp_path: Path,
                                            case: str) -> None:
    name = f"{case}.yaml"
    (tmp_path / name).write_bytes(CONTENT_CASES[case])
    proc = podium_cli("validate", name, cwd=tmp_path)
    line = _one_line(proc)
    assert re.match(rf"{re.escape(name)}:\d+:\d+: \S+: ", line), line
    assert EXPECTED_WORDS[case] in line
    assert len(line) < 300, line
    assert proc.returncode == 2


def test_binary_error_points_at_the_nul_byte(podium_cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(b"workflow:\n  name: ab\x00cd\n")
    assert _one_line(podium_cli("validate", "b.yaml", cwd=tmp_path)).startswith("b.yaml:2:11: ")


def test_non_utf8_error_points_at_the_byte(podium_cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "l.yaml").write_bytes(CONTENT_CASES["latin-1"])
    line = _one_line(podium_cli("validate", "l.yaml", cwd=tmp_path))
    assert line == "l.yaml:2:12: <root>: not valid UTF-8 (byte 0xe9) (save the file as UTF-8)"


def test_directory_is_unreadable(podium_cli: Runner, tmp_path: Path) -> None:
    # validate takes a folder (the workflows under it, as `podium test DIR`); an empty one
    # is one line and exit 3, as a missing file
    (tmp_path / "flows").mkdir()
    proc = podium_cli("validate", "flows", cwd=tmp_path)
    assert _one_line(proc).startswith("podium validate: flows: no workflow files under it")
    assert proc.returncode == 3


def test_missing_file_is_unreadable(podium_cli: Runner, tmp_path: Path) -> None:
    proc = podium_cli("validate", "missing.yaml", cwd=tmp_path)
    assert _one_line(proc) == "missing.yaml: file not found"
    assert proc.returncode == 3


def test_bad_included_file_names_the_included_file(podium_cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "prompt.md").write_bytes(b"caf\xe9\n")
    (tmp_path / "wf.yaml").write_text(
        "workflow: {name: t, entry_point: a}\nagents:\n  - name: a\n    prompt: !file prompt.md\n",
        encoding="utf-8")
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert _one_line(proc).startswith("prompt.md:1:4: <root>: not valid UTF-8")
    assert proc.returncode == 2


def test_include_of_a_directory(podium_cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "wf.yaml").write_text(
        "workflow: {name: t, entry_point: a}\nagents: !file parts\n", encoding="utf-8")
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert _one_line(proc) == ("wf.yaml:2:9: agents: cannot include 'parts': is a directory, "
                               "not a file")
    assert proc.returncode == 2
