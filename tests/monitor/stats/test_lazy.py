from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monitor.stats.lazy import LazyModule


def test_lazy_module_imports_on_first_attribute_and_then_reuses_it() -> None:
    lazy = LazyModule("json")
    assert "not imported yet" in repr(lazy)
    assert lazy.dumps({"a": 1}) == json.dumps({"a": 1})
    assert "(imported)" in repr(lazy)
    assert lazy.loads is json.loads


def test_unknown_module_fails_on_use_with_the_import_error() -> None:
    lazy = LazyModule("monitor.no_such_module_here")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        _ = lazy.anything


def test_the_cli_does_not_import_scipy_or_sklearn_until_a_statistic_is_computed() -> None:
    # Every command module imported (as `casewatch --help` does): scipy.stats + scikit-learn
    # would be ~85 MB of RSS in a process that never computes a report. A fresh interpreter,
    # so nothing is cached.
    code = (
        "import sys, json\n"
        "import monitor.cli\n"
        "from monitor.commands import collect\n"
        "collect()\n"
        "before = sorted(m for m in ('scipy', 'sklearn') if m in sys.modules)\n"
        "from monitor.stats.agreement import band_agreement\n"
        "from monitor.stats.paired import rank_correlation\n"
        "a = band_agreement('m', ['none', 'minor', 'none'], ['none', 'minor', 'minor'])\n"
        "c = rank_correlation([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0])\n"
        "after = sorted(m for m in ('scipy', 'sklearn') if m in sys.modules)\n"
        "print(json.dumps([before, after, a.accuracy, c.spearman]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    before, after, accuracy, spearman = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == ["scipy", "sklearn"]
    assert accuracy == pytest.approx(2 / 3)
    assert spearman == pytest.approx(0.8)
