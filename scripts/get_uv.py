"""Fetch uv for scripts/bootstrap.sh without touching any Python installation: the uv wheel for
this platform from PyPI (its sha256 checked against the index), unpacked into a private folder.

A distribution's Python (PEP 668, EXTERNALLY-MANAGED) refuses `pip install`, and may have no
pip or venv at all; this needs only the standard library. Prints the path of the uv binary.

    python3 scripts/get_uv.py DEST        DEST/bin/uv (PODIUM_PYPI_URL: another index)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import stat
import sys
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urljoin

UV_VERSION = "0.13.9"  # the uv the lock file was made with
INDEX = os.environ.get("PODIUM_PYPI_URL", "https://pypi.org").rstrip("/")


def wheel_tags() -> list[str]:
    """Pieces a uv wheel's file name must hold for this machine, best first."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if sys.platform == "darwin":
        return [f"macosx_{n}_{'arm64' if arch == 'aarch64' else arch}" for n in ("11", "10")]
    if sys.platform.startswith("linux"):
        libc = platform.libc_ver()[0]
        first = "musllinux" if libc != "glibc" else "manylinux"
        second = "manylinux" if first == "musllinux" else "musllinux"
        return [f"{first}_", f"{second}_"] if arch else []
    return []


def pick(files: list[dict[str, object]]) -> dict[str, object]:
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    for tag in wheel_tags():
        for f in files:
            name = str(f["filename"])
            if name.endswith(".whl") and tag in name and (
                    arch in name or (sys.platform == "darwin" and "arm64" in name)):
                return f
    raise SystemExit(f"get_uv: no uv {UV_VERSION} wheel for {sys.platform} {machine}; "
                     "install uv yourself: https://docs.astral.sh/uv/")


def main() -> None:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/uv")
    binary = dest / "bin" / "uv"
    if binary.is_file():
        print(binary)
        return
    listing = f"{INDEX}/pypi/uv/json"
    with urllib.request.urlopen(listing, timeout=60) as r:
        files = json.load(r)["releases"].get(UV_VERSION) or []
    chosen = pick(files)
    with urllib.request.urlopen(urljoin(listing, str(chosen["url"])), timeout=300) as r:
        data = r.read()
    want = dict(chosen["digests"])["sha256"]  # type: ignore[call-overload]
    if hashlib.sha256(data).hexdigest() != want:
        raise SystemExit(f"get_uv: {chosen['filename']}: sha256 differs from the index's")
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".data/scripts/uv"))
        binary.parent.mkdir(parents=True, exist_ok=True)
        part = binary.with_suffix(".part")
        part.write_bytes(wheel.read(member))
    part.chmod(part.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    part.replace(binary)
    print(binary)


if __name__ == "__main__":
    main()
