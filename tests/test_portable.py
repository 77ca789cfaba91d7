"""A chapter opened alone -- downloaded, or in Colab -- reads as it does on the website.

Each notebook is copied alone into an empty folder (no ``figures/``, no ``book/``, no
Sphinx) and rendered by ``jupyter nbconvert --to html``, which draws markdown and
attachments as Jupyter and Colab do. The test fails on

* an image whose source is not inside the notebook (a relative path that is not there),
* a markdown image or diagram without an alt text that says what it shows,
* MyST syntax that only the website understands (``{cite}``, a ```` ```{ ```` directive,
  a ``:::`` fence), which Jupyter shows as raw text,
* an answer shown before the reader opens it: a solution (a ``hide-cell`` code cell) must
  carry ``jupyter.source_hidden`` and ``jupyter.outputs_hidden`` (JupyterLab folds its code
  and its output) and ``cellView: form`` (Colab), and a markdown explanation right after it
  must sit in a closed ``<details>`` (``tools/hide_answers.py`` writes all of these), and
  in the page nbconvert writes -- which honours none of that metadata -- the solution cell
  must follow the toggle cell that hides it while closed (its ``<style>`` and its closed
  ``<details class="course-answer">``); tests/integration/test_nbconvert.py opens the
  pages in Chromium and checks that no solution's code or output is visible before its
  toggle is opened, and that both are after,
* a code line over 88 columns (the code column of the website, Colab and print).

Plots (cell outputs) are PNG images; Jupyter and nbconvert have no place for their alt
text, which the website takes from the cell metadata (tests/test_diagrams.py checks it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from make_test_share import CHAPTERS_IN_MAKE_TEST, in_make_test

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import hide_answers  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
WIDTH = 88


class Cells(HTMLParser):
    """nbconvert's cells (``<div class="jp-Cell ...">``) in order: their classes, the
    ``<details>`` each holds (attributes) and the raw text of their ``<style>``s."""

    def __init__(self):
        super().__init__()
        self.cells: list[dict] = []
        self.depth = 0  # open <div>s inside the current cell; 0 outside a cell
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "div" and not self.depth and "jp-Cell" in classes:
            self.cells.append({"classes": classes, "details": [], "style": ""})
            self.depth = 1
            return
        if not self.depth:
            return
        if tag == "div":
            self.depth += 1
        elif tag == "details":
            self.cells[-1]["details"].append(attrs)
        elif tag == "style":
            self.in_style = True

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False
        elif tag == "div" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.in_style and self.depth:
            self.cells[-1]["style"] += data


def closed_behind_toggle(html: str) -> list[str]:
    """What is wrong with how the page nbconvert wrote closes its solutions: each solution
    cell must come right after a toggle cell whose ``<style>`` is hide_answers.py's and
    whose ``<details class="course-answer">`` is closed."""
    parser = Cells()
    parser.feed(html)
    cells = parser.cells
    rule = hide_answers.TOGGLE.split("<style>")[1].split("</style>")[0]
    problems = []
    solutions = [i for i, c in enumerate(cells) if "celltag_hide-cell" in c["classes"]]
    for i in solutions:
        before = cells[i - 1] if i else {"details": [], "style": ""}
        toggles = [d for d in before["details"] if d.get("class") == "course-answer"]
        if not toggles:
            problems.append(f"HTML cell {i}: a solution with no toggle before it")
        elif (
            "open" in toggles[0]
            or "hidden" not in toggles[0]
            or toggles[0].get("style") != "display: none"
        ):
            problems.append(f"HTML cell {i}: its toggle {toggles[0]} is not closed")
        if before["style"] != rule:
            problems.append(f"HTML cell {i}: the toggle's <style> is not hide_answers'")
    if not solutions:
        problems.append("no solution cell (celltag_hide-cell) in the page")
    return problems


class Images(HTMLParser):
    """Every <img> tag's attributes, and all text."""

    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def render_alone(path: Path, tmp: Path) -> str:
    """What ``jupyter nbconvert --to html`` writes for the notebook copied alone into
    ``tmp`` (its HTMLExporter, in this process: one import of nbconvert for all chapters)."""
    from nbconvert import HTMLExporter

    lone = tmp / path.name
    shutil.copy(path, lone)
    html, _ = HTMLExporter().from_filename(str(lone))
    return html


# About 4.5 s a chapter: make test renders three (tests/make_test_share.py, the chapters
# JupyterLab opens there), make long-tests (CI) the ten others.
@pytest.mark.parametrize(
    "path",
    in_make_test(
        CHAPTERS,
        keep=[p for p in CHAPTERS if p.name.startswith(CHAPTERS_IN_MAKE_TEST)],
    ),
    ids=lambda p: p.stem,
)
def test_chapter_renders_alone(path, tmp_path):
    html = render_alone(path, tmp_path)
    parser = Images()
    parser.feed(html)
    markdown_images = 0
    for img in parser.images:
        src = img.get("src", "")
        if src.startswith("data:image/png;base64,") and "alt" not in img:
            continue  # a plot output: see the module docstring
        markdown_images += 1
        assert src.startswith("data:") or (tmp_path / src).is_file(), (
            f"{path.name}: image {src[:60]!r} is not inside the notebook"
        )
        alt = img.get("alt") or ""
        assert len(alt.split()) >= 6, f"{path.name}: image {src[:40]!r} alt {alt!r}"
    assert markdown_images >= 1, f"{path.name}: no diagram rendered"

    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for raw in ("{cite", "```{", ":::", "{ref}", "{numref}", "{doc}"):
                assert raw not in src, f"{path.name} cell {i}: MyST-only {raw!r}"
        else:
            if "hide-cell" in cell["metadata"].get("tags", []):
                jupyter = cell["metadata"].get("jupyter", {})
                for key in ("source_hidden", "outputs_hidden"):
                    assert jupyter.get(key) is True, (
                        f"{path.name} cell {i}: a solution without jupyter.{key}: "
                        "JupyterLab shows it open (python tools/hide_answers.py)"
                    )
                assert cell["metadata"].get("cellView") == "form", (
                    f"{path.name} cell {i}: a solution Colab shows open "
                    "(python tools/hide_answers.py)"
                )
            for line in src.splitlines():
                assert len(line) <= WIDTH, (
                    f"{path.name} cell {i}: {len(line)} columns: {line[:50]!r}..."
                )
    solutions = [i for i, c in enumerate(nb["cells"]) if hide_answers.is_solution(c)]
    if solutions:
        # nbconvert shows every cell's code and output: the toggle cell before each
        # solution hides it there (and only there) until it is opened.
        assert [i - 1 for i in solutions] == [
            i
            for i, c in enumerate(nb["cells"])
            if hide_answers.is_toggle(c) and "".join(c["source"]) == hide_answers.TOGGLE
        ], f"{path.name}: a solution without its toggle (python tools/hide_answers.py)"
        problems = closed_behind_toggle(html)
        assert not problems, f"{path.name}: " + "; ".join(problems[:3])
    unwrapped = hide_answers.unwrapped_explanations(nb)
    assert not unwrapped, (
        f"{path.name} cells {unwrapped}: the explanation of a solution shown open "
        "(python tools/hide_answers.py wraps it in <details>)"
    )
    explained = sum(
        hide_answers.OPEN in "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
    )
    assert html.count('<details class="explanation">') == explained, path.name
    # The rendered page shows no raw MyST either (e.g. from a raw cell).
    text = "".join(parser.text)
    assert "{cite}" not in text and "```{" not in text, path.name


def test_library_and_chapters_are_formatted():
    """``ruff format`` at 88 columns, and no line a formatter cannot wrap left long."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    targets = ["attention_lib", *[str(p.relative_to(ROOT)) for p in CHAPTERS]]
    fmt = subprocess.run(
        [ruff, "format", "--check", *targets], cwd=ROOT, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    lint = subprocess.run(
        [ruff, "check", "--select", "E501", "--output-format", "concise", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_every_cited_paper_is_in_the_bibliography():
    """Citations are plain links (they work in Jupyter and Colab); the website's
    bibliography page lists each of them, so each link's URL is an entry's url or doi."""
    import re

    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    known = set(re.findall(r"url\s*=\s*\{([^}]*)\}", bib))
    known |= {"https://doi.org/" + d for d in re.findall(r"doi\s*=\s*\{([^}]*)\}", bib)}
    link = re.compile(r"\]\((https://(?:arxiv\.org|doi\.org)/[^)\s]+)\)")
    missing = set()
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                missing |= {
                    (path.name, u) for u in link.findall("".join(cell["source"]))
                } - {(path.name, u) for u in known}
    assert not missing, sorted(missing)


# Formats the bibliography twice and reads every catalog (~30 s): make long-tests (CI)
@pytest.mark.slow
def test_citations_match_the_bibliography_labels():
    """The references page labels each entry as the chapters cite it ("Vaswani et al.,
    2017"; in the Chinese edition "Vaswani 等人，2017": book/_ext/course_bibstyle.py), so a
    reader finds a citation in the list: a citation link's text that names an author, in
    the English chapters and in the Chinese catalogs, starts with its entry's first author
    and gives its entry's year ("Ainslie et al. (2023)" and "Ainslie et al., 2023" both
    point at "Ainslie et al., 2023"; "DeepSeek-AI, 2024a" at "DeepSeek-AI, 2024a", never a bare
    "2024" where the list has a 2024a and a 2024b)."""
    import re

    from babel.messages.pofile import read_po
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import course_bibstyle

    db = parse_file(str(ROOT / "book" / "references.bib"))
    style = find_plugin("pybtex.style.formatting", "course_author_year")()

    def labels(language: str) -> dict[str, str]:
        course_bibstyle.language = language
        try:
            entries = list(style.format_entries(db.entries.values()))
        finally:
            course_bibstyle.language = "en"
        by_url = {}
        for entry in entries:
            fields = db.entries[entry.key].fields
            for url in (fields.get("url"), "https://doi.org/" + fields.get("doi", "")):
                by_url[url] = entry.label
        return by_url

    english, chinese = labels("en"), labels("zh_CN")
    assert english["https://arxiv.org/abs/1706.03762"] == "Vaswani et al., 2017"
    assert chinese["https://arxiv.org/abs/1706.03762"] == "Vaswani 等人，2017"
    texts = []  # (where, markdown or translated message, labels of its edition)
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                texts.append((path.name, "".join(cell["source"]), english))
    for po in sorted((ROOT / "locales/zh_CN/LC_MESSAGES/chapters").glob("*.po")):
        with po.open("rb") as f:
            for message in read_po(f):
                if message.id and isinstance(message.string, str):
                    texts.append((po.name, message.string, chinese))
    link = re.compile(r"\[([^\[\]]+)\]\((https://(?:arxiv\.org|doi\.org)/[^)\s]+)\)")
    wrong = []
    checked = 0
    for where, source, by_url in texts:
        for text, url in link.findall(source):
            text = " ".join(text.split())
            year = re.search(r"(?<!\d)\d{4}[a-z]?(?![\da-z])", text)
            if not re.match(r"[A-Z]", text) or not year or url not in by_url:
                continue  # "([2015](...))" after the names in the sentence
            checked += 1
            label = by_url[url]
            surname = re.match(r"[^\s,，、(（]+", text).group()
            label_year = re.search(r"\d{4}[a-z]?$", label).group()
            # "2024" for an entry labelled "2024a" would not tell a reader which of the
            # author's two 2024 entries is meant: the letter is part of the year then.
            if not (label.startswith(surname) and label_year == year.group()):
                wrong.append(f"{where}: [{text}] cites {label!r}")
    assert checked > 40, checked
    assert not wrong, wrong


# -- every figure the text describes is drawn
ZH_CHAPTERS = sorted((ROOT / "chapters" / "zh_CN").glob("*.ipynb"))
# The plotting helpers that make a new figure and return it (al.plot with ax= draws on
# a figure made before; al.heatmap draws on a given axis). They close their figure
# (attention_lib/plotting.py: _figure), so it is shown only if the cell displays it.
FIGURE_MAKERS = {"plot", "show_heatmaps", "subplots"}


def cell_tree(source: str):
    """A code cell's syntax tree (its ``%magic`` and ``!shell`` lines left out)."""
    import ast

    return ast.parse(
        "\n".join(
            line
            for line in source.splitlines()
            if not line.lstrip().startswith(("%", "!"))
        )
    )


def figure_calls(tree):
    """The top-level calls of ``al.plot`` (without ``ax=``), ``al.show_heatmaps`` and
    ``al.subplots`` in a cell, not those inside a function the cell defines."""
    import ast

    found = []

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "al"
            and node.func.attr in FIGURE_MAKERS
            and not any(k.arg == "ax" for k in node.keywords)
        ):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def undisplayed_figures(source: str) -> list[str]:
    """Figures a cell makes with a plotting helper and never shows: a helper's result
    bound to a name (``fig = al.plot(...)``, ``fig, axes = al.subplots(...)``) that is
    neither the cell's last expression nor passed to ``display``, or a helper called
    as a statement that is not the cell's last."""
    import ast

    tree = cell_tree(source)
    shown = set()
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        values = last.value.elts if isinstance(last.value, ast.Tuple) else [last.value]
        shown |= {v.id for v in values if isinstance(v, ast.Name)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "display"
        ):
            shown |= {a.id for a in node.args if isinstance(a, ast.Name)}
    calls = {id(c) for c in figure_calls(tree)}
    problems = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and id(statement.value) in calls:
            target = statement.targets[0]
            if isinstance(target, ast.Tuple):  # fig, axes = al.subplots(...)
                target = target.elts[0]
            name = target.id if isinstance(target, ast.Name) else ast.unparse(target)
            if name not in shown:
                problems.append(
                    f"line {statement.lineno}: {name} = {ast.unparse(statement.value)[:40]}"
                    f"... is never displayed (end the cell with {name}, or display({name}))"
                )
        elif (
            isinstance(statement, ast.Expr)
            and id(statement.value) in calls
            and statement is not last
        ):
            problems.append(
                f"line {statement.lineno}: {ast.unparse(statement.value)[:40]}... is "
                "not the cell's last expression, so it is not shown"
            )
    return problems


@pytest.mark.parametrize(
    "path",
    CHAPTERS + ZH_CHAPTERS,
    ids=lambda p: ("zh_CN/" if p.parent.name == "zh_CN" else "") + p.stem,
)
def test_every_described_figure_is_drawn(path):
    """A figure the text describes is in the notebook, in both editions: a code cell with
    an alt text (``mystnb.image.alt``, what the website gives its plot) stores a PNG
    output, and so does a cell that makes a figure with a plotting helper, which must
    also display it (the helpers close their figure: ``fig = al.plot(...)`` alone stores
    nothing, on the website, in the notebook or in the Chinese notebook).
    tests/test_diagrams.py checks the converse: every plot has its alt text."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        where = f"{path.relative_to(ROOT)} cell {i} (id {cell.get('id')})"
        pngs = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt")
        if alt and not pngs:
            problems.append(f"{where}: alt text {alt[:50]!r}... but no image stored")
        source = "".join(cell["source"])
        made = len(figure_calls(cell_tree(source)))
        if made and pngs < made:
            problems.append(
                f"{where}: makes {made} figure(s) with the plotting helpers, stores "
                f"{pngs} image(s)"
            )
        problems += [f"{where}: {p}" for p in undisplayed_figures(source)]
    assert not problems, "\n".join(problems)


def test_an_undisplayed_figure_is_found():
    """The check above can fail: the defect of chapter 11's first version (a figure bound
    to a name and never shown) and a helper call before the last line are found; a
    figure shown by the last line or by display() is not."""
    assert undisplayed_figures("fig = al.plot(x, y)\nprint(1)")
    assert undisplayed_figures("fig = al.show_heatmaps(w, 'k', 'q')")
    assert undisplayed_figures("al.plot(x)\nprint(1)")
    assert undisplayed_figures("fig, axes = al.subplots(1, 2)\naxes[0, 0].plot(x)")
    assert not undisplayed_figures("fig = al.plot(x, y)\nfig")
    assert not undisplayed_figures("fig, axes = al.subplots(1, 2)\ndisplay(fig)\nx = 1")
    assert not undisplayed_figures("al.plot(x, y, ax=ax)\nx = 1")
    assert not undisplayed_figures("def f():\n    return al.plot(x)\n\n\nf()")
    assert not undisplayed_figures("al.show_heatmaps(w, 'k', 'q')")


# -- opened in JupyterLab, a chapter stays unmodified; a folded solution gives nothing away
import execute_notebooks  # noqa: E402


@pytest.mark.parametrize(
    "path",
    CHAPTERS + ZH_CHAPTERS,
    ids=lambda p: ("zh_CN/" if p.parent.name == "zh_CN" else "") + p.stem,
)
def test_stored_as_jupyterlab_writes_it(path):
    """JupyterLab 4 adds ``collapsed: true`` to a cell whose outputs are hidden and, once
    the kernel starts, writes ipykernel's kernelspec name; it saves nbformat's JSON. A
    notebook stored otherwise is marked modified as soon as it is opened (and autosave
    writes it: ``git status`` shows every chapter a contributor only read). Checked in
    JupyterLab 4.6.6 with Chromium: a chapter so stored, opened with its kernel, stays
    clean and saves byte for byte the same. No cell keeps nbclient's per-cell timing."""
    import nbformat

    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    fix = (
        "python tools/execute_notebooks.py --no-execute"
        if path.parent.name != "zh_CN"
        else "make zh-notebooks"
    )
    assert nb.metadata.get("kernelspec") == execute_notebooks.KERNELSPEC, (
        f"{path.name}: kernelspec {nb.metadata.get('kernelspec')} ({fix})"
    )
    timed = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not timed, f"{path.name} cells {timed[:5]}: per-cell timing kept ({fix})"
    open_ = [
        i
        for i, c in enumerate(nb.cells)
        if hide_answers.is_solution(c) and c.metadata.get("collapsed") is not True
    ]
    assert not open_, (
        f"{path.name} cells {open_}: a solution without collapsed: true "
        "(python tools/hide_answers.py)"
    )
    assert text == nbformat.writes(nb) + "\n", (
        f"{path.name}: not nbformat's JSON, as JupyterLab saves it ({fix})"
    )


@pytest.mark.parametrize(
    "path",
    CHAPTERS + ZH_CHAPTERS,
    ids=lambda p: ("zh_CN/" if p.parent.name == "zh_CN" else "") + p.stem,
)
def test_every_solution_starts_with_a_comment_that_gives_nothing_away(path):
    """A folded cell still shows its first line in JupyterLab (chapter 11's exercise 1
    showed the whole idea of its answer): every solution starts with ``# Solution ...``
    (tools/hide_answers.py puts FIRST_LINE there unless the chapter wrote its own)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    bare = [
        f"cell {i}: {hide_answers.first_line(c['source'])[:60]!r}"
        for i, c in enumerate(nb["cells"])
        if hide_answers.is_solution(c) and not hide_answers.starts_with_first_line(c)
    ]
    assert not bare, f"{path.name} (python tools/hide_answers.py): " + "; ".join(bare)


def test_hide_answers_adds_one_first_line_and_collapses():
    import nbformat

    nb = nbformat.v4.new_notebook()
    own = nbformat.v4.new_code_cell("# Solution to exercise 2\nx = 1")
    bare = nbformat.v4.new_code_cell("answer = 42\nanswer")
    magic = nbformat.v4.new_code_cell("%%time\nanswer = 42")
    for cell in (own, bare, magic):
        cell.metadata["tags"] = ["hide-cell"]
    nb.cells = [own, bare, magic]
    assert hide_answers.hide(nb)
    assert own.source == "# Solution to exercise 2\nx = 1"  # not a second one
    assert bare.source == hide_answers.FIRST_LINE + "\nanswer = 42\nanswer"
    assert magic.source == "%%time\n" + hide_answers.FIRST_LINE + "\nanswer = 42"
    assert all(c.metadata["collapsed"] is True for c in (own, bare, magic))
    before = nbformat.writes(nb)
    assert not hide_answers.hide(nb) and nbformat.writes(nb) == before  # idempotent
