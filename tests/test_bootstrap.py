"""scripts/bootstrap.sh on a fresh machine whose only Python is a distribution's (PEP 668:
`pip install` refused) and that has no uv: it fetches uv's wheel from the package index into
its cache, checked by sha256, and never asks that Python's pip. The index is a local server on
127.0.0.1 speaking PyPI's JSON API, so the test runs offline; the uv it serves is a stand-in
script (what is tested is how bootstrap gets uv, not uv)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import get_uv  # noqa: E402

FAKE_UV = "#!/bin/sh\necho 'uv from the local index'\n"


def _wheel() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"uv-{get_uv.UV_VERSION}.data/scripts/uv", FAKE_UV)
        z.writestr(f"uv-{get_uv.UV_VERSION}.dist-info/METADATA", "Name: uv\n")
    return buf.getvalue()


@pytest.fixture
def index() -> Iterator[tuple[str, list[str]]]:
    """A PyPI-like index: /pypi/uv/json lists one wheel per platform tag bootstrap may ask
    for (relative URLs, as a proxy gives them); the paths asked are recorded."""
    wheel = _wheel()
    digest = hashlib.sha256(wheel).hexdigest()
    names = [f"uv-{get_uv.UV_VERSION}-py3-none-{tag}.whl" for tag in (
        "manylinux_2_17_x86_64", "manylinux_2_17_aarch64", "musllinux_1_1_x86_64",
        "musllinux_1_1_aarch64", "macosx_11_0_arm64", "macosx_10_12_x86_64")]
    listing = {"releases": {get_uv.UV_VERSION: [
        {"filename": n, "url": f"../../files/{n}", "digests": {"sha256": digest}}
        for n in names]}}
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps(listing).encode() if self.path == "/pypi/uv/json" else (
                wheel if self.path.startswith("/files/") else None)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def _pep668_python(folder: Path, log: Path) -> Path:
    """A `python3` on PATH that behaves as Debian's: `-m pip` refused as externally
    managed, no uv module; anything else runs the real interpreter."""
    folder.mkdir()
    wrapper = folder / "python3"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        'case "$*" in\n'
        '  "-m pip"*) echo "error: externally-managed-environment" >&2; exit 1 ;;\n'
        '  "-m uv"*) echo "No module named uv" >&2; exit 1 ;;\n'
        "esac\n"
        f'exec "{sys.executable}" -I "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return folder


def test_bootstrap_gets_uv_without_touching_a_pep668_python(
        tmp_path: Path, index: tuple[str, list[str]]) -> None:
    url, asked = index
    log = tmp_path / "python3.log"
    bin_dir = _pep668_python(tmp_path / "bin", log)
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    assert subprocess.run(["sh", "-c", "command -v uv"], env={"PATH": path},
                          check=False).returncode != 0, "uv must be absent for this test"
    cache = tmp_path / "cache"
    env = {"PATH": path, "HOME": str(tmp_path), "PODIUM_PYPI_URL": url,
           "PODIUM_BOOTSTRAP_CACHE": str(cache)}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "bootstrap.sh"), "--uv"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    uv = Path(proc.stdout.strip())
    assert uv == cache / "uv" / "bin" / "uv"
    assert subprocess.run([str(uv)], capture_output=True, text=True,
                          check=True).stdout == "uv from the local index\n"
    calls = log.read_text(encoding="utf-8")
    assert "-m pip" not in calls  # the system Python was never asked to install anything
    assert asked[0] == "/pypi/uv/json"
    again = subprocess.run(["bash", str(ROOT / "scripts" / "bootstrap.sh"), "--uv"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert again.stdout.strip() == str(uv)
    assert len(asked) == 2  # the second time it is found in the cache


def test_a_wheel_whose_digest_differs_is_refused(tmp_path: Path,
                                                 index: tuple[str, list[str]]) -> None:
    url, _ = index
    env = dict(os.environ, PODIUM_PYPI_URL=url)
    code = ("import get_uv, json, urllib.request\n"
            "real = json.load\n"
            "def tampered(fp):\n"
            "    data = real(fp)\n"
            "    for f in data['releases'][get_uv.UV_VERSION]:\n"
            "        f['digests']['sha256'] = '0' * 64\n"
            "    return data\n"
            "json.load = tampered\n"
            f"import sys; sys.argv = ['get_uv', {str(tmp_path / 'uv')!r}]\n"
            "get_uv.main()\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT / "scripts",
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "sha256 differs from the index's" in proc.stderr
    assert not (tmp_path / "uv" / "bin" / "uv").exists()
