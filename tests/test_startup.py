"""What the console script does for start-up time (podium.cli.entry, docs/decisions/0010):
the collector is off until the command's code is imported, pydantic looks for no plugins, and
typer builds the parser of the invoked command only. Each is checked for its effect, never for
a duration (the figures live in docs/performance.md)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers_engine import EXAMPLES, cli_env, imported, podium_argv
from podium.cli.entry import ready
from podium.cli.main import app
from podium.cli.process import command_app

ARTICLE = EXAMPLES / "dev-review" / "workflow.yaml"


def _probe(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_the_cli_loads_no_pydantic_plugin_and_never_imports_importlib_metadata() -> None:
    out = _probe(
        "import sys\n"
        "from podium.cli.entry import skip_pydantic_plugins\n"
        "skip_pydantic_plugins()\n"
        "from pydantic import BaseModel\n"
        "class M(BaseModel):\n"
        "    x: int\n"
        "print(type(M.__pydantic_validator__).__name__, M(x='3').x,\n"
        "      'importlib.metadata' in sys.modules)\n")
    assert out.split() == ["SchemaValidator", "3", "False"]


def test_pydantic_plugins_are_left_alone_once_pydantic_has_looked() -> None:
    out = _probe(
        "import sys\n"
        "import pydantic.plugin._loader as real\n"
        "from podium.cli.entry import skip_pydantic_plugins\n"
        "skip_pydantic_plugins()\n"
        "print(sys.modules['pydantic.plugin._loader'] is real)\n")
    assert out.strip() == "True"


def test_validate_through_the_console_entry_imports_no_plugin_lookup(tmp_path: Path) -> None:
    """(And no typer: its plain form is read without it, podium.cli.plain.)"""
    names = imported(tmp_path, "validate", ARTICLE)
    assert "podium.language.model" in names
    assert "importlib.metadata" not in names
    assert "podium.cli.plain" in names
    assert not {n for n in names if n.split(".")[0] == "typer" or n == "podium.cli.main"}


def test_ready_freezes_start_up_and_turns_the_collector_back_on() -> None:
    assert gc.isenabled()
    ready()  # the collector is on (as in tests and libraries): nothing happens
    assert gc.get_freeze_count() == 0
    gc.disable()
    try:
        ready()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_console_entry_collects_garbage_while_a_command_runs(tmp_path: Path) -> None:
    """Through the console entry, the command's own code runs with the collector on and the
    start-up objects frozen (the probe reports from inside run_validate)."""
    out = _probe(
        "import gc, sys\n"
        "import podium.cli.validate_cmd as v\n"
        "real = v.run_validate\n"
        "def spy(*a):\n"
        "    print('enabled', gc.isenabled(), 'frozen', gc.get_freeze_count() > 0)\n"
        "    return real(*a)\n"
        "v.run_validate = spy\n"
        f"sys.argv = ['podium', 'validate', {str(ARTICLE)!r}]\n"
        "import atexit\n"
        "atexit.register(lambda: print('exit handlers ran'))\n"
        "from podium.cli.entry import main\n"
        "main()\n")
    assert "enabled True frozen True" in out
    # the plain validate ends without the interpreter's finalization (cli/guard.py), its
    # exit handlers run and the exit code is 0 (_probe)
    assert out.rstrip().endswith("exit handlers ran")


@pytest.mark.parametrize(("args", "names"), [
    (["validate", "x.yaml"], ["validate"]),
    (["gate", "list"], ["gate"]),
    (["test"], ["test"]),
])
def test_a_known_command_gets_an_app_with_only_that_command(args: list[str],
                                                            names: list[str]) -> None:
    only = command_app(args)
    assert only is not app
    got = [c.name or c.callback.__name__ for c in only.registered_commands if c.callback]
    got += [g.name for g in only.registered_groups if g.name]
    assert got == names
    assert only.registered_callback is app.registered_callback
    assert len(app.registered_commands) > 10  # the whole app is untouched


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"], ["--version"], ["nope"],
                                  ["valdate", "x.yaml"]])
def test_anything_else_gets_the_whole_app(args: list[str]) -> None:
    assert command_app(args) is app


def test_a_command_run_alone_keeps_its_usage_and_errors() -> None:
    runner = CliRunner()
    whole = runner.invoke(app, ["validate", "--help"], prog_name="podium")
    alone = runner.invoke(command_app(["validate", "--help"]), ["validate", "--help"],
                          prog_name="podium")
    assert alone.exit_code == whole.exit_code == 0
    assert alone.output == whole.output
    assert alone.output.startswith("Usage: podium validate [OPTIONS]")
    wrong = runner.invoke(command_app(["validate"]), ["validate", "--nope"],
                          prog_name="podium")
    assert wrong.exit_code == 2
    assert "No such option: --nope" in wrong.output


def _help(columns: str, console_script: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(Path("/nonexistent-podium-home")), "COLUMNS": columns}
    argv = [str(Path(sys.executable).parent / "podium"), "--help"] if console_script \
        else podium_argv("--help")
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_stored_help_is_what_typer_renders() -> None:
    """podium.cli.help_text is generated; when a command or root option changes, this fails
    until `scripts/gen_help_text.py` is run again."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    try:
        import gen_help_text
    finally:
        sys.path.pop(0)
    from podium.cli.help_text import HELP

    assert gen_help_text.render() == HELP, "run scripts/gen_help_text.py"
    assert "Commands:" in HELP
    assert "  validate " in HELP


def test_help_prints_the_stored_text_on_a_wide_terminal_and_asks_typer_on_a_narrow_one() -> None:
    from podium.cli.help_text import HELP

    for columns in ("80", "200"):
        script = _help(columns, console_script=True)
        assert (script.returncode, script.stdout, script.stderr) == (0, HELP, "")
        module = _help(columns)  # click calls it `python -m podium`
        assert module.returncode == 0
        assert module.stdout == HELP.replace("Usage: podium", "Usage: python -m podium", 1)
    narrow = _help("60")  # typer wraps to the terminal: not the stored text
    assert narrow.returncode == 0
    assert narrow.stdout.startswith("Usage: python -m podium [OPTIONS] COMMAND [ARGS]...")
    assert "Commands:" in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60
    wide_typer = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv = ['podium', '--help']\n"
         "from podium.cli.process import main\nmain()"],
        env={**cli_env(Path("/nonexistent-podium-home")), "COLUMNS": "120"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)
    assert wide_typer.stdout == HELP  # typer itself at 120 columns: what is stored


def test_validate_pauses_the_collector_only_while_it_checks(tmp_path: Path) -> None:
    """validate_file keeps the cyclic collector off while it loads and checks a file (it
    walked their objects again and again) and gives it back as it was: on after a check, a
    failed read, and checks running at once on two threads; off when it was off."""
    import threading

    from podium.check import validate as v
    from podium.language.source import FileUnreadable

    seen: list[bool] = []
    real = v.load_workflow

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    v.load_workflow = spy  # type: ignore[assignment]
    try:
        assert gc.isenabled()
        assert not v.validate_file(ARTICLE).sink.errors
        assert seen == [False]
        assert gc.isenabled()
        with pytest.raises(FileUnreadable):
            v.validate_file(tmp_path / "missing.yaml")
        assert gc.isenabled()
        threads = [threading.Thread(target=v.validate_file, args=(ARTICLE,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen[2:] == [False] * 4
        assert gc.isenabled()
        gc.disable()
        try:
            v.validate_file(ARTICLE)
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        v.load_workflow = real  # type: ignore[assignment]
