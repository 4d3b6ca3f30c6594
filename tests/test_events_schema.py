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


def test_the_bus_stamp_is_model_copy() -> None:
    """events/model.py `stamped`, the bus's copy of each event, makes what model_copy makes."""
    from podium.events.model import GateAnswered, ModelDelta, RunFinished, stamped

    events = [StepStarted(step="a", step_type="set", iteration=2, run_iteration=5),
              GateAnswered(step="g", iteration=1, selected="yes", additional_input={"k": "v"}),
              RunFinished(status="success", elapsed=1.0, iterations=2, exit_code=0),
              ModelDelta(step="a", iteration=1, kind="text", text="hi")]
    update = {"run_id": "r1", "ts": 12.5, "parent_run_id": None, "seq": 7}
    for event in events:
        mine, theirs = stamped(event, update), event.model_copy(update=update)
        assert type(mine) is type(theirs)
        assert mine == theirs
        assert mine.model_dump_json() == theirs.model_dump_json()
        assert mine.model_fields_set == theirs.model_fields_set
        assert mine.model_dump(exclude_unset=True) == theirs.model_dump(exclude_unset=True)
        assert (event.seq, event.run_id) == (0, "")  # the original is left as it was
    assert hash(stamped(events[0], update)) == hash(events[0].model_copy(update=update))
