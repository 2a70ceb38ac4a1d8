"""Label Studio's HTTP API, as far as the review queue uses it: a project with its labelling
interface, tasks, the JSON export of annotated tasks, and who annotated.

HTTP goes through ``requests`` (already casewatch's, for the OTLP exporter): one session per
client, closed by whoever built the client. Authentication is the legacy token
(``Authorization: Token ...``), which does not expire and needs no refresh; it is never logged.
Every failure becomes an ``AnnotationServerError`` with a bounded ``reason`` here: the caller
keeps what it was pushing and tries again later.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import requests

from monitor.errors import AnnotationServerError

_PAGE = 100


class LabelStudioClient:
    """One Label Studio server: ``url`` without ``/api``; ``timeout_s`` bounds each request."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout_s
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Token {token}"
        self._session.headers["Accept"] = "application/json"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> LabelStudioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        where = f"{method} {self.url}{path}"
        try:
            response = self._session.request(
                method, self.url + path, timeout=self._timeout, **kwargs
            )
        except requests.Timeout as exc:
            raise AnnotationServerError(f"{where}: no answer within {self._timeout:g} s",
                                        "timeout") from exc  # fmt: skip
        except requests.RequestException as exc:
            raise AnnotationServerError(f"{where}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            reason = "refused" if response.status_code < 500 else "server_error"
            raise AnnotationServerError(
                f"{where}: HTTP {response.status_code}: {response.text[:300]}", reason
            )
        try:
            return response.json()
        except ValueError as exc:
            raise AnnotationServerError(f"{where}: the reply is not JSON: {exc}",
                                        "unreadable") from exc  # fmt: skip

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body = self._call(method, path, **kwargs)
        if not isinstance(body, dict):
            raise AnnotationServerError(f"{method} {path}: expected a JSON object", "unreadable")
        return body

    # ------------------------------------------------------------------ projects

    def find_project(self, title: str) -> int | None:
        """The id of the oldest project with this title, or None."""
        page = 1
        while True:
            body = self._object("GET", "/api/projects", params={"page": page,
                                                                "page_size": _PAGE})  # fmt: skip
            for project in body.get("results") or []:
                if project.get("title") == title:
                    return int(project["id"])
            if not body.get("next"):
                return None
            page += 1

    def create_project(self, title: str, label_config: str, description: str = "") -> int:
        body = self._object(
            "POST",
            "/api/projects",
            json={"title": title, "label_config": label_config, "description": description},
        )
        return int(body["id"])

    def ensure_project(self, title: str, label_config: str, description: str = "") -> int:
        """The project with this title, created with ``label_config`` when there is none."""
        found = self.find_project(title)
        return found if found is not None else self.create_project(title, label_config,
                                                                    description)  # fmt: skip

    # ------------------------------------------------------------------ tasks

    def create_task(
        self, project_id: int, data: Mapping[str, Any], meta: Mapping[str, Any] | None = None
    ) -> int:
        """One task; ``data`` is what the labelling interface shows, ``meta`` rides along
        unseen by the labeller (the judge's bands)."""
        body = self._object(
            "POST",
            "/api/tasks",
            json={"project": project_id, "data": dict(data), "meta": dict(meta or {})},
        )
        return int(body["id"])

    def tasks(self, project_id: int) -> Iterator[dict[str, Any]]:
        """Every task of the project (id, data, meta), page by page."""
        page, seen = 1, 0
        while True:
            body = self._object(
                "GET",
                "/api/tasks",
                params={"project": project_id, "page": page, "page_size": _PAGE},
            )
            batch = body.get("tasks") or []
            yield from batch
            seen += len(batch)
            if not batch or seen >= int(body.get("total") or 0):
                return
            page += 1

    def create_annotation(
        self, task_id: int, choices: Mapping[str, str], to_name: str = "answer"
    ) -> int:
        """An annotation picking one choice per control (what a person's submit sends)."""
        result = [
            {"from_name": name, "to_name": to_name, "type": "choices",
             "value": {"choices": [value]}}
            for name, value in choices.items()
        ]  # fmt: skip
        body = self._object("POST", f"/api/tasks/{task_id}/annotations", json={"result": result})
        return int(body["id"])

    def export(self, project_id: int) -> list[dict[str, Any]]:
        """The annotated tasks with their annotations (Label Studio's JSON export)."""
        body = self._call("GET", f"/api/projects/{project_id}/export",
                          params={"exportType": "JSON"})  # fmt: skip
        if not isinstance(body, list):
            raise AnnotationServerError("the export is not a JSON array of tasks", "unreadable")
        return [t for t in body if isinstance(t, dict)]

    def user_emails(self) -> dict[int, str]:
        """User id -> email, to name labellers as people know them."""
        body = self._call("GET", "/api/users")
        users = body if isinstance(body, list) else []
        return {int(u["id"]): str(u["email"]) for u in users if isinstance(u, dict)
                and "id" in u and u.get("email")}  # fmt: skip
