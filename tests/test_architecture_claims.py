"""The claims of ARCHITECTURE.md that a machine can check, checked against the code.

The layers themselves are ``tests/test_import_layers.py``'s; kafka-python's private names
(every one the ``consumers/_kafka*.py`` modules use is listed, and each resolves on the pinned
library) are ``tests/consumers/test_kafka_workarounds.py``'s. This module checks the rest: the
modules and names the document cites exist, its layer table is the test's, who builds the
stream's steps, that ``stats/`` is pure, which modules speak HTTP or import OpenTelemetry's
underscore modules, which functions still read ``Settings``, which test module imports
another, that only ``consumers/_kafka.py`` imports kafka-python, that the commit step alone
marks offsets done, that child processes start through ``monitor/runtime/processes.py``, and that no
finalizer closes a resource. A claim changed in the code fails here until the document says it
too (or back).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "ARCHITECTURE.md").read_text()
PRODUCT = ("monitor", "consumers")


def _modules(*packages: str) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def _imports(tree: ast.Module) -> Iterator[str]:
    """Every module an import statement names (lazy and ``TYPE_CHECKING`` ones included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _repository_files() -> list[str]:
    skip = {".venv", ".git", "node_modules", "site", "__pycache__"}
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*")
        if not skip & set(p.relative_to(ROOT).parts)
    ]


def _cited_paths() -> set[str]:
    """Paths in backticks: ``stream/runner.py``, ``tests/fixtures/``, ``rules/x.yml``."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", DOC):
        path = token.split("::")[0]
        placeholder = re.search(r"NAME|NNNN", path)
        if not placeholder and re.fullmatch(
            r"[\w./-]+\.(py|md|yml|yaml|toml|json)|[\w./-]+/", path
        ):
            found.add(path)
    return found


def _resolve(path: str, files: list[str]) -> bool:
    """The document names a path from the repository root, from ``monitor/`` or
    ``consumers/``, or by its last parts (``group_consumer.py``, ``config/kafka.py``)."""
    path = path.rstrip("/")
    return any(f == path or f.endswith("/" + path) for f in files)


def test_every_path_the_document_names_exists() -> None:
    files = _repository_files()
    missing = sorted(p for p in _cited_paths() if not _resolve(p, files))
    assert len(_cited_paths()) > 100  # the scan reads the document
    assert missing == []


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def test_every_module_attribute_the_document_names_is_defined_there() -> None:
    """``stats/detector_state.DetectorState``, ``consumers/_kafka.PRIVATE_ATTRIBUTES``,
    ``tests/support/waiting.wait_for``: the module exists and defines the name."""
    files = [f for f in _repository_files() if f.endswith(".py")]
    cited = {
        (module, name)
        for module, name in re.findall(r"`((?:\w+/)+\w+)\.([A-Za-z_]\w*)`", DOC)
        if name not in {"py", "md", "yml", "yaml", "toml", "json"}
    }
    assert len(cited) > 10
    wrong = []
    for module, name in sorted(cited):
        paths = [f for f in files if f == f"{module}.py" or f.endswith(f"/{module}.py")]
        if not paths:
            wrong.append(f"{module}.py does not exist")
        elif not any(name in _top_level_names(ROOT / p) for p in paths):
            wrong.append(f"{module}.py defines no {name}")
    assert wrong == []


def _test_layers() -> list[set[str]]:
    tree = ast.parse((ROOT / "tests" / "test_import_layers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "LAYERS":
            assert node.value is not None
            return [set(groups) for groups in ast.literal_eval(node.value)]
    raise AssertionError("tests/test_import_layers.py has no LAYERS")


def _doc_layers() -> list[set[str]]:
    section = DOC.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", section, re.MULTILINE)
    assert [int(n) for n, _ in rows] == list(range(len(rows)))
    return [
        {g if g in PRODUCT else f"monitor.{g}" for g in re.findall(r"`([\w.]+)`", groups)}
        for _, groups in rows
    ]


def test_the_layer_table_is_the_layer_test() -> None:
    assert _doc_layers() == _test_layers()


def test_stats_sits_under_every_group_that_does_io() -> None:
    layers = _test_layers()
    stats = next(i for i, groups in enumerate(layers) if "monitor.stats" in groups)
    for group in ("monitor.storage", "monitor.judging", "consumers", "monitor.otel_export"):
        assert next(i for i, groups in enumerate(layers) if group in groups) > stats, group


# What a pure statistic may import: the standard library's computing modules, the numeric
# libraries, and of casewatch the schema (the turn's and the case's models), the scoring, the
# exception tree and a section's settings (pure pydantic), never the root settings.
STATS_MAY_IMPORT = re.compile(
    r"(__future__|array|bisect|collections|dataclasses|datetime|enum|fractions|functools"
    r"|hashlib|heapq|importlib|itertools|math|random|re|statistics|types|typing|warnings"
    r"|numpy|scipy|sklearn)(\..*)?"
    r"|monitor|monitor\.(schema|scoring|errors|stats)(\..*)?"
    r"|monitor\.config(\.(?!settings\b)\w+)?(\..*)?"
)


def test_stats_imports_no_store_judge_report_or_io() -> None:
    """ "``stats/`` is numbers in, numbers out": no store, judge, intake, report, file or
    network module, and no ``open``."""
    wrong = []
    for path, tree in _modules("monitor/stats"):
        wrong += [
            f"{path} imports {m}" for m in _imports(tree) if not STATS_MAY_IMPORT.fullmatch(m)
        ]
        wrong += [
            f"{path}:{node.lineno} calls open"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "open"
        ]
    assert wrong == []


def _step_classes() -> set[str]:
    """The stream's steps: the classes of ``stream/steps/`` with the four calls of
    ``ProcessingStep``."""
    steps = set()
    for _, tree in _modules("monitor/stream/steps"):
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                protocol = any(ast.unparse(b).startswith("Protocol") for b in node.bases)
                if {"submit", "poll", "join", "close"} <= methods and not protocol:
                    steps.add(node.name)
    return steps


def _called_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _step_constructions(steps: set[str]) -> dict[str, set[str]]:
    """Per product module, the step classes it builds: called, or handed to ``partial``."""
    built: dict[str, set[str]] = {}
    for path, tree in _modules(*PRODUCT):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node.func)
            if name == "partial" and node.args:
                name = _called_name(node.args[0])
            if name in steps:
                built.setdefault(path, set()).add(name)
    return built


def test_only_the_two_builders_and_the_batch_runner_build_steps() -> None:
    """``build_turn_steps`` and ``build_pipeline`` are the only places that know the concrete
    steps; ``casewatch judge``'s runner adds only a commit step of its own; the screening
    processes compose none."""
    steps = _step_classes()
    assert {"DecodeStep", "JudgeStep", "CommitStep", "ScreenStep"} <= steps
    built = _step_constructions(steps)
    assert set(built) == {
        "monitor/stream/turn_steps.py",
        "monitor/stream/pipeline.py",
        "monitor/batch/runner.py",
    }
    assert built["monitor/batch/runner.py"] == {"CommitStep"}
    assert set().union(*built.values()) == steps  # every step is built by one of them


# Who may import an HTTP client library (ARCHITECTURE.md, "Judge"): the transport of judges
# and assistants, the OTLP log export, the demo's local Prometheus stack.
HTTP_CLIENTS = {
    "openai": {
        "monitor/judging/http_transport.py",
        # types and exception classes only; the client is built by the transport
        "monitor/judging/chat_endpoint.py",
        "monitor/judging/chat_options.py",
        "monitor/judging/openai_judge.py",
    },
    "httpx": set(),  # the transport builds openai's own httpx client
    "requests": {
        "monitor/otel_export/sender.py",
        "monitor/annotation/label_studio.py",
        "monitor/annotation/label_studio_server.py",
    },
    "urllib.request": {"monitor/demo/prometheus_api.py"},
    "urllib3": set(),
    "http.client": set(),
    "aiohttp": set(),
}


def test_http_is_spoken_where_the_document_says() -> None:
    found: dict[str, set[str]] = {lib: set() for lib in HTTP_CLIENTS}
    clients: set[str] = set()
    for path, tree in _modules(*PRODUCT):
        for module in _imports(tree):
            for lib in HTTP_CLIENTS:
                if module == lib or module.startswith(lib + "."):
                    found[lib].add(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node.func) in {"OpenAI", "Client"}:
                clients.add(path)
    assert found == HTTP_CLIENTS
    assert clients == {"monitor/judging/http_transport.py"}


def test_opentelemetry_underscore_modules_only_in_the_evaluation_sender() -> None:
    users = {
        path
        for path, tree in _modules(*PRODUCT)
        for module in _imports(tree)
        if module.startswith("opentelemetry") and any(p.startswith("_") for p in module.split("."))
    }
    assert users == {"monitor/otel_export/sender.py"}


# Where Settings is read by design: the commands and the entry point load it, the settings
# module defines it, and the demo rewrites it for its own stack.
SETTINGS_READERS_BY_DESIGN = (
    "monitor/commands/",
    "monitor/cli.py",
    "monitor/config/settings.py",
    "monitor/demo/",
)


def test_every_function_taking_settings_is_named_in_the_document() -> None:
    """ "What still reads ``Settings``": the list is whole. A function taking ``Settings`` is
    named there, or its module is (``stream/run_summary.py``), or it is a private piece or the
    constructor of a module whose public reader is named (``_build_jobs`` of ``build_jobs``)."""
    section = DOC.split("What still reads `Settings`", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(?:\w+\.)?(\w+)`", section))
    takers: list[tuple[str, str]] = []
    for path, tree in _modules(*PRODUCT):
        if path.startswith(SETTINGS_READERS_BY_DESIGN):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                if any(
                    a.annotation is not None and ast.unparse(a.annotation) == "Settings"
                    for a in args
                ):
                    takers.append((path, node.name))
    assert ("monitor/jobs/build.py", "build_jobs") in takers
    modules_named = {
        p for p, n in takers if n in named or f"`{p.removeprefix('monitor/')}`" in section
    }
    unnamed = [
        f"{path}: {name}"
        for path, name in takers
        if name not in named
        and f"`{path.removeprefix('monitor/')}`" not in section
        and not (name.startswith("_") and path in modules_named)
    ]
    assert unnamed == []


def test_only_the_kafka_wrapper_imports_kafka_python() -> None:
    """ "The only modules reaching into kafka-python are ``consumers/_kafka*.py``": the library
    is imported by ``_kafka.py`` alone, which re-exports what the others use."""
    users = {
        path
        for path, tree in _modules(*PRODUCT)
        for module in _imports(tree)
        if module == "kafka" or module.startswith("kafka.")
    }
    assert users == {"consumers/_kafka.py"}


def test_the_commit_step_alone_marks_offsets_done() -> None:
    """ "The commit step is the only place offsets are marked done": ``OffsetTracker.done`` is
    called from ``stream/steps/commit.py`` only."""
    callers = {
        path
        for path, tree in _modules(*PRODUCT)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "done"
        and "tracker" in ast.unparse(node.func.value)
    }
    assert callers == {"monitor/stream/steps/commit.py"}


# The tests that start a child with ``subprocess.Popen`` themselves, and why it cannot be
# ``spawn_logged`` (which sends stdout and stderr to a log and starts a session of its own).
POPEN_IN_TESTS = {
    # the helper's own test: a parent process whose death must take its child along
    "tests/monitor/runtime/test_processes.py": "tests the helper itself",
    # the DevTools protocol runs on descriptors 3 and 4 (it takes ``parent_death_hook``)
    "tests/support/chromium.py": "descriptors of its own",
    # they read what the command prints on stdout / stderr, as a person or a script would
    "tests/test_fake_judge_server.py": "reads the base_url line it prints",
    "tests/monitor/demo/test_run.py": "reads the demo's own stdout and stderr",
    "tests/monitor/stream/test_runner.py": "reads what the stopped daemon prints",
    "tests/monitor/commands/test_printed_commands.py": "reads the broker's printed lines",
    "tests/monitor/commands/test_try_it.py": "reads the broker's printed lines",
    # Ctrl-C as from a terminal: SIGINT to a child of the test's session, its output read
    "tests/monitor/commands/test_batch_judge_down.py": "SIGINT as a terminal sends it",
    "tests/monitor/commands/test_judging_interrupt.py": "SIGINT as a terminal sends it",
}


def test_child_processes_start_through_monitor_processes() -> None:
    """Child processes start through ``monitor/runtime/processes.py`` (which ties them to their
    parent); the screening workers are ``multiprocessing``'s own, not programs. In the tests
    too, but for the few listed in ``POPEN_IN_TESTS`` with why; a command a test runs to its
    end (``subprocess.run``) ends before the test does and is not a child left behind."""
    spawn = {"subprocess.Popen", "subprocess.run", "subprocess.call", "os.fork", "os.execv"}

    def spawners(packages: tuple[str, ...], calls: set[str]) -> set[str]:
        return {
            path
            for path, tree in _modules(*packages)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and ast.unparse(node.func) in calls
        }

    assert spawners(PRODUCT, spawn) == {"monitor/runtime/processes.py"}
    started = spawners(("tests",), spawn - {"subprocess.run", "subprocess.call"})
    assert started == set(POPEN_IN_TESTS)


def test_no_finalizer_closes_for_a_forgetful_owner() -> None:
    """ "No finalizer closes for a forgetful owner": whoever opens a resource closes it, so no
    ``weakref.finalize`` and no ``__del__`` in the product."""
    found = [
        f"{path}:{node.lineno}"
        for path, tree in _modules(*PRODUCT)
        for node in ast.walk(tree)
        if (isinstance(node, ast.FunctionDef) and node.name == "__del__")
        or (isinstance(node, ast.Call) and _called_name(node.func) == "finalize")
    ]
    assert found == []


def test_every_class_member_the_document_names_exists() -> None:
    """``Pipeline.wait_progress``, ``KafkaTurnSource.poll``, ``Daemon._tick``: a class of that
    name in the product defines the member."""
    members: dict[str, set[str]] = {}
    for _, tree in _modules(*PRODUCT):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own = members.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        own.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        own.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        own |= {t.id for t in item.targets if isinstance(t, ast.Name)}
    cited = set(re.findall(r"`([A-Z]\w*)\.([a-z_]\w*)`", DOC))
    assert len(cited) > 10
    assert sorted(f"{c}.{m}" for c, m in cited if m not in members.get(c, set())) == []
