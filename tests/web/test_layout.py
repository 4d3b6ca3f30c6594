"""The server-side graph layout: every node placed without overlaps, layers top to bottom along
the routes, back edges found and drawn upwards, labels apart, groups and sub-workflows drawn as
such; the same workflow always gives the same picture."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from console_helpers import write_flow

from helpers_engine import EXAMPLES, load
from podium.web.layout import graph_of_workflow, layout

COMPOSITE = """
workflow:
  name: composite
  entry_point: plan
  limits: {max_iterations: 50}
agents:
  - name: plan
    type: set
    value: {items: [a, b]}
    routes: [{to: research}]
  - name: web
    type: set
    value: "web"
  - name: papers
    type: set
    value: "papers"
  - name: summarise
    type: workflow
    workflow: sub.yaml
    routes: [{to: review}]
  - name: review
    type: human_gate
    prompt: "ok?"
    options:
      - {label: Yes, value: yes, route: $end}
      - {label: Again, value: again, route: plan}
      - {label: Stop, value: stop, route: stopped}
  - name: stopped
    type: terminate
    status: failed
    reason: stopped
parallel:
  - name: research
    agents: [web, papers]
    routes: [{to: each}]
for_each:
  - name: each
    type: for_each
    source: plan.output.items
    as: item
    agent:
      name: per_item
      type: set
      value: "{{ item }}"
    routes: [{to: summarise}]
"""

SUB = """
workflow:
  name: sub
  entry_point: only
agents:
  - name: only
    type: set
    value: 1
"""


def _boxes_overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
                or a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"])


def _check(g: dict) -> None:
    for a, b in itertools.combinations(g["nodes"], 2):
        assert not _boxes_overlap(a, b), (a["id"], b["id"])
    for n in g["nodes"]:
        assert n["x"] >= 0
        assert n["y"] >= 0
        assert n["x"] + n["w"] <= g["width"]
        assert n["y"] + n["h"] <= g["height"]
    pos = {n["id"]: n for n in g["nodes"]}
    for e in g["edges"]:
        assert e["path"].startswith("M")
        src, dst = pos[e["src"]], pos[e["dst"]]
        if e["src"] == e["dst"]:
            continue
        if e["back"]:
            assert dst["y"] < src["y"], e["id"]
        else:
            assert dst["y"] > src["y"], e["id"]


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.glob("*/workflow*.yaml")
                                         if not p.name.endswith(".test.yaml")))
def test_examples_are_laid_out_cleanly(path: Path) -> None:
    g = layout(*graph_of_workflow(load(path)))
    _check(g)
    assert g == layout(*graph_of_workflow(load(path)))  # deterministic


def test_dev_review_graph() -> None:
    g = layout(*graph_of_workflow(load(EXAMPLES / "dev-review" / "workflow.yaml")))
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    assert kinds["escalation"] == "human_gate"
    assert kinds["accepted"] == "terminate"
    edges = {e["id"]: e for e in g["edges"]}
    back = {i for i, e in edges.items() if e["back"]}
    assert "escalation->developer#0" in back
    assert "run_tests->developer#1" in back
    assert edges["human_acceptance->accepted#0"]["label"] == "accept"
    labelled = [e for e in g["edges"] if e["label"]]
    for a, b in itertools.combinations(labelled, 2):
        (ax, ay), (bx, by) = a["label_at"], b["label_at"]
        if abs(ay - by) < 18:
            assert abs(ax - bx) >= (a["label_w"] + b["label_w"]) / 2, (a["id"], b["id"])


def test_groups_and_sub_workflows(tmp_path: Path) -> None:
    write_flow(tmp_path, "sub.yaml", SUB)
    wf = load(write_flow(tmp_path, "composite.yaml", COMPOSITE))
    g = layout(*graph_of_workflow(wf))
    _check(g)
    nodes = {n["id"]: n for n in g["nodes"]}
    assert "web" not in nodes
    assert "papers" not in nodes
    assert nodes["research"]["kind"] == "parallel"
    assert [m["name"] for m in nodes["research"]["detail"]["members"]] == ["web", "papers"]
    assert nodes["research"]["h"] > nodes["plan"]["h"]
    assert nodes["each"]["kind"] == "for_each"
    assert nodes["each"]["detail"]["members"] == [{"name": "per_item", "kind": "set"}]
    assert nodes["summarise"]["kind"] == "workflow"
    assert nodes["summarise"]["detail"]["workflow"] == "sub.yaml"
    assert nodes["$end"]["kind"] == "end"
    assert nodes["stopped"]["detail"]["status"] == "failed"
    edges = {e["id"]: e for e in g["edges"]}
    assert edges["review->plan#1"]["back"]
    assert edges["review->plan#1"]["label"] == "again"
    order = [nodes[n]["y"] for n in ("plan", "research", "each", "summarise", "review")]
    assert order == sorted(order)
    assert len(set(order)) == 5


def test_a_step_that_routes_to_itself() -> None:
    from podium.web.layout import GEdge, GNode

    nodes = [GNode("__start__", "start", "start"), GNode("a", "a", "agent")]
    edges = [GEdge("__start__", "a", "start", 0), GEdge("a", "a", "when", 0, "again", "again")]
    g = layout(nodes, edges)
    loop = next(e for e in g["edges"] if e["src"] == "a")
    node = next(n for n in g["nodes"] if n["id"] == "a")
    assert loop["label_at"][0] > node["x"] + node["w"]
    assert g["width"] > node["x"] + node["w"] + 40
