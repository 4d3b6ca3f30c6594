"""Workflow registries in Conductor's format: `podium registry add|list|show|remove|set-default|
update` and `podium run NAME[@REGISTRY][#REF]`, against real git repositories made in tmp_path
(file:// URLs and paths; no network), the real CLI in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers_engine import cli_env, podium_argv

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FLOW = """workflow: {{name: hello, entry_point: a}}
agents:
  - {{name: a, type: set, value: {{v: "{value}"}}, routes: [{{to: $end}}]}}
output: {{v: "{{{{ a.output.v }}}}"}}
"""
INDEX = """workflows:
  hello:
    description: Says a word
    path: workflows/hello/hello.yaml
"""


def _cli(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit(work: Path, value: str, tag: str | None = None) -> str:
    flow = work / "workflows" / "hello" / "hello.yaml"
    flow.parent.mkdir(parents=True, exist_ok=True)
    flow.write_text(FLOW.format(value=value), encoding="utf-8")
    (flow.parent / "notes.md").write_text(f"asset {value}\n", encoding="utf-8")
    (work / "index.yaml").write_text(INDEX, encoding="utf-8")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", value)
    if tag:
        _git(work, "tag", tag)
    _git(work, "push", "-q", "origin", "main", "--tags")
    return _git(work, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repository (the registry) and a work tree that pushes to it."""
    bare = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", str(bare))
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    _git(work, "remote", "add", "origin", str(bare))
    return bare, work


def _out(proc: subprocess.CompletedProcess[str]) -> object:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_git_registry_refs_cache_and_show(tmp_path: Path, remote: tuple[Path, Path]) -> None:
    bare, work = remote
    first = _commit(work, "one", tag="v1")
    proc = _cli(tmp_path, "registry", "add", "team", f"file://{bare}")
    assert proc.returncode == 0, proc.stderr
    assert "as the default" in proc.stdout
    assert (tmp_path / "home" / "registries.toml").read_text().count('type = "git"') == 1

    assert _out(_cli(tmp_path, "run", "hello@team")) == {"v": "one"}
    second = _commit(work, "two")
    assert _out(_cli(tmp_path, "run", "hello@team")) == {"v": "two"}  # latest re-fetched
    assert _out(_cli(tmp_path, "run", "hello@team#v1")) == {"v": "one"}
    assert _out(_cli(tmp_path, "run", f"hello@team#{first}")) == {"v": "one"}
    assert _out(_cli(tmp_path, "run", "hello@#v1")) == {"v": "one"}  # the default registry
    assert _out(_cli(tmp_path, "run", "hello")) == {"v": "two"}

    proc = _cli(tmp_path, "--silent", "run", "hello@team#v1", "--json")
    run_id = _out(proc)["run_id"]  # type: ignore[index]
    show = _cli(tmp_path, "show", run_id)
    assert show.returncode == 0, show.stderr
    assert f"from registry: hello@team#v1 · path workflows/hello/hello.yaml · commit {first}" \
        in show.stdout
    assert "sha256 " in show.stdout

    # The remote is gone: a pinned commit runs from the cache; latest falls back with a note.
    shutil.rmtree(bare)
    assert _out(_cli(tmp_path, "run", f"hello@team#{second}")) == {"v": "two"}
    proc = _cli(tmp_path, "run", "hello@team")
    assert _out(proc) == {"v": "two"}
    assert "using the cached copy" in proc.stderr


def test_tampered_cache_is_refused(tmp_path: Path, remote: tuple[Path, Path]) -> None:
    bare, work = remote
    commit = _commit(work, "one")
    assert _cli(tmp_path, "registry", "add", "team", f"file://{bare}").returncode == 0
    assert _out(_cli(tmp_path, "run", f"hello@team#{commit}")) == {"v": "one"}
    cached = tmp_path / "home" / "registry-cache" / "team" / commit[:12]
    (cached / "workflows" / "hello" / "hello.yaml").write_text(FLOW.format(value="evil"))
    proc = _cli(tmp_path, "run", f"hello@team#{commit}")
    assert proc.returncode == 2
    assert "sha256 mismatch" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_errors_one_line_each(tmp_path: Path, remote: tuple[Path, Path]) -> None:
    bare, work = remote
    _commit(work, "one")
    assert _cli(tmp_path, "registry", "add", "team", str(bare)).returncode == 0  # a bare path
    cases = {
        "helo@team": (2, "did you mean 'hello'"),
        "hello@nope": (2, "unknown registry 'nope'"),
        "hello@team#nosuchtag": (2, "no tag, branch or commit 'nosuchtag'"),
        "hello@team#": (2, "nothing after #"),
        "a@b@c": (2, "at most one @"),
    }
    for arg, (code, text) in cases.items():
        proc = _cli(tmp_path, "run", arg)
        assert proc.returncode == code, (arg, proc.stderr)
        assert text in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
    proc = _cli(tmp_path, "registry", "add", "gone", f"file://{tmp_path}/missing.git")
    assert proc.returncode == 3
    assert "git clone" in proc.stderr
    assert "gone" not in (tmp_path / "home" / "registries.toml").read_text()


def test_path_registry_and_management(tmp_path: Path, remote: tuple[Path, Path]) -> None:
    bare, work = remote
    _commit(work, "one")
    assert _cli(tmp_path, "registry", "add", "local", str(work)).returncode == 0
    assert _cli(tmp_path, "registry", "add", "team", f"file://{bare}").returncode == 0
    listing = _cli(tmp_path, "registry", "list")
    assert listing.stdout.splitlines() == [f"* local  path  {work}",
                                           f"  team  git  file://{bare}"]
    assert "hello  workflows/hello/hello.yaml  Says a word" in \
        _cli(tmp_path, "registry", "list", "local").stdout

    (work / "workflows" / "hello" / "hello.yaml").write_text(FLOW.format(value="edited"))
    assert _out(_cli(tmp_path, "run", "hello@local")) == {"v": "edited"}  # read in place
    proc = _cli(tmp_path, "run", "hello@local#v1")
    assert proc.returncode == 2
    assert "has no refs" in proc.stderr

    assert _cli(tmp_path, "registry", "set-default", "team").returncode == 0
    assert _cli(tmp_path, "registry", "list").stdout.startswith("  local")
    assert _out(_cli(tmp_path, "run", "hello")) == {"v": "one"}

    _git(work, "checkout", "-q", "--", ".")
    new = _commit(work, "two")
    proc = _cli(tmp_path, "registry", "update", "team")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"team: {new}"

    assert _cli(tmp_path, "registry", "remove", "team").returncode == 0
    assert not (tmp_path / "home" / "registry-cache" / "team").exists()
    assert _cli(tmp_path, "registry", "list").stdout.splitlines() == [f"  local  path  {work}"]
    proc = _cli(tmp_path, "registry", "remove", "team")
    assert proc.returncode == 2
    assert "unknown registry 'team'" in proc.stderr


REACHING = """workflow: {{name: hello, entry_point: a}}
agents:
  - {{name: a, type: {kind}, {what}, routes: [{{to: $end}}]}}
output: {{v: "{{{{ a.output }}}}"}}
"""


def _commit_reaching(work: Path, kind: str, what: str, name: str) -> None:
    """A commit whose workflow (at workflows/hello/hello.yaml) names `what`, and a note at
    the tree's root that it may read."""
    flow = work / "workflows" / "hello" / "hello.yaml"
    flow.parent.mkdir(parents=True, exist_ok=True)
    flow.write_text(REACHING.format(kind=kind, what=what), encoding="utf-8")
    (work / "shared.md").write_text("a note inside the tree\n", encoding="utf-8")
    (work / "index.yaml").write_text(INDEX, encoding="utf-8")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", name)
    _git(work, "tag", name)
    _git(work, "push", "-q", "origin", "main", "--tags")


def test_a_registry_workflow_reads_and_runs_only_its_pinned_tree(
        tmp_path: Path, remote: tuple[Path, Path]) -> None:
    """`!file` and `workflow:` that leave the pinned commit's tree (by `..`, an absolute path)
    are refused with the file and line, before anything runs; inside the tree they work."""
    bare, work = remote
    outside = tmp_path / "home" / "registry-cache" / "team" / "outside.txt"  # beside the tree
    secret = tmp_path / "secret.txt"
    other = tmp_path / "other.yaml"
    other.write_text(FLOW.format(value="not pinned"), encoding="utf-8")
    cases = {
        "updots": ("set", "value: !file ../../../outside.txt", "'!file ../../../outside.txt'"),
        "absolute": ("set", f"value: !file {secret}", f"'!file {secret}'"),
        "subflow": ("workflow", f"workflow: {other}", f"sub-workflow '{other}'"),
        "inside": ("set", "value: !file ../../shared.md", None),
    }
    for tag, (kind, what, _) in cases.items():
        _commit_reaching(work, kind, what, tag)
    assert _cli(tmp_path, "registry", "add", "team", f"file://{bare}").returncode == 0
    assert _out(_cli(tmp_path, "run", "hello@team#inside")) is not None
    outside.write_text("beside the tree\n", encoding="utf-8")
    secret.write_text("outside everything\n", encoding="utf-8")
    for tag, (_, _, named) in cases.items():
        proc = _cli(tmp_path, "run", f"hello@team#{tag}", "--json")
        if named is None:
            assert proc.returncode == 0, proc.stderr
            assert "a note inside the tree" in proc.stdout
            continue
        assert proc.returncode == 2, (tag, proc.stderr)
        assert f"{named}" in proc.stderr, proc.stderr
        assert "is outside the pinned tree of this registry workflow" in proc.stderr
        assert "hello.yaml:3:" in proc.stderr, proc.stderr  # the file and line that names it
        assert "beside the tree" not in proc.stdout + proc.stderr
        assert "outside everything" not in proc.stdout + proc.stderr
        assert "not pinned" not in proc.stdout
        assert "Traceback" not in proc.stderr
