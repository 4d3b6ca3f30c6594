"""Drawing a workflow's route graph as Mermaid or Graphviz DOT: steps by type, routes with their
conditions, gates with their options, terminals with their status."""

from __future__ import annotations

import re

from podium.check.graph import RouteGraph
from podium.language.model import END, HumanGateStep, TerminateStep, WorkflowFile


def _mermaid_id(name: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _mermaid_text(text: str) -> str:
    text = " ".join(text.split())
    for a, b in (("&", "&amp;"), ('"', "#quot;"), ("<", "&lt;"), (">", "&gt;"), ("|", "&#124;"),
                 ("{", "&#123;"), ("}", "&#125;")):
        text = text.replace(a, b)
    return text if len(text) <= 80 else text[:77] + "..."


def _condition(when: str) -> str:
    inner = when.strip()
    if inner.startswith("{{") and inner.endswith("}}"):
        inner = inner[2:-2].strip()
    return inner


def to_mermaid(wf: WorkflowFile) -> str:
    g = RouteGraph.build(wf)
    steps = {s.name: s for s in reversed(wf.agents)}
    lines = ["flowchart TD", f"  start((start)) --> {_mermaid_id(wf.workflow.entry_point)}"]
    used_end = False
    for name in g.nodes:
        step = steps.get(name)
        nid = _mermaid_id(name)
        kind = g.kinds.get(name, "agent")
        if isinstance(step, TerminateStep):
            label = _mermaid_text(f"{name}: {step.status}")
            lines.append(f'  {nid}(["{label}"])')
            lines.append(f"  class {nid} {'success' if step.status == 'success' else 'failed'}")
        elif isinstance(step, HumanGateStep):
            lines.append(f'  {nid}{{{{"{_mermaid_text(name)} (gate)"}}}}')
        elif kind == "script":
            lines.append(f'  {nid}["{_mermaid_text(name)} (script)"]')
        elif kind == "set":
            lines.append(f'  {nid}[/"{_mermaid_text(name)} (set)"/]')
        elif kind in ("parallel", "for_each", "workflow"):
            lines.append(f'  {nid}[["{_mermaid_text(name)} ({kind})"]]')
        else:
            lines.append(f'  {nid}("{_mermaid_text(name)} ({kind})")')
    for name in g.nodes:
        for e in g.succ[name]:
            dst = "finish" if e.dst == END else _mermaid_id(e.dst)
            used_end = used_end or e.dst == END
            label = ""
            if e.kind == "when" and e.when:
                label = _condition(e.when)
            elif e.kind == "option":
                label = f"option: {e.label}"
            elif e.kind == "default" and len(g.succ[name]) > 1:
                label = "otherwise"
            src = _mermaid_id(name)
            if label:
                lines.append(f'  {src} -->|"{_mermaid_text(label)}"| {dst}')
            else:
                lines.append(f"  {src} --> {dst}")
    if used_end:
        lines.append("  finish((($end)))")
    lines.append("  classDef success fill:#d4f7d4,stroke:#2e7d32")
    lines.append("  classDef failed fill:#fde2e2,stroke:#c62828")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    text = " ".join(text.split())
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text if len(text) <= 80 else text[:77] + "..."


def to_dot(wf: WorkflowFile) -> str:
    g = RouteGraph.build(wf)
    steps = {s.name: s for s in reversed(wf.agents)}
    lines = [f'digraph "{_dot_text(wf.workflow.name)}" {{', "  rankdir=TB;",
             '  node [fontname="Helvetica"]; edge [fontname="Helvetica", fontsize=10];',
             '  "__start__" [shape=point];',
             f'  "__start__" -> "{_dot_text(wf.workflow.entry_point)}";']
    used_end = False
    for name in g.nodes:
        step = steps.get(name)
        kind = g.kinds.get(name, "agent")
        label = f"{_dot_text(name)}\\n({kind})"
        attrs = "shape=box, style=rounded"
        if isinstance(step, TerminateStep):
            color = "#d4f7d4" if step.status == "success" else "#fde2e2"
            label = f"{_dot_text(name)}\\n{step.status}"
            attrs = f'shape=doubleoctagon, style=filled, fillcolor="{color}"'
        elif isinstance(step, HumanGateStep):
            attrs = "shape=hexagon"
        elif kind == "script":
            attrs = "shape=box"
        elif kind == "set":
            attrs = "shape=parallelogram"
        elif kind in ("parallel", "for_each", "workflow"):
            attrs = "shape=box3d"
        lines.append(f'  "{_dot_text(name)}" [label="{label}", {attrs}];')
    for name in g.nodes:
        for e in g.succ[name]:
            used_end = used_end or e.dst == END
            label = ""
            if e.kind == "when" and e.when:
                label = _condition(e.when)
            elif e.kind == "option":
                label = f"option: {e.label}"
            elif e.kind == "default" and len(g.succ[name]) > 1:
                label = "otherwise"
            extra = f' [label="{_dot_text(label)}"]' if label else ""
            lines.append(f'  "{_dot_text(name)}" -> "{_dot_text(e.dst)}"{extra};')
    if used_end:
        lines.append(f'  "{END}" [shape=doublecircle, label="end"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
