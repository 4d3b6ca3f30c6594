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


def to_mermaid(wf: WorkflowFile, greyed: set[tuple[str, int]] | None = None,
               ranges: dict[str, str] | None = None) -> str:
    """The graph as Mermaid; `greyed` edges (source, route or option index) are drawn dashed
    and grey, and `ranges` adds a step range to terminal nodes (`podium graph --explore`)."""
    g = RouteGraph.build(wf)
    greyed = greyed or set()
    ranges = ranges or {}
    links = 1  # the start link is link 0
    grey_links: list[int] = []
    steps = {s.name: s for s in reversed(wf.agents)}
    lines = ["flowchart TD", f"  start((start)) --> {_mermaid_id(wf.workflow.entry_point)}"]
    used_end = False
    for name in g.nodes:
        step = steps.get(name)
        nid = _mermaid_id(name)
        kind = g.kinds.get(name, "agent")
        if isinstance(step, TerminateStep):
            extra = f" · {ranges[name]}" if name in ranges else ""
            label = _mermaid_text(f"{name}: {step.status}{extra}")
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
            if (name, e.index) in greyed:
                grey_links.append(links)
            links += 1
    if used_end:
        end = f" · {ranges[END]}" if END in ranges else ""
        lines.append(f'  finish((("$end{_mermaid_text(end)}")))' if end else "  finish((($end)))")
    if grey_links:
        lines.append(f"  linkStyle {','.join(map(str, grey_links))} "
                     "stroke:#bbbbbb,color:#999999,stroke-dasharray:4 4")
    lines.append("  classDef success fill:#d4f7d4,stroke:#2e7d32")
    lines.append("  classDef failed fill:#fde2e2,stroke:#c62828")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    text = " ".join(text.split())
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text if len(text) <= 80 else text[:77] + "..."


def to_dot(wf: WorkflowFile, greyed: set[tuple[str, int]] | None = None,
           ranges: dict[str, str] | None = None) -> str:
    """The graph as DOT, with the same `greyed` edges and terminal `ranges` as to_mermaid."""
    g = RouteGraph.build(wf)
    greyed = greyed or set()
    ranges = ranges or {}
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
            extra = f" · {_dot_text(ranges[name])}" if name in ranges else ""
            label = f"{_dot_text(name)}\\n{step.status}{extra}"
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
            edge_attrs = [f'label="{_dot_text(label)}"'] if label else []
            if (name, e.index) in greyed:
                edge_attrs.append('color="#bbbbbb", fontcolor="#999999", style=dashed')
            extra = f" [{', '.join(edge_attrs)}]" if edge_attrs else ""
            lines.append(f'  "{_dot_text(name)}" -> "{_dot_text(e.dst)}"{extra};')
    if used_end:
        end = f"\\n{_dot_text(ranges[END])}" if END in ranges else ""
        lines.append(f'  "{END}" [shape=doublecircle, label="end{end}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
