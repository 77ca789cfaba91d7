"""The Colab path, simulated.

Colab gets the library by running a chapter's first cell, which pip-installs it from
git, and runs that one notebook on its own. Here: a fresh virtual environment with only
what a Colab runtime already has (torch, matplotlib, numpy, ipykernel, and nbclient to
drive the kernel) -- no attention_lib, no course pins. We pretend to be Colab
(``google.colab`` in ``sys.modules``), point the chapter's install cell at this local
git repository instead of GitHub (no network here), and execute the chapter top to
bottom. The library that runs is the one installed by the notebook's own cell from the
committed ``HEAD``.
"""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "08_grouped_query.ipynb"
COLAB_RUNTIME = [
    "torch==2.13.0",
    "matplotlib",
    "numpy",
    "ipykernel",
    "nbclient",
    "nbformat",
]

RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
print("executed", len(nb.cells), "cells")
"""


# A fresh virtual environment with every pin: `make long-tests` (and CI).
@pytest.mark.slow
def test_chapter_runs_in_a_colab_like_environment(tmp_path):
    env_dir = tmp_path / "colab"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(
        pip + ["--upgrade", "pip"], check=True
    )  # Colab ships a current pip (23.2 cannot parse git+file)
    subprocess.run(pip + COLAB_RUNTIME, check=True)
    check = subprocess.run(
        [str(py), "-c", "import attention_lib"], capture_output=True, cwd=tmp_path
    )
    assert check.returncode != 0, (
        "the simulated Colab runtime must start without attention_lib"
    )

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    nb = nbformat.read(CHAPTER, as_version=4)
    install = nb.cells[[c.cell_type for c in nb.cells].index("code")]
    assert f"git+{url}" in install.source
    install.source = install.source.replace(f"git+{url}", f"git+file://{ROOT}")
    pretend = nbformat.v4.new_code_cell(
        'import sys, types\nsys.modules["google.colab"] = types.ModuleType("google.colab")'
    )
    nb.cells.insert(nb.cells.index(install), pretend)
    work = tmp_path / "run"
    work.mkdir()
    nbformat.write(nb, work / CHAPTER.name)

    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env["JUPYTER_PATH"] = str(env_dir / "share" / "jupyter")
    result = subprocess.run(
        [str(py), "-c", RUNNER, str(work / CHAPTER.name), str(work)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    installed = subprocess.run(
        [str(py), "-m", "pip", "show", "attention-lib"], capture_output=True, text=True
    )
    assert "Name: attention-lib" in installed.stdout, (
        "the notebook's own cell should have installed the library"
    )
    shown = subprocess.run(
        [
            str(py),
            "-c",
            "import attention_lib, json; print(json.dumps(attention_lib.__file__))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert str(env_dir) in json.loads(shown.stdout), (
        "attention_lib must come from the Colab venv, not the checkout"
    )
    assert sys.executable not in shown.stdout
