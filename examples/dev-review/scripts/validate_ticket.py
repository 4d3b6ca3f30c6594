"""Check that a ticket file is a usable contract and print one JSON verdict on stdout."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

COMPLEXITIES = ("small", "standard")
PLACEHOLDER_COMPLEXITY = "standard"  # the schema wants an enum value even when invalid
REQUIRED_SECTIONS = ("Scope", "Acceptance criteria")

# A level-1 or level-2 heading ends a section; deeper headings belong to it.
HEADING_RE = re.compile(r"^(#{1,2})\s+(.*?)[\s#]*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")


def split_front_matter(text: str) -> tuple[dict[str, str], str, str | None]:
    """Return (fields, body, problem) for a file that should open with a `---` block."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text, "no front matter block (the file must open with a '---' line)"
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        return {}, text, "the front matter block is not closed by a '---' line"
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and not key.lstrip().startswith("#"):  # `key: value`; comments are skipped
            fields[key.strip().lower()] = value.strip().strip("'\"").strip()
    return fields, "\n".join(lines[end + 1:]), None


def sections(body: str) -> dict[str, list[str]]:
    """Map each lower-cased level-1/2 heading to the stripped text of every section so titled."""
    found: dict[str, list[list[str]]] = {}
    current: list[str] | None = None  # lines before the first heading belong to no section
    in_fence = False
    for line in body.splitlines():
        if FENCE_RE.match(line):
            in_fence = not in_fence  # a '## ' inside a code block is not a heading
        heading = None if in_fence else HEADING_RE.match(line)
        if heading:
            current = []
            found.setdefault(heading.group(2).lower(), []).append(current)
        elif current is not None:
            current.append(line)
    return {title: ["\n".join(lines).strip() for lines in texts] for title, texts in found.items()}


def read_complexity(fields: dict[str, str], front_problem: str | None) -> tuple[str | None, str]:
    """Return (problem, complexity) from the front matter, never inferring a missing value."""
    value = fields.get("complexity", "")
    if front_problem:
        return f"{front_problem}, so there is no 'complexity' field", PLACEHOLDER_COMPLEXITY
    if not value:
        return ("the front matter has no 'complexity' field (expected small or standard)",
                PLACEHOLDER_COMPLEXITY)
    if value not in COMPLEXITIES:
        return (f"complexity {value!r} is not one of: {', '.join(COMPLEXITIES)}",
                PLACEHOLDER_COMPLEXITY)
    return None, value


def check(path: str) -> dict[str, object]:
    """Validate the ticket at `path` and return the JSON-ready verdict."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return verdict([f"ticket file not found: {path}"])
    except (OSError, UnicodeDecodeError) as exc:
        return verdict([f"ticket file is unreadable: {path} ({type(exc).__name__}: {exc})"])

    fields, body, front_problem = split_front_matter(text)
    problem, complexity = read_complexity(fields, front_problem)
    problems = [problem] if problem else []

    found = sections(body)
    for label in REQUIRED_SECTIONS:
        texts = found.get(label.lower(), [])
        if not texts:
            problems.append(f"no '## {label}' section")
        elif len(texts) > 1:
            problems.append(f"the '## {label}' section appears {len(texts)} times")
        elif not texts[0]:
            problems.append(f"the '## {label}' section is empty")
    criteria = found.get("acceptance criteria", [""])[0]
    return verdict(problems, complexity, criteria)


def verdict(problems: list[str], complexity: str = PLACEHOLDER_COMPLEXITY,
            criteria: str = "") -> dict[str, object]:
    """Build the output object; nothing read from an invalid ticket is passed on."""
    if problems:
        return {"valid": False, "reason": "; ".join(problems),
                "complexity": PLACEHOLDER_COMPLEXITY, "acceptance_criteria": ""}
    return {"valid": True, "reason": "ticket is valid", "complexity": complexity,
            "acceptance_criteria": criteria}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        result = verdict(["usage: validate_ticket.py TICKET_PATH (exactly one argument)"])
    else:
        result = check(argv[0])
    if not result["valid"]:
        print(f"validate_ticket: invalid ticket: {result['reason']}", file=sys.stderr)
    print(json.dumps(result))  # the only thing ever written to stdout
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
