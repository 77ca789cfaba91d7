"""The learner's path, as the README gives it: only Python and pip, no make, no
maintainers' tools.

From a fresh clone of the committed repository: a new virtual environment, the README's
install line (``pip install -r requirements.txt -e .``), ``jupyter lab --version``, and
one chapter executed with ``jupyter nbconvert --execute`` -- the commands a learner runs
before ``jupyter lab chapters/``.
"""

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
INSTALL = "pip install -r requirements.txt -e ."
CHAPTER = "chapters/05_scaled_dot_product.ipynb"


def learner_section() -> str:
    match = re.search(
        r"^## Run the chapters on your computer\n(.*?)(?=^## )", README, re.M | re.S
    )
    assert match, "README needs a section '## Run the chapters on your computer'"
    return match.group(1)


def test_readme_gives_the_learner_commands_for_every_system():
    section = learner_section()
    for command in (
        "python3 -m venv .venv",  # Linux, macOS: a stock Debian/Ubuntu has no `python`
        "python -m venv .venv",  # Windows
        "source .venv/bin/activate",
        r".venv\Scripts\activate",
        INSTALL,
        "jupyter lab chapters/",
    ):
        assert command in section, f"README's learner section lacks {command!r}"
    assert "make" not in re.sub(r"`[^`]*`", "", section).split(), (
        "a learner's path needs no make"
    )


# A fresh virtual environment with every pin: `make long-tests` (and CI).
@pytest.mark.slow
def test_a_fresh_clone_runs_a_chapter_with_the_readme_commands(tmp_path):
    clone = tmp_path / "course"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        VIRTUAL_ENV=str(env_dir),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )

    def run(command: str, **kw):
        result = subprocess.run(
            command,
            shell=True,
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            **kw,
        )
        assert result.returncode == 0, (
            f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )
        return result.stdout

    run(
        f"python -m {INSTALL} --quiet"
    )  # the README's line, with the venv's python (= "activated")
    pinned = next(
        p
        for p in (clone / "requirements.txt").read_text().split()
        if p.startswith("jupyterlab==")
    )
    assert run("jupyter lab --version").strip() == pinned.split("==")[1]
    run(
        f"jupyter nbconvert --to notebook --execute {CHAPTER} --output-dir {tmp_path / 'out'} "
        "--ExecutePreprocessor.timeout=300"
    )
    assert (tmp_path / "out" / Path(CHAPTER).name).is_file()
    where = run('python -c "import attention_lib; print(attention_lib.__file__)"')
    assert str(clone) in where, (
        f"the chapter must run the clone's library (editable install), got {where}"
    )
