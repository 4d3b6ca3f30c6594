"""Every block of README.md and docs/*.md marked runnable works as written. A block after
`<!-- runnable: NAME -->` is a file the reader saves as NAME; a block after `<!-- runnable -->`
is commands, each line run in order (in one folder per document, holding the files saved so
far, PODIUM_HOME in tmp) and expected to exit 0, or N when the line ends with `# exit N`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from helpers_engine import VENV_BIN, cli_env

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"<!-- runnable(?::\s*(?P<name>[^ ]+))? -->\n```(?P<lang>\w*)\n"
                   r"(?P<body>.*?)\n```", re.S)


def blocks(doc: Path) -> list[tuple[str | None, str, str]]:
    text = doc.read_text(encoding="utf-8")
    return [(m["name"], m["lang"], m["body"]) for m in BLOCK.finditer(text)]


RUNNABLE = [d for d in DOCS if blocks(d)]


def test_the_readme_has_runnable_blocks() -> None:
    found = blocks(ROOT / "README.md")
    assert [name for name, _, _ in found if name] == ["review.yaml", "answers.yaml"]
    assert any(name is None and lang == "sh" for name, lang, _ in found)
    flow = next(body for name, _, body in found if name == "review.yaml")
    assert 20 <= len(flow.splitlines()) <= 31  # a whole workflow on the first screens


@pytest.mark.parametrize("doc", RUNNABLE, ids=[d.name for d in RUNNABLE])
def test_runnable_blocks_run_as_written(tmp_path: Path, doc: Path) -> None:
    env = cli_env(tmp_path / "home")
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"  # `podium` as after set-up
    for name, _lang, body in blocks(doc):
        if name is not None:
            (tmp_path / name).write_text(body + "\n", encoding="utf-8")
            continue
        for line in body.splitlines():
            command = line.split("  #", 1)[0].strip()
            if not command or command.startswith("#"):
                continue
            expected = re.search(r"# exit (\d+)\s*$", line)
            proc = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=90, check=False)
            want = int(expected[1]) if expected else 0
            assert proc.returncode == want, f"{doc.name}: {command}\n{proc.stdout}{proc.stderr}"
            assert "Traceback" not in proc.stderr, proc.stderr
