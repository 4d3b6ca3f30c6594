"""Workflow registries in Conductor's format (docs/design/registry.md in Conductor).

The configuration is Conductor's `registries.toml`, kept in PODIUM_HOME:

    default = "team"
    [registries.team]
    type = "git"            # path | git | github
    source = "file:///srv/workflows.git"

A registry's root holds `index.yaml` (or `index.json`): `workflows: {NAME: {description,
path}}`, the path relative to the root. A reference is `NAME[@REGISTRY][#REF]`: no registry
(or an empty one, `name@#v1`) is the default registry; no ref is the default branch's HEAD.

Path registries are read in place and take no ref. Git registries (any URL or path `git`
accepts, `file://` included; `github` is `owner/repo` on github.com) are mirrored into
PODIUM_HOME/registry-cache/NAME/mirror.git with the git command; the ref is resolved to a
commit, whose tree is unpacked once into registry-cache/NAME/<commit[:12]>/ with a sha256 of
its files, checked again on every reuse. A full commit already in the mirror is used without
the network; otherwise a failed fetch falls back to what the mirror has (with a warning).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from podium.app.home import podium_home
from podium.errors import PodiumError
from podium.language.pinned import STAMP
from podium.records import record

CONFIG_FILENAME = "registries.toml"
TYPES = ("path", "git", "github")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_GITHUB_RE = re.compile(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class RegistryError(PodiumError):
    """A registry reference or configuration podium refuses (exit 2)."""

    exit_code = 2


class RegistryFetchError(PodiumError):
    """git or the file system failed (exit 3)."""

    exit_code = 3


@record(frozen=True)
class Registry:
    name: str
    type: str
    source: str


@record
class Config:
    default: str | None
    registries: dict[str, Registry]


@record(frozen=True)
class Resolved:
    """A registry reference resolved to a file on disk, and where it came from."""

    path: Path
    origin: dict[str, Any]  # registry, type, source, workflow, ref, commit, path, sha256
    warning: str | None = None


# -- configuration ------------------------------------------------------------------------

def config_path() -> Path:
    return podium_home() / CONFIG_FILENAME


def cache_root() -> Path:
    return podium_home() / "registry-cache"


def load_config() -> Config:
    path = config_path()
    if not path.exists():
        return Config(None, {})
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RegistryFetchError(f"{path}: cannot read the registries: {exc}") from exc
    regs: dict[str, Registry] = {}
    for name, entry in (raw.get("registries") or {}).items():
        if not isinstance(entry, dict) or entry.get("type") not in TYPES \
                or not isinstance(entry.get("source"), str):
            raise RegistryError(f"{path}: registry '{name}' needs a type ({', '.join(TYPES)}) "
                                f"and a source")
        regs[name] = Registry(name, entry["type"], entry["source"])
    default = raw.get("default")
    return Config(default if isinstance(default, str) and default in regs else None, regs)


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def save_config(config: Config) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"default = {_toml_str(config.default)}", ""] if config.default else []
    for reg in config.registries.values():
        lines += [f"[registries.{_toml_str(reg.name)}]", f"type = {_toml_str(reg.type)}",
                  f"source = {_toml_str(reg.source)}", ""]
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    tmp.replace(path)


def _infer_type(source: str) -> str:
    if "://" in source or source.startswith("git@") or source.endswith(".git"):
        return "git"
    local = Path(source).expanduser()
    if local.is_dir():
        if _index_file(local) is None and (local / "HEAD").is_file() \
                and (local / "objects").is_dir():
            return "git"  # a bare repository given by its path
        return "path"
    if _GITHUB_RE.match(source):
        return "github"
    return "path"


def add_registry(name: str, source: str, kind: str | None = None,
                 make_default: bool = False) -> Registry:
    if not _NAME_RE.match(name):
        raise RegistryError(f"'{name}' is not a registry name (letters, digits, . _ -)")
    config = load_config()
    if name in config.registries:
        raise RegistryError(f"registry '{name}' exists already (podium registry remove {name})")
    kind = kind or _infer_type(source)
    if kind not in TYPES:
        raise RegistryError(f"unknown registry type '{kind}': use {', '.join(TYPES)}")
    if kind == "path":
        root = Path(source).expanduser().resolve()
        if not root.is_dir():
            raise RegistryFetchError(f"{source}: no such directory")
        if _index_file(root) is None:
            raise RegistryError(f"{source}: no index.yaml or index.json in it")
        source = str(root)
    elif kind == "git" and "://" not in source and not source.startswith("git@") \
            and Path(source).expanduser().exists():
        source = str(Path(source).expanduser().resolve())
    reg = Registry(name, kind, source)
    if kind != "path":
        _refresh_mirror(reg)  # fails here, not at the first run
    config.registries[name] = reg
    if make_default or config.default is None:
        config.default = name
    save_config(config)
    return reg


def remove_registry(name: str) -> None:
    config = load_config()
    _get(config, name)
    del config.registries[name]
    if config.default == name:
        config.default = None
    save_config(config)
    shutil.rmtree(cache_root() / name, ignore_errors=True)


def set_default(name: str) -> None:
    config = load_config()
    _get(config, name)
    config.default = name
    save_config(config)


def update(name: str | None = None) -> list[tuple[Registry, str]]:
    """Fetch one registry (or all); returns each one with its default-branch commit (or
    'in place' for a path registry)."""
    config = load_config()
    regs = [_get(config, name)] if name else list(config.registries.values())
    done = []
    for reg in regs:
        if reg.type == "path":
            _read_index(Path(reg.source), reg)
            done.append((reg, "in place"))
        else:
            _refresh_mirror(reg)
            done.append((reg, _rev_parse(reg, "HEAD") or "?"))
    return done


def workflows(name: str) -> dict[str, dict[str, str]]:
    """The index of a registry at its default branch's HEAD."""
    config = load_config()
    reg = _get(config, name)
    if reg.type == "path":
        return _read_index(Path(reg.source), reg)
    _mirror_ready(reg)
    commit = _rev_parse(reg, "HEAD")
    if commit is None:
        raise RegistryError(f"registry '{name}' has no commits")
    return _read_index(_checkout(reg, commit), reg)


def _get(config: Config, name: str) -> Registry:
    if name not in config.registries:
        known = ", ".join(sorted(config.registries)) or "none"
        raise RegistryError(f"unknown registry '{name}' (registries: {known})")
    return config.registries[name]


# -- references -----------------------------------------------------------------------------

def parse_reference(text: str) -> tuple[str, str | None, str | None]:
    """NAME[@REGISTRY][#REF] -> (name, registry or None for the default, ref or None)."""
    if text.count("@") > 1 or text.count("#") > 1:
        raise RegistryError(f"'{text}': a registry reference has at most one @ and one #")
    rest, hash_sign, ref = text.partition("#")
    if hash_sign and not ref:
        raise RegistryError(f"'{text}': nothing after # (give a tag, branch or commit)")
    name, _, registry = rest.partition("@")
    if not name:
        raise RegistryError(f"'{text}': no workflow name before @")
    return name, registry or None, ref or None


def looks_like_reference(arg: str) -> bool:
    """True when `podium run ARG` should resolve ARG in a registry: no such file, and either
    an @ or # in it, or a bare name (no path separator, no .yaml) while a default exists."""
    if Path(arg).exists():
        return False
    if "@" in arg or "#" in arg:
        return True
    if "/" in arg or os.sep in arg or arg.endswith((".yaml", ".yml", ".json")):
        return False
    return load_config().default is not None


def resolve(text: str) -> Resolved:
    name, reg_name, ref = parse_reference(text)
    config = load_config()
    if reg_name is None:
        if config.default is None:
            raise RegistryError(f"'{text}': no registry named and no default registry "
                                f"(podium registry set-default NAME)")
        reg_name = config.default
    reg = _get(config, reg_name)
    if reg.type == "path":
        if ref is not None:
            raise RegistryError(f"'{text}': registry '{reg.name}' is a local path; it has no "
                                f"refs (#{ref})")
        root = Path(reg.source)
        file = _workflow_file(root, _read_index(root, reg), name, reg)
        return Resolved(file, {"registry": reg.name, "type": reg.type, "source": reg.source,
                               "workflow": name, "ref": None, "commit": None,
                               "path": file.relative_to(root).as_posix(),
                               "sha256": tree_hash(file.parent)})
    commit, warning = _resolve_commit(reg, ref)
    root = _checkout(reg, commit)
    file = _workflow_file(root, _read_index(root, reg), name, reg)
    return Resolved(file, {"registry": reg.name, "type": reg.type, "source": reg.source,
                           "workflow": name, "ref": ref, "commit": commit,
                           "path": file.relative_to(root).as_posix(),
                           "sha256": tree_hash(file.parent)}, warning)


def describe_origin(origin: dict[str, Any]) -> str:
    where = f"{origin.get('workflow')}@{origin.get('registry')}"
    if origin.get("ref"):
        where += f"#{origin['ref']}"
    parts = [where, f"path {origin.get('path')}"]
    if origin.get("commit"):
        parts.append(f"commit {origin['commit']}")
    parts.append(f"source {origin.get('source')}")
    if origin.get("sha256"):
        parts.append(f"sha256 {str(origin['sha256'])[:16]}")
    return " · ".join(parts)


# -- index --------------------------------------------------------------------------------

def _index_file(root: Path) -> Path | None:
    for name in ("index.yaml", "index.json"):
        if (root / name).is_file():
            return root / name
    return None


def _read_index(root: Path, reg: Registry) -> dict[str, dict[str, str]]:
    file = _index_file(root)
    if file is None:
        raise RegistryError(f"registry '{reg.name}': no index.yaml or index.json at its root")
    try:
        text = file.read_text(encoding="utf-8")
        if file.suffix == ".json":
            data: Any = json.loads(text)
        else:
            from ruamel.yaml import YAML

            data = YAML(typ="safe").load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryFetchError(f"{file}: {exc}") from exc
    except Exception as exc:  # ruamel's and json's parse errors
        raise RegistryError(f"registry '{reg.name}': {file.name} does not parse: "
                            f"{str(exc).splitlines()[0]}") from exc
    entries = data.get("workflows") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise RegistryError(f"registry '{reg.name}': {file.name} needs a 'workflows:' mapping")
    index: dict[str, dict[str, str]] = {}
    for key, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise RegistryError(f"registry '{reg.name}': workflow '{key}' in {file.name} "
                                f"needs a path")
        index[str(key)] = {"path": entry["path"],
                           "description": str(entry.get("description") or "")}
    return index


def _workflow_file(root: Path, index: dict[str, dict[str, str]], name: str,
                   reg: Registry) -> Path:
    if name not in index:
        close = difflib.get_close_matches(name, list(index), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        listed = ", ".join(sorted(index)) or "none"
        raise RegistryError(f"no workflow '{name}' in registry '{reg.name}' (it has: "
                            f"{listed}){hint}")
    file = (root / index[name]["path"]).resolve()
    if not file.is_relative_to(root.resolve()):
        raise RegistryError(f"registry '{reg.name}': workflow '{name}' points outside the "
                            f"registry ({index[name]['path']})")
    if not file.is_file():
        raise RegistryFetchError(f"registry '{reg.name}': workflow '{name}' is listed at "
                                 f"{index[name]['path']}, which does not exist")
    return file


def tree_hash(root: Path) -> str:
    """sha256 over every file under root: relative path and content, in sorted order."""
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if rel == STAMP:
            continue
        digest.update(rel.encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


# -- git ------------------------------------------------------------------------------------

def _mirror(reg: Registry) -> Path:
    return cache_root() / reg.name / "mirror.git"


def _url(reg: Registry) -> str:
    return f"https://github.com/{reg.source}.git" if reg.type == "github" else reg.source


def _git(*args: str, cwd: Path | None = None, binary: bool = False
         ) -> subprocess.CompletedProcess[Any]:
    from podium.events.redact import KEY_VARIABLES

    # git needs its own settings (proxies, SSH agent, GIT_*), never the model providers' keys
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True,
                              text=not binary, check=False, timeout=300,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise RegistryFetchError("git registries need the git command, which is not on "
                                 "PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise RegistryFetchError(f"git {args[0]} took more than 300 s") from exc


def _last_line(proc: subprocess.CompletedProcess[Any]) -> str:
    err = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) \
        else proc.stderr
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"


def _refresh_mirror(reg: Registry) -> None:
    mirror = _mirror(reg)
    if (mirror / "HEAD").is_file():
        proc = _git("-C", str(mirror), "fetch", "--quiet", "--prune", "--tags", "origin")
        if proc.returncode:
            raise RegistryFetchError(f"registry '{reg.name}': git fetch {_url(reg)} failed: "
                                     f"{_last_line(proc)}")
        _git("-C", str(mirror), "remote", "set-head", "origin", "--auto")
        return
    mirror.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".mirror-", dir=mirror.parent))
    proc = _git("clone", "--quiet", "--mirror", _url(reg), str(tmp / "m.git"))
    if proc.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RegistryFetchError(f"registry '{reg.name}': git clone {_url(reg)} failed: "
                                 f"{_last_line(proc)}")
    os.replace(tmp / "m.git", mirror)
    shutil.rmtree(tmp, ignore_errors=True)


def _mirror_ready(reg: Registry) -> None:
    if not (_mirror(reg) / "HEAD").is_file():
        _refresh_mirror(reg)


def _rev_parse(reg: Registry, ref: str) -> str | None:
    proc = _git("-C", str(_mirror(reg)), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def _lookup(reg: Registry, ref: str | None) -> str | None:
    if ref is None:
        return _rev_parse(reg, "HEAD")
    for candidate in (f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        found = _rev_parse(reg, candidate)
        if found:
            return found
    return None


def _resolve_commit(reg: Registry, ref: str | None) -> tuple[str, str | None]:
    """The commit for ref (None: the default branch's HEAD), and a warning when the registry
    could not be reached and the mirror's copy was used."""
    have_mirror = (_mirror(reg) / "HEAD").is_file()
    if have_mirror and ref is not None and _SHA_RE.match(ref.lower()):
        known = _rev_parse(reg, ref.lower())
        if known:
            return known, None  # a full commit is immutable: no fetch
    warning = None
    try:
        _refresh_mirror(reg)
    except RegistryFetchError as exc:
        if not have_mirror:
            raise
        warning = f"{exc}; using the cached copy"
    commit = _lookup(reg, ref)
    if commit is None:
        if ref is None:
            raise RegistryError(f"registry '{reg.name}' has no commits")
        raise RegistryError(f"registry '{reg.name}' has no tag, branch or commit '{ref}'")
    return commit, warning


def _checkout(reg: Registry, commit: str) -> Path:
    """The commit's tree, unpacked once and verified by its sha256 on every reuse."""
    folder = cache_root() / reg.name / commit[:12]
    stamp = folder / STAMP
    if stamp.is_file():
        recorded = stamp.read_text(encoding="utf-8").strip()
        if tree_hash(folder) != recorded:
            raise RegistryError(f"registry '{reg.name}': the cached copy of commit "
                                f"{commit[:12]} was changed since it was fetched (sha256 "
                                f"mismatch); delete {folder} to fetch it again")
        return folder
    _mirror_ready(reg)
    proc = _git("-C", str(_mirror(reg)), "archive", "--format=tar", commit, binary=True)
    if proc.returncode:
        raise RegistryFetchError(f"registry '{reg.name}': git archive {commit[:12]} failed: "
                                 f"{_last_line(proc)}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=folder.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        (tmp / STAMP).write_text(tree_hash(tmp) + "\n", encoding="utf-8")
        if folder.exists():  # an interrupted unpack left no stamp: start again
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RegistryFetchError(f"registry '{reg.name}': cannot unpack {commit[:12]}: "
                                 f"{exc}") from exc
    return folder


def fetch_git(name: str, url: str, ref: str | None) -> tuple[Path, str, str | None]:
    """A git repository at `ref` (None: its default branch), cached as a registry's is under
    registry-cache/NAME: (the commit's checkout, the commit, a warning when the repository
    could not be reached and the cached copy was used). A full commit already cached is used
    without the network."""
    reg = Registry(name, "git", url)
    commit, warning = _resolve_commit(reg, ref)
    return _checkout(reg, commit), commit, warning
