"""scripts/newcomer-check.sh, the new user's documented paths end to end, cannot rot: its quick
part (the messages a mistake gets: a typo in a key, a bad environment value, a broken mapping,
no broker, a file with nothing judgeable) runs here on every suite run; the whole script (the
demo's printed links and commands, the site, the recipe tests) is run by hand or in CI:
`bash scripts/newcomer-check.sh`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "newcomer-check.sh"


def test_the_quick_newcomer_check_passes() -> None:
    venv = Path(sys.executable).parent.parent
    result = subprocess.run(
        ["bash", str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "VENV": str(venv)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    checks = [line for line in result.stdout.splitlines() if line.startswith("ok: ")]
    assert len(checks) == 6, result.stdout
    assert "FAIL" not in result.stdout + result.stderr
