"""A local Label Studio server, started as a child process like the demo's Prometheus: from the
virtualenv ``scripts/ensure-label-studio.sh`` installs (never casewatch's own), on a loopback
port, with its data in a directory of the caller's, an administrator and a legacy API token
created at start (no prompt), the version check and usage reporting off.

A fresh data directory gets a copy of the template database the install script migrated once,
so the server is up in seconds rather than after Label Studio's few hundred migrations.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import requests

from monitor.errors import AnnotationServerError, LabelStudioNotInstalled
from monitor.runtime.processes import start_supervised, stop_process

# The one version casewatch runs; scripts/ensure-label-studio.sh pins the same (a test checks).
LABEL_STUDIO_VERSION = "1.23.2"
_DB = "label_studio.sqlite3"


def label_studio_home() -> Path:
    """The virtualenv the install script made: ``CASEWATCH_LABEL_STUDIO`` if set, else the
    machine's cache."""
    given = os.environ.get("CASEWATCH_LABEL_STUDIO")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "casewatch" / f"label-studio-{LABEL_STUDIO_VERSION}"


def find_label_studio(home: Path | None = None) -> Path:
    """The ``label-studio`` program of a finished install."""
    home = home or label_studio_home()
    program = home / "bin" / "label-studio"
    if not (home / ".installed-stamp").exists() or not program.exists():
        raise LabelStudioNotInstalled(
            f"Label Studio {LABEL_STUDIO_VERSION} is not installed in {home}: run "
            "`bash scripts/ensure-label-studio.sh` (or `make review-services`)"
        )
    return program


@dataclass(frozen=True)
class LabelStudioLogin:
    """The administrator created at start, and the legacy token that acts as them."""

    email: str
    password: str
    token: str


@dataclass
class LabelStudioServer:
    proc: subprocess.Popen[bytes]
    url: str
    login: LabelStudioLogin

    def stop(self, timeout_s: float = 20.0) -> None:
        stop_process(self.proc, timeout_s)


def _ready(url: str) -> bool:
    try:
        return requests.get(url + "/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def start_label_studio(
    data_dir: Path,
    port: int,
    login: LabelStudioLogin,
    log: IO[bytes],
    *,
    home: Path | None = None,
    timeout_s: float = 240.0,
) -> LabelStudioServer:
    """Start Label Studio on 127.0.0.1:``port`` and wait until it answers ``/health``
    (``AnnotationServerError`` when it exits or does not answer in time; its log says why)."""
    home = home or label_studio_home()
    program = find_label_studio(home)
    data_dir.mkdir(parents=True, exist_ok=True)
    template = home / "template" / _DB
    if not (data_dir / _DB).exists() and template.exists():
        shutil.copyfile(template, data_dir / _DB)
    url = f"http://127.0.0.1:{port}"
    argv = [
        str(program), "start", "--no-browser",
        "--internal-host", "127.0.0.1", "--port", str(port), "--host", url,
        "--username", login.email, "--password", login.password,
        "--user-token", login.token, "--enable-legacy-api-token",
    ]  # fmt: skip
    env = {
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LATEST_VERSION_CHECK": "false",  # no call to the package index at each start
        "COLLECT_ANALYTICS": "false",
    }
    proc = start_supervised(argv, log, lambda: _ready(url), timeout_s, 20.0, cwd=data_dir,
                            env=env)  # fmt: skip
    if proc is None:
        raise AnnotationServerError(
            f"Label Studio did not answer on {url}/health within {timeout_s:g} s (see its log)"
        )
    return LabelStudioServer(proc, url, login)
