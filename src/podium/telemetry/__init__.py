"""OpenTelemetry traces of runs: whether they are configured, and how (no OpenTelemetry import).

Traces are on when the standard variables ask for them (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_TRACES_EXPORTER=otlp|console) or the workflow has
`runtime.telemetry`; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn them off. The
variables win over the workflow's keys. Only when they are on does the app layer import
`podium.telemetry.spans` and the OpenTelemetry SDK (docs/decisions/0014-telemetry.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from podium.records import record

if TYPE_CHECKING:
    from podium.language.model import WorkflowFile

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"  # OTLP/HTTP's default
DEFAULT_TIMEOUT = 2.0  # seconds an export may take (the SDK's own default is 10)
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
TRACE_URL_VARIABLE = "PODIUM_TRACE_URL"  # a link template for the console: …{trace_id}…


@record(frozen=True)
class TelemetrySettings:
    exporter: str  # "otlp" or "console"
    endpoint: str  # the OTLP/HTTP traces URL (for "otlp")
    service_name: str
    capture_content: bool
    timeout: float  # seconds, for each export


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes", "on")


def traces_url(base: str) -> str:
    """The traces URL of an OTLP/HTTP base URL (a URL already ending in /v1/traces is kept)."""
    base = base.strip()
    if base.rstrip("/").endswith("/v1/traces"):
        return base
    return base.rstrip("/") + "/v1/traces"


def settings(wf: WorkflowFile | None, environ: Mapping[str, str] | None = None
             ) -> TelemetrySettings | None:
    """How this run exports traces, or None when it does not (the default)."""
    env = os.environ if environ is None else environ
    if _true(env.get("OTEL_SDK_DISABLED")):
        return None
    config = wf.workflow.runtime.telemetry if wf is not None else None
    if config is not None and not config.enabled:
        config = None
    exporter = (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    if exporter == "none":
        return None
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
    if endpoint is None and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        endpoint = traces_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    if endpoint is None and config is not None and config.endpoint:
        endpoint = traces_url(config.endpoint)
    if exporter not in ("otlp", "console") and endpoint is None and config is None:
        return None
    timeout = DEFAULT_TIMEOUT
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        try:  # seconds, as the Python SDK reads it
            if env.get(name):
                timeout = max(0.05, float(env[name]))
                break
        except ValueError:
            pass
    service = (env.get("OTEL_SERVICE_NAME") or (config.service_name if config else None)
               or "podium")
    content_env = env.get(CONTENT_VARIABLE)
    capture = (_true(content_env) if content_env is not None
               else bool(config is not None and config.capture_content))
    return TelemetrySettings("console" if exporter == "console" else "otlp",
                             endpoint or DEFAULT_ENDPOINT, service, capture, timeout)


def trace_link(trace_id: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The console's link to a trace: PODIUM_TRACE_URL with {trace_id} filled in."""
    template = (os.environ if environ is None else environ).get(TRACE_URL_VARIABLE)
    if not trace_id or not template or "{trace_id}" not in template:
        return None
    return template.replace("{trace_id}", trace_id)
