"""Secrets out of everything podium records: the values of API-key variables and of a workflow's
`secrets:`, in every form they travel in, become `<secret:NAME>` before anything is written.

The forms: as is; JSON-escaped any number of times, with or without `ensure_ascii`; URL-encoded
(either hex case, `+` or `%20`); HTML-escaped (markupsafe's `&#34;`/`&#39;`, `html.escape`'s
`&quot;`/`&#x27;`); shell-quoted (`shlex.quote`, which cuts a secret at each `'`, backslashes,
double quotes); and base64, standard or URL-safe, at each of the three offsets a value can sit at
inside a longer encoded text (an HTTP Basic header's `user:KEY`). One compiled alternation per
run finds them all: each character of a secret is matched with its escapes, so the depths and
mixtures of escaping need no list of their own (docs/decisions/0020-redaction.md).

One Redactor serves a run, its sub-workflows (which inherit its secrets) and its run store, so
whatever reaches the store, the event log, the recording or a surface has passed through it.
`restore` puts the values back, from the environment, where a run needs them again (the
inputs of a resumed or forked run); a value that is not there is named, never invented.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.events.model import Event
    from podium.language.model import WorkflowFile

# A declared secret shorter than this is refused at run start (secret_values); a key variable's
# shorter value (a local server's placeholder, `EMPTY`) is redacted as a whole word only, as is,
# URL- or JSON-escaped: its other forms would hit ordinary text.
MIN_LENGTH = 6

# Variables whose values are secrets even when a workflow does not say so: model providers'
# keys and tokens. Commands a model runs never see them, nor a workflow's `secrets:`.
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                 "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
                 "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BEARER_TOKEN")
_TOKEN = re.compile(r"<secret:([A-Za-z_][A-Za-z0-9_]*)>")
_NUMBER = re.compile(r"<number:(.*<secret:.*)>")  # a number that held a secret, redacted


def secret_names(workflow: WorkflowFile) -> set[str]:
    """The variables whose values are secrets for this workflow."""
    return {*KEY_VARIABLES, *workflow.workflow.secrets}


def secret_values(workflow: WorkflowFile) -> dict[str, str]:
    """Values never to record, by variable name: the workflow's `secrets:` and API keys.
    Raises UsageError (exit 2) for a declared secret too short to be told from ordinary text."""
    values = {n: v for n in secret_names(workflow) if (v := os.environ.get(n, ""))}
    short = sorted(n for n in workflow.workflow.secrets if 0 < len(values.get(n, "")) < MIN_LENGTH)
    if short:
        from podium.errors import UsageError

        name = short[0]
        raise UsageError(
            f"workflow.secrets: {name} is {len(values[name])} characters long; podium redacts "
            f"a secret of {MIN_LENGTH} characters or more (a shorter one cannot be told from "
            f"ordinary text) and would store it as is: give {name} a longer value, or take it "
            "out of `secrets:`")
    return values


class MissingSecret(Exception):
    """A recorded `<secret:NAME>` is needed again and NAME is not set."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


# ------------------------------------------------------------------ the patterns of one value
#
# A pattern is a list of units, one per character of the value (a run of backslashes is one);
# a unit is the list of regexes of that character's forms, each beginning with a literal
# character, so that the alternation of the first units lets the regex engine skip ahead.

_ESC = r"\\*+"  # the backslashes JSON (at any depth), a shell or printf %q put before a char
_SHORT_JSON = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_HTML = {"&": ("&amp;", "&#38;", "&#x26;"), "<": ("&lt;", "&#60;", "&#x3c;", "&#x3C;"),
         ">": ("&gt;", "&#62;", "&#x3e;", "&#x3E;"), '"': ("&quot;", "&#34;", "&#x22;"),
         "'": ("&#39;", "&#x27;", "&apos;")}
# shlex.quote writes a `'` inside a quoted word as '"'"' (its double quotes JSON-escapable);
# bash users write '\''
_SHELL_QUOTE = (rf"'(?:\\{_ESC})?\"'(?:\\{_ESC})?\"'", r"'\\(?:\\)*+''")
_URL_SAFE = frozenset("-._~")
# the longest spelling of one character, JSON-escaped three times: a surrogate pair, each half
# 7 backslashes, `u` and 4 hex digits (a shell-quoted `'` is 19)
_SPELLED_MAX = 24
_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def _hex(value: int, width: int) -> str:
    """Hex digits that match either case."""
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d
                   for d in f"{value:0{width}X}")


def _json_u(code: int) -> str:
    """`uXXXX` (a UTF-16 surrogate pair above the BMP), to follow a backslash."""
    if code <= 0xFFFF:
        return f"u{_hex(code, 4)}"
    code -= 0x10000
    return f"u{_hex(0xD800 + (code >> 10), 4)}\\\\{_ESC}u{_hex(0xDC00 + (code & 0x3FF), 4)}"


def _unit(char: str, after_backslash: bool) -> list[str]:
    """The regexes of one character of a secret in every form it can take."""
    if char.isascii() and (char.isalnum() or char == "_"):
        return [char]
    raw = [re.escape(char), *(re.escape(e) for e in _HTML.get(char, ()))]
    escapes = ([_SHORT_JSON[char]] if char in _SHORT_JSON else []) \
        + ([_json_u(ord(char))] if not " " <= char <= "~" else [])
    alts = [*raw, *(rf"\\{_ESC}{r}" for r in raw + escapes)]
    if after_backslash:  # the run before ate the backslashes of this one's escape
        alts.extend(escapes)
    if char == "'":
        alts.extend(_SHELL_QUOTE)
    if char == " ":
        alts.append(r"\+")
    if char not in _URL_SAFE:
        alts.append("".join(f"%{_hex(b, 2)}" for b in char.encode("utf-8", "surrogatepass")))
    return alts


def _units(value: str) -> list[list[str]]:
    """The units of `value` as is and escaped (JSON at any depth, URL, HTML, shell)."""
    units: list[list[str]] = []
    i = 0
    while i < len(value):
        if value[i] == "\\":  # a run of backslashes: one possessive run, >= as many
            j = i
            while j < len(value) and value[j] == "\\":
                j += 1
            units.append([rf"\\(?:\\){{{j - i - 1},}}+", "%5[cC]" * (j - i)])
            i = j
            continue
        units.append(_unit(value[i], after_backslash=i > 0 and value[i - 1] == "\\"))
        i += 1
    return units


def _base64(value: str) -> list[list[list[str]]]:
    """The units of the base64 characters that only `value`'s bytes decide, at each of the
    three offsets it can start at, standard and URL-safe (`+`, `/` also URL-encoded)."""
    raw = value.encode("utf-8", "surrogatepass")
    spelled = {"+": [r"\+", "%2[bB]"], "/": ["/", rf"\\{_ESC}/", "%2[fF]"]}
    out: list[list[list[str]]] = []
    for offset in range(3):
        first, last = -(-8 * offset // 6), (8 * (offset + len(raw)) - 6) // 6
        ending = base64.b64encode(b"\0" * offset + raw).decode("ascii").rstrip("=")[first:]
        chunk = ending[:last + 1 - first]  # what follows decides the last character
        if len(chunk) < MIN_LENGTH:
            continue
        for text in (ending, chunk):  # at the end of the encoded text (with its padding) first
            for alphabet in (text, text.replace("+", "-").replace("/", "_")):
                units = [spelled.get(c, [re.escape(c)]) for c in alphabet]
                if text is ending and len(ending) > len(chunk):
                    units[-1] = [f"{u}(?:=|%3[dD])*+" for u in units[-1]]
                out.append(units)
    return out


def _spellings(value: str) -> set[str]:
    """Concrete forms of `value`: as is, JSON-escaped once to three times (with and without
    ensure_ascii), URL-, HTML- and shell-quoted, and its base64 at the three offsets."""
    import html
    import shlex
    from urllib.parse import quote, quote_plus

    from markupsafe import escape

    out = {value, quote(value, safe=""), quote(value), quote_plus(value), html.escape(value),
           str(escape(value)), shlex.quote(value)}
    for ascii_only in (False, True):
        text = value
        for _ in range(3):
            text = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
            out.add(text)
    raw = value.encode("utf-8", "surrogatepass")
    for offset in range(3):
        first, last = -(-8 * offset // 6), (8 * (offset + len(raw)) - 6) // 6
        chunk = base64.b64encode(b"\0" * offset + raw).decode("ascii")[first:last + 1]
        out.update((chunk, chunk.replace("+", "-").replace("/", "_")))
    return {f for f in out if f}


class _Form:
    """One way to find one secret: its regex, a literal every match holds (None: none), and
    the token it becomes."""

    def __init__(self, units: list[list[str]], token: str, *, whole_word: bool) -> None:
        rest = "".join(u[0] if len(u) == 1 else "(?:" + "|".join(u) + ")" for u in units[1:])
        if whole_word:  # a short value: not inside a word (the left edge: after its 1st char)
            firsts = [f"{a}(?<![A-Za-z0-9][\\s\\S])" if a == units[0][0] else a
                      for a in units[0]]
            rest += "(?![A-Za-z0-9])"
        else:
            firsts = units[0]
        # a match that begins with backslashes begins with the first of their run: tried at
        # each one, the run would be read again at each (quadratic on a long run)
        firsts = [a[:2] + r"(?<!\\\\)" + a[2:] if a.startswith("\\\\") else a
                  for a in firsts]
        self.alternatives = [a + rest for a in firsts]
        self.token = token
        self.anchor = _longest_run(units) or None
        self.regex = re.compile("|".join(self.alternatives))


def _longest_run(units: list[list[str]]) -> str:
    """The longest run of characters every match of `units` holds as they are."""
    best = run = ""
    for unit in units:
        if len(unit) == 1 and _PLAIN.fullmatch(unit[0]):
            run += unit[0]
            best = max(best, run, key=len)
        else:
            run = ""
    return best


class _Compiled:
    """Every form of every secret, longest value first; texts are searched only for the forms
    whose literal they hold, with one alternation compiled per such set."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.forms: list[_Form] = []
        for name, value in sorted(secrets.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            token = f"<secret:{name}>"
            short = len(value) < MIN_LENGTH
            self.forms.append(_Form(_units(value), token, whole_word=short))
            if not short:
                self.forms.extend(_Form(u, token, whole_word=False) for u in _base64(value))
        self._subsets: dict[tuple[int, ...], tuple[re.Pattern[str], list[_Form]]] = {}
        self._anchors = list(dict.fromkeys(f.anchor for f in self.forms if f.anchor))
        self._anchored = all(f.anchor for f in self.forms)

    def _candidates(self, text: str) -> tuple[int, ...]:
        held = {a for a in self._anchors if a in text}
        if not held and self._anchored:
            return ()  # every form has an anchor and the text holds none of them
        return tuple(i for i, f in enumerate(self.forms) if f.anchor is None or f.anchor in held)

    def search(self, text: str) -> bool:
        hit = self._candidates(text)
        return bool(hit) and self._regex(hit)[0].search(text) is not None

    def _regex(self, hit: tuple[int, ...]) -> tuple[re.Pattern[str], list[_Form]]:
        found = self._subsets.get(hit)
        if found is None:
            forms = [self.forms[i] for i in hit]
            found = (re.compile("|".join(a for f in forms for a in f.alternatives)), forms)
            if len(self._subsets) < 256:
                self._subsets[hit] = found
        return found

    def sub(self, text: str) -> str:
        if not self.forms:
            return text
        hit = self._candidates(text)
        if not hit:
            return text
        regex, forms = self._regex(hit)

        def token(match: re.Match[str]) -> str:
            got = match.group(0)
            return next((f.token for f in forms if f.regex.fullmatch(got)), forms[0].token)

        return regex.sub(token, text)


# ------------------------------------------------------------------------------ the Redactor

class Redactor:
    """Replaces secret values by `<secret:NAME>` in text, in JSON-like values and in events."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self.secrets: dict[str, str] = {}
        self._compiled = _Compiled({})  # replaced whole, so a reader never sees half of it
        self._forms: tuple[_Compiled, tuple[str, ...]] = (self._compiled, ())  # forms() of it
        if secrets:
            self.add(secrets)

    def __bool__(self) -> bool:
        return bool(self._compiled.forms)

    def add(self, secrets: Mapping[str, str]) -> None:
        """Also redact these values (by variable name); an empty value is no secret."""
        with self._lock:
            self.secrets.update({n: v for n, v in secrets.items() if v})
            self._compiled = _Compiled(self.secrets)

    def forms(self) -> tuple[str, ...]:
        """The usual spellings of every secret, longest first: a stream holds back a piece's
        tail that begins one of them (events/redact_stream.py). The regexes replace more
        (any mix of escapes); these are the forms a producer writes in one go. Worked out
        once per set of secrets (a stream asks for every piece)."""
        seen = self._forms
        if seen[0] is self._compiled:
            return seen[1]
        with self._lock:
            compiled = self._compiled
            found: set[str] = set()
            for value in self.secrets.values():
                found.update(_spellings(value))
            forms = tuple(sorted(found, key=lambda f: (-len(f), f)))
            self._forms = (compiled, forms)
        return forms

    def text(self, text: str) -> str:
        return self._compiled.sub(text)

    @property
    def max_form_length(self) -> int:
        """At least the length of any form of any secret (JSON-escaped up to three times, or
        any other one way): a stream that holds back this many characters of its text until
        the next chunk comes cannot show a secret cut in two (0 without secrets)."""
        return max((_SPELLED_MAX * len(v) for v in self.secrets.values()), default=0)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys included); a number
        whose digits hold a secret becomes `<number:...>` around the redacted digits (which
        restore_secrets turns into the number again)."""
        compiled = self._compiled
        if not compiled.forms:
            return value
        return _walk(compiled, value)

    def event(self, event: Event) -> Event:
        """The event with its secrets redacted, still valid and of the same shape: strings and
        the numbers inside free-form values change, podium's own fields (type, seq, counters,
        fixed words) do not."""
        compiled = self._compiled
        if not compiled.forms:
            return event
        from podium.events.model import event_json

        if not compiled.search(event_json(event)):
            return event  # the JSON text holds every form a value holds, escaped once more
        data = event.model_dump(mode="json")
        fixed = _fixed_fields(type(event))
        clean = {k: v if k in fixed else _walk(compiled, v) for k, v in data.items()}
        if clean == data:
            return event  # a match across the JSON's own syntax, in no value
        from podium.events.model import parse_event

        return parse_event(clean)


def _walk(compiled: _Compiled, value: Any) -> Any:
    if isinstance(value, str):
        return compiled.sub(value)
    if isinstance(value, dict):
        return {(compiled.sub(k) if isinstance(k, str) else k): _walk(compiled, v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(compiled, v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        digits = json.dumps(value)
        clean = compiled.sub(digits)
        return value if clean == digits else f"<number:{clean}>"  # restore_secrets: a number
    return value


_FIXED: dict[type, frozenset[str]] = {}


def _fixed_fields(cls: type[Event]) -> frozenset[str]:
    """The fields of an event class that hold podium's own values: its envelope, numbers,
    flags and words from a fixed list (a Literal); never a value a secret can reach."""
    fixed = _FIXED.get(cls)
    if fixed is None:
        from typing import Literal, get_args, get_origin

        def own(tp: Any) -> bool:
            if get_origin(tp) is Literal or tp in (int, float, bool, type(None)):
                return True
            args = get_args(tp)
            return bool(args) and get_origin(tp) is not None and all(own(a) for a in args) \
                and get_origin(tp) not in (list, dict, tuple)

        fixed = frozenset({"v", "type", "run_id", "seq", "ts", "parent_run_id"}
                          | {n for n, f in cls.model_fields.items() if own(f.annotation)})
        _FIXED[cls] = fixed
    return fixed


def restore_secrets(value: Any, names: set[str], environ: Mapping[str, str] | None = None
                    ) -> Any:
    """`value` with every `<secret:NAME>` of a variable in `names` replaced by its value in
    the environment. Raises MissingSecret naming the variables that are not set."""
    env = os.environ if environ is None else environ
    missing: list[str] = []

    def put(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in names:
                return match.group(0)
            if name in env:
                return env[name]
            if name not in missing:
                missing.append(name)
            return match.group(0)

        return _TOKEN.sub(one, text)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if "<secret:" not in v:
                return v
            if (number := _NUMBER.fullmatch(v)) is not None:
                digits = put(number.group(1))
                try:
                    return json.loads(digits)
                except ValueError:
                    return digits  # not set (MissingSecret follows), or not a number after all
            return put(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    out = walk(value)
    if missing:
        raise MissingSecret(missing)
    return out
