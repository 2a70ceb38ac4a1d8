"""The case catalogue and the answer builders of the example dataset (used by generate.py).

Scenarios come from scenarios.yaml; this module turns one into knowledge-base chunks, the
reference ("clean") answer of each turn, and each kind of deliberately flawed answer.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

INVENTED = {
    "backup": [
        "Purge the job cache first with `{cli} cache purge --all --no-verify`.",
        "Add `skip_catalog_check=true` to /etc/{cli}/agent.conf so the check is bypassed.",
        "Run `{cli} maintenance --rebuild-index --force` to rebuild the job index.",
    ],
    "storage": [
        "Rebuild the array metadata with `{cli} system repair --metadata --force`.",
        "Set `path_failover_timeout=0` in /etc/{cli}/host.conf to stop the checks.",
        "Run `{cli} cluster resync --all --ignore-errors` before retrying.",
    ],
    "networking": [
        "Disable the session guard with `{cli} system guard off --persist`.",
        "Set `strict_mode=false` in /etc/{cli}/overrides.conf and reload the control plane.",
        "Run `{cli} system flush --all-tables` to reset the state.",
    ],
    "saas": [
        "Reset the tenant token cache with `{cli} tenant reset-cache --all --force`.",
        "Enable `legacy_auth_compat=true` under /etc/{cli}/tenant.conf.",
        "Run `{cli} tenant repair --rebuild-index` to rebuild the directory index.",
    ],
}
INVENTED_CAUSE = "a corrupted local cache on the {product} node"
T0_QUERIES = [
    "We're getting {error} on {product} {version}. I already tried {tried}{cmd}, but "
    "nothing changed. How do I fix it?",
    "{subject}. I already tried {tried}{cmd} and it still fails. What steps should I take?",
    "How do I get rid of {error}? {product} {version}, {environment}. I already tried "
    "{tried}{cmd}.",
]


@dataclass(frozen=True)
class Step:
    text: str
    cmd: str


@dataclass(frozen=True)
class Scenario:
    data: dict[str, Any]
    steps: tuple[Step, ...]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def kb_number(self) -> str:
        return str(self["kb"]).split("-")[1]

    @property
    def cli(self) -> str:
        firsts = [s.cmd.split()[0] for s in self.steps]
        return max(sorted(set(firsts)), key=firsts.count)

    def chunk(self, part: int) -> dict[str, Any]:
        s, t = self.steps, self["tried"]
        tried_cmd = f": `{t['cmd']}`" if t.get("cmd") else ""
        texts = {
            1: f"{self['kb']}: {self['error']} on {self['product']} {self['version']}. "
            f"Symptom: {self['symptom']} Cause: {_cap(self['cause'])}. {self['explanation']} "
            f"The issue is fixed in {self['fixed_version']}.",
            2: f"{self['kb']} resolution, part 1. {t['imperative']} first{tried_cmd}. If "
            f"{self['error']} persists, {_low(s[0].text)}: `{s[0].cmd}`. Next, "
            f"{_low(s[1].text)}: `{s[1].cmd}`. Logs are written to {self['log']}.",
            3: f"{self['kb']} resolution, part 2. If the first steps do not clear "
            f"{self['error']}, {_low(s[2].text)}: `{s[2].cmd}`. Then {_low(s[3].text)}: "
            f"`{s[3].cmd}`. Check the current state at any time with `{self['status_cmd']}`.",
        }
        return {
            "id": f"{self['kb'].lower()}#{part}",
            "text": texts[part],
            "source": f"https://support.acme.example/kb/{self.kb_number}",
        }


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _low(text: str) -> str:
    return text[:1].lower() + text[1:]


def load_scenarios(path: Path) -> list[Scenario]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for item in raw:
        item = {k: " ".join(str(v).split()) if isinstance(v, str) else v for k, v in item.items()}
        steps = tuple(Step(" ".join(s["text"].split()), s["cmd"]) for s in item["steps"])
        out.append(Scenario(item, steps))
    return out


# ---------------------------------------------------------------- answers


def clean_answer(
    sc: Scenario, turn: int, retrieval: str, style: str = "terse", ack: bool = True
) -> str:
    """The reference answer of a turn. ``style`` is the assistant's voice ("terse" for the
    stable model, "chatty" for the canary); ``ack=False`` drops the sentence acknowledging
    what the user already tried (the repeated-step flaw puts the step back instead)."""
    writer = _terse if style == "terse" else _chatty
    return writer(sc, turn, retrieval, ack)


def _terse(sc: Scenario, turn: int, retrieval: str, ack: bool) -> str:
    s, e = sc.steps, sc["error"]
    if retrieval == "partial":
        return (
            f"{e} on {sc['product']} {sc['version']} is caused by {sc['cause']}. The article "
            f"I found explains the cause, but the retrieved context does not include the "
            f"recovery steps, so I don't have enough information to give you safe commands. "
            f"Could you share the last lines of the job log around the failure?"
        )
    if retrieval == "miss":
        return (
            f"The articles I retrieved are about other products, not {e} on {sc['product']}, "
            f"so I don't have enough information to give you a safe next step. Could you share "
            f"the full error message and what changed right before {e} started?"
        )
    if turn == 0:
        lead = (
            f"Since you already tried {sc['tried']['gerund']}, go straight"
            if ack
            else "Then go straight"
        )
        return (
            f"{e} on {sc['product']} {sc['version']} is caused by {sc['cause']}. {lead} to "
            f"the recovery steps from {sc['kb']}:\n1. {s[0].text}: `{s[0].cmd}`\n"
            f"2. {s[1].text}: `{s[1].cmd}`\nIf anything fails, the details are in {sc['log']}."
        )
    if turn == 1:
        lead = (
            f"Since the first two steps did not clear {e}, continue with part 2 of {sc['kb']}"
            if ack
            else f"Then continue with part 2 of {sc['kb']} for {e}"
        )
        return (
            f"{lead}:\n1. {s[2].text}: `{s[2].cmd}`\n2. {s[3].text}: `{s[3].cmd}`\n"
            f"You can follow progress with `{sc['status_cmd']}`."
        )
    if sc["t2"] == "why":
        return (
            f"{e} started after the move to {sc['version']} because {_low(sc['explanation'])} "
            f"{sc['kb']} states that the issue is fixed in {sc['fixed_version']}."
        )
    return (
        f"Can you tell me what you see now? Please share the last lines of {sc['log']} and the "
        f"output of `{sc['status_cmd']}`, so I can tell whether {e} is still the error or the "
        f"problem has moved on."
    )


def _chatty(sc: Scenario, turn: int, retrieval: str, ack: bool) -> str:
    s, e = sc.steps, sc["error"]
    if retrieval == "partial":
        return (
            f"I can see that {e} on {sc['product']} {sc['version']} is caused by {sc['cause']}, "
            f"but the context I retrieved doesn't include the recovery steps, so I don't have "
            f"enough information to give you commands safely. Could you paste the end of the "
            f"job log?"
        )
    if retrieval == "miss":
        return (
            f"Unfortunately the documents I found are about other products and don't mention "
            f"{e}, so I don't have enough information to suggest a safe fix for "
            f"{sc['product']}. What exactly does the error say, and did anything change just "
            f"before it started?"
        )
    if turn == 0:
        tried = (
            f" You've already tried {sc['tried']['gerund']}, so there's no need to repeat that."
            if ack
            else ""
        )
        return (
            f"Thanks for the details! It looks like you're hitting {e} on {sc['product']} "
            f"{sc['version']}. According to {sc['kb']}, this happens because of {sc['cause']}."
            f"{tried} Here's what I'd do next:\n- {s[0].text}: `{s[0].cmd}`\n"
            f"- {s[1].text}: `{s[1].cmd}`\nKeep an eye on {sc['log']} while you do this."
        )
    if turn == 1:
        lead = (
            f"Sorry that didn't fix it. Since those two steps didn't clear {e}, the next part "
            f"of {sc['kb']} is"
            if ack
            else f"Here's the next part of {sc['kb']} for {e}"
        )
        return (
            f"{lead}:\n- {s[2].text}: `{s[2].cmd}`\n- {s[3].text}: `{s[3].cmd}`\n"
            f"To check on progress, run `{sc['status_cmd']}`."
        )
    if sc["t2"] == "why":
        return (
            f"Good question. {e} showed up after the {sc['version']} upgrade because "
            f"{_low(sc['explanation'])} The fix ships in {sc['fixed_version']}, per {sc['kb']}."
        )
    return (
        f"Thanks for the update. To figure out what's going on, could you share the last lines "
        f"of {sc['log']} and the output of `{sc['status_cmd']}`? That will show whether {e} is "
        f"still the error."
    )


def corrupt_code(code: str) -> str:
    """Swap the last two distinct adjacent digits: E4021 -> E4012, HTTP 502 -> HTTP 520."""
    chars = list(code)
    for i in range(len(chars) - 1, 0, -1):
        if chars[i].isdigit() and chars[i - 1].isdigit() and chars[i] != chars[i - 1]:
            chars[i - 1], chars[i] = chars[i], chars[i - 1]
            return "".join(chars)
    raise ValueError(f"no digits to swap in {code}")


def corrupt_version(version: str, avoid: str) -> str:
    parts = version.split(".")
    for bump in (3, 4, 5):
        candidate = ".".join([*parts[:-1], str(int(parts[-1]) + bump)])
        if candidate != avoid:
            return candidate
    raise ValueError(version)


def corrupt_path(path: str) -> str:
    if "/log/" in path:
        return path.replace("/log/", "/logs/", 1)
    if "\\Logs\\" in path:
        return path.replace("\\Logs\\", "\\Log\\", 1)
    if "-" in path:
        return path.replace("-", "_", 1)
    raise ValueError(path)


def eligible(sc: Scenario, clean: str, variant: str) -> bool:
    if variant == "error":
        digits = {c for c in sc["error"] if c.isdigit()}
        return len(digits) >= 2 and sc["error"] in clean
    if variant == "version":
        return bool(re.search(rf"{re.escape(sc['version'])}\b", clean))
    if variant == "flag":
        return bool(re.search(rf"`[^`]* {re.escape(sc['wrong_flag']['from'])}\b", clean))
    if variant == "path":
        return sc["log"] in clean
    return True


def corrupted_answer(sc: Scenario, clean: str, variant: str) -> tuple[str, dict[str, str]]:
    if variant == "error":
        old, new = sc["error"], corrupt_code(sc["error"])
    elif variant == "version":
        old, new = sc["version"], corrupt_version(sc["version"], sc["fixed_version"])
    elif variant == "flag":
        old, new = sc["wrong_flag"]["from"], sc["wrong_flag"]["to"]
        m = re.search(rf"`[^`]* {re.escape(old)}\b[^`]*`", clean)
        if m is None:
            raise ValueError(f"{old} is in no command of the answer; eligible() should say so")
        fixed = re.sub(rf" {re.escape(old)}\b", f" {new}", m.group(0), count=1)
        return clean[: m.start()] + fixed + clean[m.end() :], {"expected": old, "written": new}
    else:
        old, new = sc["log"], corrupt_path(sc["log"])
    return clean.replace(old, new, 1), {"expected": old, "written": new}


def invented_steps(sc: Scenario, rng: random.Random, n: int) -> list[str]:
    return [t.format(cli=sc.cli) for t in rng.sample(INVENTED[sc["family"]], n)]


def hallucinated_answer(
    sc: Scenario, clean: str, retrieval: str, rng: random.Random
) -> tuple[str, dict[str, str]]:
    if retrieval == "miss":
        steps = invented_steps(sc, rng, 2)
        cause = INVENTED_CAUSE.format(product=sc["product"])
        text = f"{sc['error']} is usually caused by {cause}.\n1. {steps[0]}\n2. {steps[1]}"
        return text, {"invented": " | ".join(steps)}
    (step,) = invented_steps(sc, rng, 1)
    if retrieval == "partial":
        text = f"{sc['error']} on {sc['product']} is caused by {sc['cause']}. {step}"
        return text, {"invented": step}
    lines = clean.split("\n")
    items = [i for i, line in enumerate(lines) if re.match(r"^(?:\d+\.|-) ", line)]
    if items:  # a list of steps: the invented step becomes one more item of it
        last = items[-1]
        number = re.match(r"^(\d+)\.", lines[last])
        marker = f"{int(number.group(1)) + 1}." if number else "-"
        lines.insert(last + 1, f"{marker} {step}")
        return "\n".join(lines), {"invented": step}
    return f"{clean} {step}", {"invented": step}


def repeated_answer(sc: Scenario, turn: int, style: str, clean: str) -> tuple[str, dict[str, str]]:
    """Puts back the step the user said they already tried, without acknowledging it."""
    t = sc["tried"]
    cmd = f": `{t['cmd']}`" if t.get("cmd") else "."
    first = f"First, {_low(t['imperative'])}{cmd}"
    detail = {"repeated": t["imperative"]}
    if turn < 2:
        return f"{first}\n{clean_answer(sc, turn, 'full', style, ack=False)}", detail
    return f"{clean} {first.replace('First, ', 'Meanwhile, ')}", detail


def inappropriate_answer(sc: Scenario, rng: random.Random) -> str:
    ask = " Could you provide more details about your environment?" if rng.random() < 0.5 else ""
    return (
        f"I'm sorry, but I don't have enough information to troubleshoot {sc['error']} on "
        f"{sc['product']}. Please contact Acme support for further assistance.{ask}"
    )


def off_topic_answer(other: Scenario, part: int) -> str:
    s, t = other.steps, other["tried"]
    if part == 2:
        tried = f" (`{t['cmd']}`)" if t.get("cmd") else ""
        return (
            f"To resolve this, {_low(t['imperative'])}{tried}. Then {_low(s[0].text)}: "
            f"`{s[0].cmd}`, and {_low(s[1].text)}: `{s[1].cmd}`. Logs are in {other['log']}."
        )
    return (
        f"To resolve this, {_low(s[2].text)}: `{s[2].cmd}`. Then {_low(s[3].text)}: "
        f"`{s[3].cmd}`. You can check the state with `{other['status_cmd']}`."
    )


def queries(sc: Scenario, rng: random.Random, t0_partial: bool) -> list[str]:
    """The user's three messages: how to fix it, what next, and a why or a vague follow-up."""
    t = sc["tried"]
    cmd = f" (`{t['cmd']}`)" if t.get("cmd") else ""
    q0 = rng.choice(T0_QUERIES).format(
        error=sc["error"],
        product=sc["product"],
        version=sc["version"],
        environment=sc["environment"],
        subject=sc["subject"],
        tried=t["gerund"],
        cmd=cmd,
    )
    s1, s2 = sc.steps[0].cmd, sc.steps[1].cmd
    how = f"found part 1 of {sc['kb']} myself and ran" if t0_partial else "ran"
    tail = "" if t0_partial else " as suggested"
    q1 = (
        f"I {how} `{s1}` and `{s2}`{tail}, but it still fails with {sc['error']}. "
        f"What should I try next?"
    )
    return [q0, q1, sc["t2_query"]]
