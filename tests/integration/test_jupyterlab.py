"""Every chapter in real JupyterLab -- the README's own path -- as a learner opens it.

The pinned JupyterLab (from .venv) is started on a free localhost port, without a token,
in a temporary folder that holds copies of the chapters (no figures/ folder, as in a
download: a notebook must carry its diagrams). Headless Chromium opens one notebook after
another in the same JupyterLab page (no kernel is started: nothing is executed, the
stored outputs are shown) and the test fails on

* an image that did not load (``naturalWidth == 0``; JupyterLab renders no SVG cell
  attachment, so the diagrams are PNG attachments),
* raw markup: markdown that JupyterLab shows as text (``<details>``, ``![...](...)``, MyST's
  ``{cite}`` or ``:::``),
* an answer shown before the reader opens it: a solution (a ``hide-cell`` code cell) whose
  code or output is visible, or an explanation (``<details class="explanation">``) that
  is open or shows its text,
* a notebook that JupyterLab changes by opening it: marked modified, or metadata that its
  model holds otherwise than the file (it would save them, and autosave does).

The Chinese notebooks (chapters/zh_CN/, tools/make_zh_notebooks.py) are opened in the same
JupyterLab page after the English ones, with the same checks, and they must show Chinese:
mostly Chinese prose, diagrams with Chinese alt text, the explanations' labels in Chinese.

nbconvert (tests/test_portable.py) renders attachments JupyterLab does not, which is why
this test drives JupyterLab itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from make_test_share import CHAPTERS_IN_MAKE_TEST

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
ZH_CHAPTERS = sorted((ROOT / "chapters" / "zh_CN").glob("*.ipynb"))
JUPYTER = Path(sys.executable).parent / "jupyter"
# A chapter is about 7 s of one worker: make test opens three (tests/make_test_share.py),
# make long-tests (CI) the ten others and the Chinese ones.
IN_MAKE_TEST = CHAPTERS_IN_MAKE_TEST

# Every cell rendered (JupyterLab 4 otherwise renders only the cells in view), no kernel
# shut-down prompts, no announcements fetched from the network.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "kernelShutdown": True,
    },
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

# In the page: open one notebook (no kernel) and report what a learner sees.
OPEN_AND_INSPECT = """async (path) => {
    const app = window.jupyterapp;
    const factory = app.docRegistry.getWidgetFactory('Notebook');
    factory._preferKernel = false;  // show the stored outputs; start no kernel
    factory._canStartKernel = false;
    await app.commands.execute('application:close-all');
    const widget = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    await widget.context.ready;
    await widget.revealed;
    const notebook = widget.content;
    const cells = notebook.widgets;
    // markdown rendered and images decoded (attachments become blob: URLs)
    const deadline = Date.now() + 20000;
    // (a cell is "rendered" before its text is in: the first notebook waits for the
    // markdown parser to load)
    const empty = (c) => c.model.sharedModel.getSource().trim()
        && !(c.node.querySelector('.jp-RenderedMarkdown')?.textContent || '').trim();
    const pending = () => cells.filter(c => c.model.type === 'markdown'
                                            && (!c.rendered || empty(c))).length
        + [...notebook.node.querySelectorAll('img')].filter(i => !i.complete).length;
    while (pending() && Date.now() < deadline) await new Promise(r => setTimeout(r, 100));
    await new Promise(r => setTimeout(r, 200));
    // checkVisibility: false inside a closed <details> (its content is content-visibility:
    // hidden, yet still laid out) and under display: none
    const visible = (e) => !!e && e.checkVisibility({contentVisibilityAuto: true,
                                                     visibilityProperty: true});
    const images = [...notebook.node.querySelectorAll('img')].map(i => ({
        src: (i.getAttribute('src') || '').slice(0, 40), alt: (i.alt || '').slice(0, 80),
        ok: i.complete && i.naturalWidth > 0, markdown: !!i.closest('.jp-MarkdownCell')}));
    const markdown = cells.filter(c => c.model.type === 'markdown')
        .map(c => c.node.querySelector('.jp-RenderedMarkdown')?.textContent || '').join(' ');
    const prose = {cjk: (markdown.match(/[\u3400-\u9fff]/g) || []).length,
                   latin: (markdown.match(/[A-Za-z]/g) || []).length};
    const summaries = [...notebook.node.querySelectorAll('summary')]
        .map(s => s.textContent.trim());
    const raw = [];
    const shown = [];
    cells.forEach((cell, index) => {
        if (cell.model.type === 'markdown') {
            const text = cell.node.querySelector('.jp-RenderedMarkdown')?.textContent || '';
            for (const bad of ['<details', '</details', '<summary', '![', '](attachment:',
                               '{cite}', ':::', '```{']) {
                if (text.includes(bad)) raw.push({index, bad, text: text.slice(0, 80)});
            }
            cell.node.querySelectorAll('details').forEach(d => {
                const body = [...d.children].filter(c => c.tagName !== 'SUMMARY');
                if (d.open || body.some(visible)) {
                    shown.push({index, what: 'explanation', text: d.innerText.slice(0, 80)});
                }
            });
        }
        const tags = cell.model.getMetadata('tags') || [];
        if (cell.model.type === 'code' && tags.includes('hide-cell')) {
            const code = cell.node.querySelector('.jp-InputArea-editor');
            const outputs = [...cell.node.querySelectorAll('.jp-OutputArea-output')];
            if (visible(code)) shown.push({index, what: 'solution code'});
            if (outputs.some(visible)) {
                shown.push({index, what: 'solution output',
                            text: outputs.map(o => o.innerText).join(' ').slice(0, 80)});
            }
        }
    });
    // what JupyterLab would save: the notebook's and each cell's metadata as its model
    // holds them once opened (it adds what it finds missing, e.g. a folded cell's collapsed)
    const model = widget.context.model.toJSON();
    const saved = {metadata: model.metadata, cells: model.cells.map(c => c.metadata),
                   dirty: widget.context.model.dirty};
    // chapter 11's head explorer, stored untrusted: its static picture shows, its
    // (script-built) interface does not, and its note says how to make it interactive
    const explorers = [...notebook.node.querySelectorAll('.attention-explorer')].map(e => {
        const img = e.querySelector('.ae-static img');
        return {picture: visible(img) && img.complete && img.naturalWidth > 0,
                ui: visible(e.querySelector('.ae-ui')),
                note: (e.querySelector('.ae-note')?.innerText || '').slice(0, 120)};
    });
    return {cells: cells.length, images, raw, shown, prose, summaries, saved, explorers,
            unrendered: cells.filter(c => c.model.type === 'markdown' && !c.rendered).length};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """The pinned JupyterLab serving copies of the chapters; yields its URL."""
    home = tmp_path_factory.mktemp("jupyterlab")
    work = home / "chapters"
    work.mkdir()
    for path in CHAPTERS:
        shutil.copy(path, work / path.name)
    (work / "zh_CN").mkdir()
    for path in ZH_CHAPTERS:
        shutil.copy(path, work / "zh_CN" / path.name)
    settings = home / "settings"
    for name, values in SETTINGS.items():
        target = settings / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    # Formulas are not what this test checks: JupyterLab's MathJax, the bulk of its work
    # on a chapter, is switched off (the markdown still renders; math stays TeX).
    labconfig = home / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/mathjax-extension": True}})
    )
    port = free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    log = open(home / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [
            str(JUPYTER),
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={work}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.news_url=None",
            "--LabApp.extension_manager=readonly",  # no PyPI look-ups
            "--allow-root",  # CI containers run as root
        ],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "JupyterLab did not start:\n"
                        + (home / "jupyterlab.log").read_text()[-2000:]
                    )
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def lab(browser, jupyterlab):
    """One JupyterLab page for every notebook, English and Chinese (loading JupyterLab in
    the browser is the slow part); yields (page, problems seen by its listeners)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    problems = []
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and "render" in m.text.lower()
            and problems.append(f"console error: {m.text[:200]}")
        ),
    )
    try:
        page.goto(f"{jupyterlab}/lab?reset", wait_until="load", timeout=60_000)
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.started", timeout=60_000
        )
        page.evaluate("() => window.jupyterapp.restored")
        yield page, problems
    finally:
        context.close()


def inspect(page, path: str) -> tuple[dict, list[str]]:
    """Open ``path`` (relative to the served chapters/) and list what is wrong."""
    seen = page.evaluate(OPEN_AND_INSPECT, path)
    if os.environ.get("COURSE_JLAB_DEBUG"):
        print(path, time.strftime("%X"), seen["images"][:3], seen["prose"])
    problems = []
    assert seen["cells"] > 10, f"{path}: JupyterLab shows {seen['cells']} cells"
    if seen["unrendered"]:
        problems.append(f"{path}: {seen['unrendered']} markdown cells not rendered")
    broken = [i for i in seen["images"] if not i["ok"]]
    if broken:
        problems.append(f"{path}: images that did not load: {broken[:3]}")
    if not any(
        i["ok"] and i["src"].startswith(("blob:", "data:image/png"))
        for i in seen["images"]
    ):
        problems.append(f"{path}: no diagram shown: {seen['images'][:4]}")
    if seen["raw"]:
        problems.append(f"{path}: raw markup shown: {seen['raw'][:3]}")
    if seen["shown"]:
        problems.append(f"{path}: answers shown before opened: {seen['shown'][:3]}")
    stored = (ROOT / "chapters" / path).read_text(encoding="utf-8")
    expected = stored.count('class=\\"attention-explorer ')
    if len(seen["explorers"]) != expected:
        problems.append(
            f"{path}: {len(seen['explorers'])} head explorers shown, {expected} stored"
        )
    for e in seen["explorers"]:
        if not e["picture"] or e["ui"] or not e["note"]:
            problems.append(f"{path}: an untrusted head explorer shows {e}")
    problems += changed_by_opening(path, seen["saved"])
    return seen, problems


def changed_by_opening(path: str, saved: dict) -> list[str]:
    """Opening a chapter must not modify it (a contributor who only read chapters found
    them all in ``git status``): the metadata JupyterLab holds once it has opened the
    notebook -- and would save -- is the stored metadata. (The kernelspec JupyterLab writes
    once a kernel starts, which this test does not start, is tests/test_portable.py's.)"""
    stored = json.loads((ROOT / "chapters" / path).read_text(encoding="utf-8"))
    # the server drops what is transient before it writes (nbformat's strip_transient)
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        saved["metadata"].pop(key, None)
    for metadata in saved["cells"]:
        metadata.pop("trusted", None)
    if saved["dirty"]:
        return [f"{path}: marked modified as soon as it was opened"]
    if saved["metadata"] != stored["metadata"]:
        return [f"{path}: JupyterLab changes the notebook's metadata on opening it"]
    changed = [
        f"cell {i}: {sorted(set(now) ^ set(c['metadata']))} "
        f"{[k for k in now if now.get(k) != c['metadata'].get(k)][:3]}"
        for i, (now, c) in enumerate(zip(saved["cells"], stored["cells"]))
        if now != c["metadata"]
    ]
    if changed:
        return [
            f"{path}: JupyterLab changes cell metadata on opening it, so saving it "
            f"rewrites the file (python tools/hide_answers.py): {changed[:3]}"
        ]
    return []


def test_chapters_in_jupyterlab(lab):
    page, problems = lab
    before = len(problems)
    version = subprocess.run(
        [str(JUPYTER), "lab", "--version"], capture_output=True, text=True
    ).stdout.strip()
    pinned = [
        line.split("==")[1].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("jupyterlab==")
    ]
    assert pinned == [version], (
        f"JupyterLab {version} runs, requirements.txt pins {pinned}"
    )
    found = []
    for path in CHAPTERS:
        if path.name.startswith(IN_MAKE_TEST):
            found += inspect(page, path.name)[1]
    found += problems[before:]
    assert not found, "\n".join(found)


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST)
def test_every_other_chapter_in_jupyterlab(lab):
    page, problems = lab
    before = len(problems)
    found = []
    for path in CHAPTERS:
        if not path.name.startswith(IN_MAKE_TEST):
            found += inspect(page, path.name)[1]
    found += problems[before:]
    assert not found, "\n".join(found)


CJK = re.compile(r"[\u3400-\u9fff]")


# The twelve Chinese notebooks (~70 s): make long-tests (CI); make test opens the English ones
@pytest.mark.slow
def test_every_chinese_chapter_in_jupyterlab(lab):
    """chapters/zh_CN/: the same checks, and what the learner reads is Chinese."""
    page, problems = lab
    before = len(problems)
    assert [p.name for p in ZH_CHAPTERS] == [p.name for p in CHAPTERS], (
        "a chapter without its Chinese notebook: make zh-notebooks"
    )
    found = []
    for path in ZH_CHAPTERS:
        name = f"zh_CN/{path.name}"
        seen, wrong = inspect(page, name)
        found += wrong
        prose = seen["prose"]
        if prose["cjk"] < 0.3 * prose["latin"]:
            found.append(f"{name}: the text is mostly not Chinese: {prose}")
        english_alt = [
            i["alt"]
            for i in seen["images"]
            if i["markdown"] and not CJK.search(i["alt"])
        ]
        if english_alt:
            found.append(
                f"{name}: images without a Chinese alt text: {english_alt[:3]}"
            )
        english_summary = [t for t in seen["summaries"] if not CJK.search(t)]
        if english_summary:
            found.append(f"{name}: English labels of answers: {english_summary[:3]}")
    found += problems[before:]
    assert not found, "\n".join(found)
