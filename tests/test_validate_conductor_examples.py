"""Conductor's own 46 examples and 9 test fixtures (tests/corpus/conductor-examples, copied
unchanged): `podium validate` gives each exactly the pinned result (valid or not, and every
diagnostic line). What they still report is deliberate: providers and keys podium does not
support (aca, Conductor's built-in skill, plugins by name, skill discovery), names a
Conductor run would fail on too (`{{ changes }}` with no such variable), and podium's own
warnings (docs/compatibility.md).

After a deliberate change, regenerate and review with
`python tests/test_validate_conductor_examples.py` (from the repository root).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.check.validate import validate_file
from podium.language.source import FileUnreadable

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "conductor-examples"
EXPECTED = CORPUS / "expected.json"
FILES = sorted([*CORPUS.glob("examples/*.yaml"), *CORPUS.glob("fixtures/*.yaml")])


def result_of(path: Path) -> dict[str, object]:
    """`valid` and the diagnostic lines, files shown relative to the corpus folder."""
    try:
        found = validate_file(path, environ={})
    except FileUnreadable as exc:  # pragma: no cover - every corpus file is readable
        return {"valid": False, "diagnostics": [str(exc)]}
    lines = []
    for d in found.sink.sorted():
        shown = Path(d.file)
        if not shown.is_absolute():
            shown = Path.cwd() / shown
        text = d.format()
        lines.append(text.replace(d.file, shown.resolve().relative_to(CORPUS).as_posix(), 1))
    return {"valid": found.model is not None and not found.sink.errors, "diagnostics": lines}


def test_the_corpus_is_conductors_46_examples_and_9_fixtures() -> None:
    assert len([f for f in FILES if f.parent.name == "examples"]) == 46
    assert len([f for f in FILES if f.parent.name == "fixtures"]) == 9


@pytest.mark.parametrize("path", FILES, ids=[f"{f.parent.name}/{f.stem}" for f in FILES])
def test_conductor_file_validates_as_pinned(path: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # skill discovery's personal source: empty
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert result_of(path) == expected[path.relative_to(CORPUS).as_posix()]


def test_the_files_conductor_calls_valid_are_valid() -> None:
    """Conductor's valid fixtures and the examples that use only what podium runs."""
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    for name in ("fixtures/valid_full.yaml", "fixtures/valid_simple.yaml",
                 "fixtures/valid_env_vars.yaml", "fixtures/valid_templated_enums.yaml",
                 "examples/research-assistant.yaml", "examples/parallel-research.yaml",
                 "examples/set-step.yaml", "examples/wait-step.yaml",
                 "examples/context-tier.yaml", "examples/tool-output-limits.yaml",
                 "examples/hermes-simple.yaml", "examples/hermes-features.yaml",
                 "examples/hermes-toolsets.yaml",
                 "examples/skills-self-improving-workflow.yaml"):
        assert expected[name]["valid"], name


def _regenerate() -> None:  # pragma: no cover - a maintainer's tool
    import os
    import tempfile

    os.environ["HOME"] = tempfile.mkdtemp()  # as the test has it: no personal skills
    out = {f.relative_to(CORPUS).as_posix(): result_of(f) for f in FILES}
    EXPECTED.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, res in out.items():
        print(f"{name}: {'valid' if res['valid'] else 'invalid'}, "
              f"{len(res['diagnostics'])} diagnostic(s)")  # type: ignore[arg-type]


if __name__ == "__main__":
    _regenerate()
