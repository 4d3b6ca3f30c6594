"""The shipped JSON Schema of events matches the event model, and events round-trip."""

from __future__ import annotations

import json
from pathlib import Path

from podium.events.model import EVENT_CLASSES, StepStarted, event_json_schema, parse_event

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_schema_is_current() -> None:
    shipped = json.loads((ROOT / "docs" / "events.schema.json").read_text(encoding="utf-8"))
    assert shipped == json.loads(json.dumps(event_json_schema(), sort_keys=True)), (
        "docs/events.schema.json is stale: regenerate it with "
        "python -c 'import json; from podium.events.model import event_json_schema; "
        "print(json.dumps(event_json_schema(), indent=2, sort_keys=True))' "
        "> docs/events.schema.json")


def test_every_event_type_is_in_the_schema() -> None:
    text = json.dumps(event_json_schema())
    for name in EVENT_CLASSES:
        assert f'"{name}"' in text


def test_event_round_trips_through_json() -> None:
    event = StepStarted(step="a", step_type="set", iteration=2, run_iteration=5, run_id="r1",
                        seq=3, ts=1.5)
    again = parse_event(json.loads(event.model_dump_json()))
    assert again == event
    assert again.v == 1
