"""A small reader of the repository's Dockerfile and .dockerignore (no container runtime here):
its stages, instructions, COPY sources and final ENTRYPOINT/USER."""

from __future__ import annotations

import fnmatch
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name or self.base} has no {keyword}"
        return found[-1]


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    return lines


def stages(path: Path = DOCKERFILE) -> list[Stage]:
    args: dict[str, str] = {}
    result: list[Stage] = []
    for line in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG" and not result:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            parts = rest.split()
            base = parts[0]
            for name, value in args.items():
                base = base.replace(f"${{{name}}}", value).replace(f"${name}", value)
            alias = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            result.append(Stage(base=base, name=alias))
        else:
            assert result, f"{keyword} before FROM"
            result[-1].instructions.append((keyword, rest))
    return result


def runtime_entrypoint() -> list[str]:
    """The final stage's ENTRYPOINT (exec form)."""
    entrypoint: list[str] = json.loads(stages()[-1].last("ENTRYPOINT"))
    return entrypoint


def copy_sources(stage: Stage) -> list[tuple[str, str]]:
    """(source, destination) of the stage's COPY instructions from the build context."""
    pairs: list[tuple[str, str]] = []
    for arg in stage.all("COPY"):
        words = [w for w in shlex.split(arg) if not w.startswith("--")]
        assert not any(w.startswith("--from") for w in shlex.split(arg))
        *sources, dest = words
        pairs.extend((src, dest) for src in sources)
    return pairs


def ignore_patterns(path: Path = DOCKERIGNORE) -> list[str]:
    return [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether the build context leaves out ``relative`` (a path relative to the context).

    The patterns used here: names at the top (`tests`), globs (`*.db`) and `**/` prefixes.
    """
    parts = relative.split("/")
    for pattern in patterns:
        if pattern.startswith("**/"):
            tail = pattern[3:]
            if any(fnmatch.fnmatch(part, tail) for part in parts):
                return True
        else:
            # A pattern matches a path or any of its parent directories.
            for i in range(1, len(parts) + 1):
                if fnmatch.fnmatch("/".join(parts[:i]), pattern):
                    return True
    return False
