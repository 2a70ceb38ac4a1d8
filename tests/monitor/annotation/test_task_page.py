"""A task the review queue pushed, as a reviewer sees it: headless Chromium logs in through
Label Studio's own form and opens the task's page, which renders the turn, its markup shown
as text (the turn is data, never the page's markup)."""

from __future__ import annotations

import json

from monitor.annotation.label_studio import LabelStudioClient
from monitor.annotation.label_studio_server import LabelStudioServer
from monitor.reports.label_files import label_studio_config, label_studio_task
from tests.support.chromium import HeadlessChromium
from tests.support.waiting import wait_for

QUERY = "Where is my parcel <b>XYZZY-42</b>? It was due Monday."


def test_the_task_page_renders_the_turn(
    label_studio: LabelStudioServer,
    label_studio_client: LabelStudioClient,
    review_project_title: str,
) -> None:
    project = label_studio_client.create_project(review_project_title, label_studio_config())
    event = {"query": QUERY, "answer": "It ships <script>alert(1)</script> tomorrow.",
             "contexts": [{"id": "kb-7", "text": "Parcels ship in 2 days."}]}  # fmt: skip
    task = label_studio_task("review-b1", "evt-page", event)
    task_id = label_studio_client.create_task(project, task["data"], {"judge_bands": {}})

    login = label_studio.login
    with HeadlessChromium() as browser:
        browser.navigate(f"{label_studio.url}/user/login/")
        wait_for(lambda: browser.evaluate("!!document.querySelector('input[name=email]')"),
                 "the login form")  # fmt: skip
        browser.evaluate(
            f"document.querySelector('input[name=email]').value = {json.dumps(login.email)};"
            f"document.querySelector('input[name=password]').value = {json.dumps(login.password)};"
            "document.querySelector('form').submit(); true"
        )
        wait_for(lambda: "/user/login" not in str(browser.evaluate("location.href")),
                 "the login to go through", explain=browser.text)  # fmt: skip
        browser.navigate(f"{label_studio.url}/projects/{project}/data?task={task_id}")
        wait_for(lambda: QUERY in browser.text(), "the task's query on its page",
                 explain=lambda: browser.text()[:800])  # fmt: skip
        shown = browser.text()
        assert "It ships <script>alert(1)</script> tomorrow." in shown
        assert "[kb-7] Parcels ship in 2 days." in shown
        bold = browser.evaluate(
            "Array.from(document.querySelectorAll('b')).map(b => b.textContent).join()"
        )
        assert "XYZZY-42" not in str(bold)  # the turn's <b> is text, not an element
