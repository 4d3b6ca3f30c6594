"""What `podium eval` is asked to do: the spec file (or its flags), the dataset's rows and
each variant's settings, read and checked before any run starts.

A variant's SETTINGS is a comma-separated list: `AGENT.model=M`, `AGENT.provider=P`,
`AGENT.reasoning.effort=E` (`*` for every agent), `responses=FILE` (scripted answers for every
row of the variant; `{row}` in the path is the row's id), or `@FILE` (another workflow file).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import field
from pathlib import Path
from typing import Any

from podium.errors import UsageError
from podium.records import record

MAX_DATASET_BYTES = 20 * 1024 * 1024
MAX_ROWS = 10_000
AGENT_KEYS = ("model", "provider", "reasoning.effort")
SPEC_KEYS = ("workflow", "dataset", "variants", "repeat", "concurrency", "budget", "assertions",
             "copy_inputs")


@record(frozen=True)
class Row:
    id: str
    inputs: dict[str, Any]
    expect: str | None = None
    # scripted answers, relative to the dataset's folder: one file, or a file per variant
    # name (`*` for the others)
    responses: str | dict[str, str] | None = None

    def responses_for(self, variant: str) -> str | None:
        if isinstance(self.responses, dict):
            return self.responses.get(variant, self.responses.get("*"))
        return self.responses


@record(frozen=True)
class Variant:
    name: str
    overrides: tuple[tuple[str, str, str], ...] = ()  # (agent or *, key, value)
    responses: str | None = None
    workflow: str | None = None  # @FILE


@record(frozen=True)
class Assertion:
    kind: str  # outcome | steps_at_most | output | cost_at_most
    value: Any

    def text(self) -> str:
        if self.kind == "output":
            return "output " + ", ".join(f"{k} == {v!r}" for k, v in self.value.items())
        return f"{self.kind.replace('_', ' ')} {self.value}"


@record
class EvalSpec:
    workflow: Path
    dataset: Path
    rows: list[Row]
    variants: list[Variant]
    repeat: int = 1
    concurrency: int = 2
    budget: float | None = None
    assertions: list[Assertion] = field(default_factory=list)
    # inputs that name a folder each run gets a fresh copy of (a repository an agent edits)
    copy_inputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What the eval keeps to resume (the dataset is re-read from its path)."""
        return {"workflow": str(self.workflow), "dataset": str(self.dataset),
                "variants": [{"name": v.name, "overrides": [list(o) for o in v.overrides],
                              "responses": v.responses, "workflow": v.workflow}
                             for v in self.variants],
                "repeat": self.repeat, "concurrency": self.concurrency, "budget": self.budget,
                "assertions": [{"kind": a.kind, "value": a.value} for a in self.assertions],
                "copy_inputs": self.copy_inputs}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvalSpec:
        dataset = Path(data["dataset"])
        return cls(Path(data["workflow"]), dataset, read_rows(dataset),
                   [Variant(v["name"], tuple(tuple(o) for o in v["overrides"]),
                            v.get("responses"), v.get("workflow")) for v in data["variants"]],
                   int(data["repeat"]), int(data["concurrency"]), data.get("budget"),
                   [Assertion(a["kind"], a["value"]) for a in data.get("assertions", [])],
                   list(data.get("copy_inputs", [])))


# ---------------------------------------------------------------------- variants


def parse_variant(text: str, where: str = "--variant") -> Variant:
    """`NAME=SETTINGS` (or NAME alone: the workflow as it is)."""
    name, eq, settings = text.partition("=")
    name = name.strip()
    if not name:
        raise UsageError(f"{where} {text!r}: expected NAME=SETTINGS")
    return settings_variant(name, settings if eq else "", where)


def settings_variant(name: str, settings: str, where: str) -> Variant:
    overrides: list[tuple[str, str, str]] = []
    responses = workflow = None
    for part in (p.strip() for p in settings.split(",")):
        if not part:
            continue
        if part.startswith("@"):
            workflow = part[1:]
            continue
        key, eq, value = part.partition("=")
        if not eq or not value.strip():
            raise UsageError(f"{where} {name}: {part!r} is not KEY=VALUE")
        key, value = key.strip(), value.strip()
        if key == "responses":
            responses = value
            continue
        agent, dot, rest = key.partition(".")
        if not dot or rest not in AGENT_KEYS:
            raise UsageError(f"{where} {name}: {key!r}: write AGENT.model, AGENT.provider or "
                             "AGENT.reasoning.effort (AGENT may be *), responses=FILE or @FILE")
        overrides.append((agent, rest, value))
    return Variant(name, tuple(overrides), responses, workflow)


def check_agents(variant: Variant, agents: list[str]) -> None:
    """Every AGENT a variant names is an agent step of the workflow."""
    from podium.language.diagnostics import did_you_mean

    for agent, _key, _value in variant.overrides:
        if agent != "*" and agent not in agents:
            hint = did_you_mean(agent, agents)
            raise UsageError(f"variant {variant.name}: '{agent}' is not an agent of the "
                             f"workflow{f' ({hint})' if hint else ''} (agents: "
                             f"{', '.join(agents)})")


# ---------------------------------------------------------------------- rows


def read_rows(path: Path) -> list[Row]:
    """The dataset: JSONL, CSV (an `inputs` column of JSON, or one column per input) or
    YAML (a list, or a mapping with `rows:`)."""
    try:
        size = path.stat().st_size
        if size > MAX_DATASET_BYTES:
            raise UsageError(f"{path}: the dataset is {size:,} bytes; podium reads at most "
                             f"{MAX_DATASET_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the dataset: {exc}") from None
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        raw = [_json_line(path, i, line) for i, line in enumerate(text.splitlines(), 1)
               if line.strip()]
    elif suffix == ".csv":
        raw = [_csv_row(r) for r in csv.DictReader(io.StringIO(text))]
    elif suffix in (".yaml", ".yml"):
        raw = _yaml_rows(path, text)
    else:
        raise UsageError(f"{path}: a dataset is .jsonl, .csv or .yaml (got '{suffix or path.name}')")
    if not raw:
        raise UsageError(f"{path}: the dataset has no row")
    if len(raw) > MAX_ROWS:
        raise UsageError(f"{path}: {len(raw):,} rows; an eval takes at most {MAX_ROWS:,}")
    rows = [_row(path, i, r) for i, r in enumerate(raw, 1)]
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise UsageError(f"{path}: two rows have the id '{r.id}'")
        seen.add(r.id)
    return rows


def _json_line(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise UsageError(f"{path}:{n}: not JSON ({exc}): {line[:80]!r}") from None


def _csv_row(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in r.items() if k in ("id", "expect", "responses") and v}
    if r.get("inputs"):
        try:
            out["inputs"] = json.loads(r["inputs"])
        except ValueError:
            out["inputs"] = r["inputs"]
    else:
        out["inputs"] = {k: v for k, v in r.items()
                         if k not in ("id", "expect", "responses", "inputs") and k}
    return out


def _yaml_rows(path: Path, text: str) -> list[Any]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise UsageError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data = data["rows"]
    if not isinstance(data, list):
        raise UsageError(f"{path}: a YAML dataset is a list of rows (or has 'rows:')")
    return data


def _row(path: Path, n: int, raw: Any) -> Row:
    if not isinstance(raw, dict) or not isinstance(raw.get("inputs"), dict):
        raise UsageError(f"{path}: row {n}: a row is a mapping with 'inputs:' (a mapping), "
                         f"optionally 'id', 'expect' and 'responses'")
    extra = set(raw) - {"id", "inputs", "expect", "responses"}
    if extra:
        raise UsageError(f"{path}: row {n}: unknown key(s) {', '.join(sorted(map(str, extra)))}")
    expect = raw.get("expect")
    responses = raw.get("responses")
    if isinstance(responses, dict):
        responses = {str(k): str(v) for k, v in responses.items()}
    elif responses is not None:
        responses = str(responses)
    return Row(str(raw.get("id", n)), dict(raw["inputs"]),
               None if expect is None else str(expect), responses)


# ---------------------------------------------------------------------- the spec file


def read_spec(path: Path) -> EvalSpec:
    """A `*.eval.yaml`: workflow, dataset, variants (NAME: SETTINGS), repeat, concurrency,
    budget and assertions; paths are relative to the spec's folder."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        raise UsageError(f"{path}: cannot read the eval spec: {str(exc).splitlines()[0]}") \
            from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: an eval spec is a mapping with workflow, dataset, variants")
    unknown = set(data) - set(SPEC_KEYS)
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         f"(an eval spec has {', '.join(SPEC_KEYS)})")
    for key in ("workflow", "dataset"):
        if not isinstance(data.get(key), str):
            raise UsageError(f"{path}: '{key}' is required (a path)")
    base = path.parent
    variants = _spec_variants(path, data.get("variants"))
    copies = data.get("copy_inputs") or []
    if not isinstance(copies, list) or not all(isinstance(c, str) for c in copies):
        raise UsageError(f"{path}: 'copy_inputs' is a list of input names")
    spec = build_spec(base / data["workflow"], base / data["dataset"], variants,
                      repeat=data.get("repeat", 1), concurrency=data.get("concurrency", 2),
                      budget=data.get("budget"),
                      assertions=_assertions(path, data.get("assertions") or []), base=base)
    spec.copy_inputs = list(copies)
    return spec


def _spec_variants(path: Path, raw: Any) -> list[Variant]:
    if raw is None:
        return [Variant("baseline")]
    if not isinstance(raw, dict) or not raw:
        raise UsageError(f"{path}: 'variants' maps each NAME to its SETTINGS")
    out = []
    for name, given in raw.items():
        settings = ",".join(map(str, given)) if isinstance(given, list) else given
        out.append(settings_variant(str(name), "" if settings is None else str(settings),
                                    f"{path}: variants:"))
    return out


def _assertions(path: Path, raw: Any) -> list[Assertion]:
    if not isinstance(raw, list):
        raise UsageError(f"{path}: 'assertions' is a list")
    out = []
    for item in raw:
        if not isinstance(item, dict) or len(item) != 1:
            raise UsageError(f"{path}: an assertion is one of outcome: X, steps_at_most: N, "
                             f"output: {{FIELD: VALUE}}, cost_at_most: USD (got {item!r})")
        ((kind, value),) = item.items()
        if kind not in ("outcome", "steps_at_most", "output", "cost_at_most"):
            raise UsageError(f"{path}: unknown assertion '{kind}'")
        if kind == "output" and not isinstance(value, dict):
            raise UsageError(f"{path}: 'output' takes a mapping FIELD: VALUE")
        out.append(Assertion(str(kind), value))
    return out


def build_spec(workflow: Path, dataset: Path, variants: list[Variant], *, repeat: Any = 1,
               concurrency: Any = 2, budget: Any = None,
               assertions: list[Assertion] | None = None, base: Path | None = None) -> EvalSpec:
    """Check the numbers and resolve paths; the variants' files are resolved against `base`
    (the spec's folder, or the current one for flags)."""
    for what, value, low in (("repeat", repeat, 1), ("concurrency", concurrency, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise UsageError(f"{what} must be a whole number of at least {low} (got {value!r})")
    if budget is not None and (not isinstance(budget, (int, float)) or budget <= 0):
        raise UsageError(f"budget must be a positive number of USD (got {budget!r})")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UsageError("two variants have the same name")
    root = (base or Path.cwd()).resolve()
    fixed = [Variant(v.name, v.overrides,
                     None if v.responses is None else str(root / v.responses),
                     None if v.workflow is None else str(root / v.workflow)) for v in variants]
    return EvalSpec(workflow.resolve(), dataset.resolve(), read_rows(dataset), fixed,
                    repeat, concurrency, None if budget is None else float(budget),
                    assertions or [])
