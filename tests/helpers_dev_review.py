"""The article's dev-review for runs on an SDK provider (openai, azure, claude), where tools
are opt-in: a copy of examples/dev-review whose developer names the workspace tools it needs,
the one line examples/dev-review/README.md tells a user to add."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers_engine import EXAMPLES

DEV_REVIEW = EXAMPLES / "dev-review"
ANCHOR = '    working_dir: "{{ workflow.input.repo_dir }}"\n    reasoning:\n      effort: medium\n'
DEV_TOOLS = "    tools: [read_file, list_dir, search, write_file, edit_file, run_command]\n"


def dev_review_with_tools(dest: Path) -> Path:
    """A copy of the example in `dest` (scripts and tickets beside it); its workflow file."""
    shutil.copytree(DEV_REVIEW, dest, ignore=shutil.ignore_patterns("sample-repo"))
    flow = dest / "workflow.yaml"
    text = flow.read_text(encoding="utf-8")
    assert text.count(ANCHOR) == 1, "the developer's working_dir line moved"
    flow.write_text(text.replace(ANCHOR, ANCHOR + DEV_TOOLS), encoding="utf-8")
    return flow
