"""Shell quoting: a script step that runs a shell with `-c` and pastes a workflow input or an
agent's output into the command string without the `quote` filter is injectable (an input
`$(rm -rf ~)` would run); validate warns at that argument."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from podium.check.base import CheckerBase
from podium.language.diagnostics import KeyPath
from podium.language.model import AgentStep, ScriptStep
from podium.templating.text import RenderFailure, is_template

if TYPE_CHECKING:
    from jinja2 import nodes
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "posh", "yash"})
# Filters whose result is a number or a word with no shell meaning, whatever they are given.
SAFE_FILTERS = frozenset({"quote", "int", "float", "length", "count", "wordcount", "abs",
                          "round", "filesizeformat"})
_C_OPTION = re.compile(r"-[A-Za-z]*c[A-Za-z]*")
_TAKES_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def check_shell_quoting(checker: CheckerBase) -> None:
    """Warn at each `sh -c` command string that reads untrusted text without `| quote`."""
    untrusted = _untrusted_roots(checker)
    for path, step, extra in _script_steps(checker):
        command = step.command.strip()
        if is_template(command) or PurePosixPath(command).name not in SHELLS:
            continue
        index = command_string_index(step.args)
        if index is None or "{" not in step.args[index]:
            continue
        try:
            tree = checker.parser.parse(step.args[index])
        except RenderFailure:
            continue  # reported by the template checks
        for ref in unquoted_reads(tree, untrusted | extra):
            checker.warn((*path, "args", index),
                         f"'{ref}' is pasted into a shell command unquoted: a value such as "
                         f"$(rm -rf ~) in it would run",
                         f"use {{{{ {ref} | quote }}}}",
                         code="unquoted-shell", at="value")


def command_string_index(args: list[str]) -> int | None:
    """The index of the command string of `sh [options] -c STRING`, None without `-c`."""
    i, seen_c = 0, False
    while i < len(args):
        arg = args[i]
        if seen_c:
            if arg in _TAKES_VALUE:
                i += 2
                continue
            if arg == "--" or (arg[:1] in "-+" and len(arg) > 1 and not is_template(arg)):
                i += 1
                continue
            return i
        if arg in _TAKES_VALUE:
            i += 2
            continue
        if _C_OPTION.fullmatch(arg):
            seen_c = True
        elif not (arg[:1] in "-+" and len(arg) > 1):
            return None  # a script file: no command string
        i += 1
    return None


def _script_steps(checker: CheckerBase) -> Iterator[tuple[KeyPath, ScriptStep, frozenset[str]]]:
    for i, step in enumerate(checker.wf.agents):
        if isinstance(step, ScriptStep):
            yield ("agents", i), step, frozenset()
    agents = {n for n, s in checker.steps.items() if isinstance(s, AgentStep)}
    for i, group in enumerate(checker.wf.for_each):
        if isinstance(group.agent, ScriptStep):
            root = group.source.split(".")[0]
            item = frozenset({group.as_}) if root == "workflow" or root in agents \
                else frozenset()
            yield ("for_each", i, "agent"), group.agent, item


def _untrusted_roots(checker: CheckerBase) -> frozenset[str]:
    """Names whose values come from outside: agents' outputs (and groups of agents);
    `workflow` stands for its inputs."""
    agents = {n for n, s in checker.steps.items() if isinstance(s, AgentStep)}
    groups = {g.name for g in checker.wf.parallel if agents.intersection(g.agents)}
    groups |= {g.name for g in checker.wf.for_each if isinstance(g.agent, AgentStep)}
    return frozenset({"workflow", *agents, *groups})


def unquoted_reads(tree: nodes.Template, untrusted: frozenset[str]) -> list[str]:
    """Each untrusted read (`workflow.input.x`, `agent.output...`) printed by `tree` without
    `| quote`; `{% set %}` and `{% for %}` names holding untrusted text count as untrusted."""
    tainted = set(untrusted)
    changed = True
    while changed:  # names assigned from untrusted values, and names assigned from those
        changed = False
        for node in tree.find_all((nodes.Assign, nodes.For)):
            value = node.node if isinstance(node, nodes.Assign) else \
                node.iter if isinstance(node, nodes.For) else None
            target = node.target if isinstance(node, (nodes.Assign, nodes.For)) else None
            if value is None or target is None or not _reads(value, tainted):
                continue
            names = [target] if isinstance(target, nodes.Name) else \
                list(target.find_all(nodes.Name))
            for name in names:
                if name.name not in tainted:
                    tainted.add(name.name)
                    changed = True
    found: list[str] = []
    for output in tree.find_all(nodes.Output):
        for child in output.nodes:
            if isinstance(child, nodes.TemplateData):
                continue
            for ref in _reads(child, tainted):
                if ref not in found:
                    found.append(ref)
    return found


def _reads(node: nodes.Node, tainted: set[str]) -> list[str]:
    """The untrusted reads in an expression whose value ends up in the text."""
    if isinstance(node, nodes.Filter):
        if node.name in SAFE_FILTERS:
            return []
        parts = [node.node, *node.args, *(kw.value for kw in node.kwargs)]
        return [r for p in parts if p is not None for r in _reads(p, tainted)]
    if isinstance(node, (nodes.Test, nodes.Compare, nodes.Not)):
        return []  # true or false
    chain = _chain(node)
    if chain is not None:
        root = chain[0]
        if root not in tainted:
            return []
        if root == "workflow" and chain[1:2] != ("input",):
            return []  # workflow.dir, workflow.name: set by whoever wrote the workflow
        return [".".join(chain)]
    return [r for child in node.iter_child_nodes() for r in _reads(child, tainted)]


def _chain(node: nodes.Node) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
        elif isinstance(node.arg, nodes.Const):
            parts.append(str(node.arg.value))
        else:
            return None
        node = node.node
    if isinstance(node, nodes.Name):
        return (node.name, *reversed(parts))
    return None
