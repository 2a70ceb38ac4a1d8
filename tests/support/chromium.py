"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: fd 3 in, fd 4 out, NUL-separated JSON), so a test can log in
through a page's own form and read what a page shows once its scripts have run, without a
WebSocket library. Chromium runs with a fresh profile, no network of its own (no sync,
component updates or background requests), and is stopped by ``close``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any

from monitor.runtime.processes import parent_death_hook
from tests.support.components import unavailable

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_binary() -> str:
    found = shutil.which("chromium")
    if found is None:
        unavailable("Chromium", "no `chromium` on PATH (make review-services installs it)")
    return found


class HeadlessChromium:
    def __init__(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="casewatch-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        die_with_parent = parent_death_hook()

        def fds_3_and_4() -> None:
            # os.pipe's descriptors are close-on-exec; dup2 makes inheritable copies at 3, 4.
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            if die_with_parent is not None:  # as spawn_logged's children: gone with the tests
                die_with_parent()

        # Popen itself, not spawn_logged: the protocol runs on descriptors 3 and 4 of its own.
        self._proc = subprocess.Popen(
            [chromium_binary(), *FLAGS, f"--user-data-dir={self._profile}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds_3_and_4, close_fds=False,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = str(attached["sessionId"])

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, page: bool = False
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise AssertionError(f"{method}: {reply['error']}")
                    return dict(reply.get("result") or {})
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise AssertionError(f"Chromium exited during {method}")
            self._buffer += chunk

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, page=True)

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True
        )
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """What the page shows (``document.body.innerText``)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(20)
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
