"""`podium registry add|list|show|remove|set-default|update`: Conductor's workflow registries
(the rules live in podium.app.registries)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from podium.app import registries
from podium.errors import PodiumError


def _guard(command: str, body: Callable[[], int]) -> int:
    try:
        return body()
    except PodiumError as exc:
        sys.stderr.write(f"podium registry {command}: {exc}\n")
        return exc.exit_code


def add_command(name: str, source: str, kind: str | None, make_default: bool) -> int:
    def body() -> int:
        reg = registries.add_registry(name, source, kind, make_default)
        default = registries.load_config().default == reg.name
        sys.stdout.write(f"added registry '{reg.name}' ({reg.type}: {reg.source})"
                         + (" as the default" if default else "") + "\n")
        return 0
    return _guard("add", body)


def list_command(name: str | None, json_out: bool) -> int:
    def body() -> int:
        if name:
            index = registries.workflows(name)
            if json_out:
                sys.stdout.write(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
            elif not index:
                sys.stdout.write(f"registry '{name}' lists no workflows\n")
            else:
                width = max(len(k) for k in index)
                for key in sorted(index):
                    desc = index[key]["description"]
                    sys.stdout.write(f"{key:<{width}}  {index[key]['path']}"
                                     + (f"  {desc}" if desc else "") + "\n")
            return 0
        config = registries.load_config()
        if json_out:
            sys.stdout.write(json.dumps({
                "default": config.default,
                "registries": {r.name: {"type": r.type, "source": r.source}
                               for r in config.registries.values()}}, indent=2) + "\n")
        elif not config.registries:
            sys.stdout.write("no registries (podium registry add NAME SOURCE)\n")
        else:
            for reg in config.registries.values():
                mark = "*" if reg.name == config.default else " "
                sys.stdout.write(f"{mark} {reg.name}  {reg.type}  {reg.source}\n")
        return 0
    return _guard("list", body)


def show_command(name: str) -> int:
    def body() -> int:
        config = registries.load_config()
        reg = config.registries.get(name)
        if reg is None:
            raise registries.RegistryError(
                f"unknown registry '{name}' (registries: "
                f"{', '.join(sorted(config.registries)) or 'none'})")
        sys.stdout.write(f"name: {reg.name}\ntype: {reg.type}\nsource: {reg.source}\n"
                         f"default: {'yes' if config.default == reg.name else 'no'}\n"
                         f"cache: {registries.cache_root() / reg.name}\n")
        return 0
    return _guard("show", body)


def remove_command(name: str) -> int:
    def body() -> int:
        registries.remove_registry(name)
        sys.stdout.write(f"removed registry '{name}'\n")
        return 0
    return _guard("remove", body)


def set_default_command(name: str) -> int:
    def body() -> int:
        registries.set_default(name)
        sys.stdout.write(f"default registry: {name}\n")
        return 0
    return _guard("set-default", body)


def update_command(name: str | None) -> int:
    def body() -> int:
        done = registries.update(name)
        if not done:
            sys.stdout.write("no registries to update\n")
        for reg, commit in done:
            sys.stdout.write(f"{reg.name}: {commit}\n")
        return 0
    return _guard("update", body)
