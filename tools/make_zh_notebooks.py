"""The Chinese notebooks: chapters/zh_CN/NN_name.ipynb, written from the English notebook and
its catalog locales/zh_CN/LC_MESSAGES/chapters/NN_name.po (the same translations the Chinese
website shows; nothing is translated twice).

    python tools/make_zh_notebooks.py            write every chapter of _toc.yml (make zh-notebooks)
    python tools/make_zh_notebooks.py --check    exit 1 if a committed Chinese notebook is stale
    python tools/make_zh_notebooks.py chapters/03_masked_softmax.ipynb   one chapter

What changes, and what does not:

* markdown cells: every message the gettext builder extracted (a paragraph, a heading, a list
  item's paragraph, a table cell, a diagram's markdown image) is replaced by its translation.
  The cell is parsed with MyST's own markdown-it parser, configured as Jupyter Book configures
  it, so a block's msgid here is the msgid Sphinx wrote (the block's inline source, lines joined
  by a space). Display math, code, raw HTML (``<details>``) and everything else that is not a
  message stays as written. A message without a translation (empty or fuzzy) stops the tool,
  naming the page and the text: run ``make translations`` and translate it first.
* diagrams: ``attachment:NAME.png`` (or ``.svg``) becomes ``attachment:NAME.zh_CN.png``, with the Chinese
  drawing chapters/figures/NAME.zh_CN.png as the cell's attachment.
* links to another chapter (``NN_name.ipynb``) stay relative: beside each other in
  chapters/zh_CN/ they open the Chinese sibling. Links to the book's other pages
  (``../book/setup.md``) get one more ``../``.
* code cells: source, outputs and metadata exactly as in English (nbval checks the English
  notebook; a Chinese notebook runs the same code and prints the same numbers), except a plot's
  alt text (``mystnb: image: alt:``), which is a message of the catalog too.
* cell metadata (collapsed solutions: ``jupyter.outputs_hidden``, ``cellView``, tags) is kept.
* the Colab cell (the first code cell) installs a CJK font too, on Colab only (COLAB_FONT).
* plots: the setup cell gets one more line, ``plot_font = al.plot_language("zh_CN")``
  (PLOT_SWITCH, which prints nothing), so that a learner's run draws the plots' text in
  Chinese, from the catalog
  attention_lib/locales/zh_CN/plots.po. The plots' PNGs (``image/png`` and its size) come from
  running the Chinese notebook once (nbclient, one thread, from chapters/, in memory); every
  other output is the English notebook's, byte for byte. A plot string without a translation
  stops the tool, naming it. The run is repeated only when what it drew changes: the English
  notebook's code or plots, or attention_lib/plotting.py (their hash), or the translation of a
  plot string it drew (the notebook's metadata ``attention_course.plots`` keeps each string with its
  translation); a new catalog message for another chapter re-runs nothing. ``--check`` runs
  nothing either: it compares the hash and looks every recorded string up in the catalog.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import hide_answers  # noqa: E402

LOCALE = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
OUT = ROOT / "chapters" / "zh_CN"
FIGURES = ROOT / "chapters" / "figures"
ATTACHMENT = re.compile(r"attachment:([\w-]+)\.(?:png|svg)")
# A relative link out of chapters/ (to ../book/..., ../attention_lib/...): one level deeper now.
PARENT_LINK = re.compile(r"\]\(\.\./")


PLOTS_PO = ROOT / "attention_lib" / "locales" / "zh_CN" / "plots.po"
# what the plots' drawing depends on besides the English notebook and the catalog
PLOT_INPUTS = (ROOT / "attention_lib" / "plotting.py",)
# Assigned, not shown: the font's name it returns depends on the machine's fonts, and the
# Chinese notebook's outputs are the English notebook's (nbval checks them in make
# long-tests; a trailing ";" does not silence it there: nbval runs cells without history).
PLOT_SWITCH = (
    'plot_font = al.plot_language("zh_CN")  # 图中文字用中文（需要中文字体，见“环境配置”）\n'
)
# The Colab cell installs a CJK font for the Chinese plots (Colab has none: the plots
# would stay English, with an English warning). One line more in its ``if`` block.
COLAB_IF = 'if "google.colab" in sys.modules:'
COLAB_FONT = "    !apt-get -qq install -y fonts-noto-cjk > /dev/null  # 图中的中文字体"
METADATA = "attention_course"


class MissingTranslation(Exception):
    pass


def shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def chapters_in_toc() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node and str(node["file"]).startswith("chapters/"):
                files.append(ROOT / f"{node['file']}.ipynb")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc)
    return files


def parser():
    """MyST's markdown-it, with Jupyter Book's default extensions (_config.yml adds none)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = (
        yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")).get(
            "parse", {}
        )
        or {}
    )
    extensions = config.get(
        "myst_enable_extensions",
        ["colon_fence", "dollarmath", "linkify", "substitution", "tasklist"],
    )
    return create_md_parser(
        MdParserConfig(enable_extensions=set(extensions)), RendererHTML
    )


def read_catalog(po: Path) -> dict[str, str | None]:
    """msgid -> msgstr; None for a message not (or not finally) translated."""
    from babel.messages.pofile import read_po

    with open(po, "rb") as f:
        catalog = read_po(f, locale="zh_CN")
    messages = {}
    for message in catalog:
        if not message.id:
            continue
        text = message.string if not message.fuzzy else ""
        messages[message.id] = text or None
    return messages


def msgid(content: str) -> str:
    return content.replace("\n", " ").strip()


def translate(messages, page: str, text: str) -> str:
    key = msgid(text)
    if key not in messages:
        raise MissingTranslation(
            f"{page}: no message in the catalog for this text (run make translations):\n    {key[:300]}"
        )
    if messages[key] is None:
        raise MissingTranslation(
            f"{page}: message not translated (empty or fuzzy):\n    {key[:300]}"
        )
    return messages[key]


def translate_markdown(source: str, messages, page: str, md) -> str:
    lines = source.split("\n")
    tokens = md.parse(source)
    replacements = []  # (first line, last line (exclusive), new lines)
    stack = []
    cells = {}  # table row's line -> {column: translation}
    column = -1
    for token in tokens:
        if token.type == "tr_open":
            column = -1
        if token.type in ("th_open", "td_open"):
            column += 1
        if token.nesting == 1:
            stack.append(token)
        elif token.nesting == -1:
            stack.pop()
        if token.type != "inline" or not token.content.strip():
            continue
        parent = stack[-1] if stack else None
        mapped = next((t for t in reversed(stack) if t.map is not None), None)
        if parent is None or mapped is None:
            raise MissingTranslation(f"{page}: cannot locate {token.content[:80]!r}")
        start, end = mapped.map
        new = translate(messages, page, token.content)
        if parent.type in ("th_open", "td_open"):
            # a table row is one line; its cells are replaced by position (the same text
            # can be in two cells), after the loop
            cells.setdefault(start, {})[column] = new
            continue
        if parent.type not in ("paragraph_open", "heading_open"):
            raise MissingTranslation(
                f"{page}: unexpected block {parent.type}: {token.content[:80]!r}"
            )
        first = lines[start]
        body = token.content.split("\n")[0]
        at = first.find(body)
        if at < 0:
            raise MissingTranslation(
                f"{page}: cannot place the translation of {body[:80]!r}"
            )
        prefix = first[:at]
        if parent.type == "heading_open" and re.match(r"^\s*#+\s*$", prefix) is None:
            raise MissingTranslation(
                f"{page}: setext heading not supported: {body[:80]!r}"
            )
        # Continuation lines of a paragraph inside a block quote keep their "> " markers: the
        # translation is one line, so only the first line's prefix is needed.
        replacements.append((start, end, [prefix + new]))
    for start, columns in cells.items():
        parts = re.split(r"(?<!\\)\|", lines[start])
        first = 1 if parts[0].strip() == "" else 0
        for column, new in columns.items():
            parts[first + column] = " " + re.sub(r"(?<!\\)\|", r"\\|", new) + " "
        lines[start] = "|".join(parts)
    for start, end, new in sorted(replacements, key=lambda r: r[0], reverse=True):
        lines[start:end] = new
    return "\n".join(lines)


def zh_attachments(source: str, page: str) -> dict:
    attachments = {}
    for name in sorted(set(ATTACHMENT.findall(source))):
        png = FIGURES / f"{name}.zh_CN.png"
        if not png.exists():
            raise MissingTranslation(
                f"{page}: no Chinese drawing {png.relative_to(ROOT)} (run make diagrams)"
            )
        attachments[f"{name}.zh_CN.png"] = {
            "image/png": base64.b64encode(png.read_bytes()).decode("ascii")
        }
    return attachments


def source_lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def cell_prompts() -> dict[str, str]:
    """The collapsed cells' labels (``Show solution``, the explanation's summary): cell
    metadata and raw HTML, not catalog messages; the Chinese site translates them from
    locales/zh_CN/config.yml (course_cell_prompts), and so does this notebook."""
    config = yaml.safe_load((ROOT / "locales/zh_CN/config.yml").read_text("utf-8"))
    return config.get("course_cell_prompts", {})


def chinese_notebook(path: Path, md=None) -> dict:
    md = md or parser()
    page = path.relative_to(ROOT).with_suffix("").as_posix()
    po = LOCALE / f"{page}.po"
    if not po.exists():
        raise MissingTranslation(f"{page}: no catalog {po.relative_to(ROOT)}")
    messages = read_catalog(po)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    zh = copy.deepcopy(notebook)
    prompts = cell_prompts()
    for cell in zh["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            text = translate_markdown(source, messages, page, md)
            if cell.get("attachments"):
                text = ATTACHMENT.sub(r"attachment:\1.zh_CN.png", text)
                cell["attachments"] = zh_attachments(source, page)
            text = PARENT_LINK.sub("](../../", text)
            for english, chinese in prompts.items():
                text = text.replace(
                    f"<summary>{english}</summary>", f"<summary>{chinese}</summary>"
                )
            cell["source"] = source_lines(text)
        elif cell["cell_type"] == "code":
            mystnb = cell.get("metadata", {}).get("mystnb", {})
            for key in ("code_prompt_show", "code_prompt_hide"):
                if mystnb.get(key) in prompts:
                    mystnb[key] = prompts[mystnb[key]]
            image = mystnb.get("image", {})
            # a message only where the cell shows a plot (the gettext builder sees the alt text
            # with the PNG output)
            plot = any(
                "image/png" in o.get("data", {}) for o in cell.get("outputs", [])
            )
            if image.get("alt") and plot:
                image["alt"] = translate(messages, page, image["alt"])
    add_plot_switch(zh)
    add_colab_font(zh)
    return zh


def add_colab_font(notebook: dict) -> None:
    """``COLAB_FONT`` as the last line of the first code cell's Colab ``if`` block (the
    cell that installs the course library on Colab)."""
    cell = next((c for c in notebook["cells"] if c["cell_type"] == "code"), None)
    if cell is None:
        return
    lines = "".join(cell["source"]).split("\n")
    if COLAB_IF not in lines:
        return
    at = lines.index(COLAB_IF) + 1
    while at < len(lines) and (lines[at].startswith(" ") or not lines[at].strip()):
        at += 1
    while not lines[at - 1].strip():  # after the block's last line, not a blank one
        at -= 1
    lines.insert(at, COLAB_FONT)
    cell["source"] = source_lines("\n".join(lines))


def add_plot_switch(notebook: dict) -> None:
    """One line after ``al.sharp_figures()`` (else after ``import attention_lib as al``)
    in the first code cell that has it: the learner's run draws Chinese plots."""
    for anchor in ("al.sharp_figures(", "import attention_lib as al"):
        for cell in notebook["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = source_lines("".join(cell["source"]))
            at = next((i for i, l in enumerate(lines) if l.startswith(anchor)), None)
            if at is None:
                continue
            if not lines[at].endswith("\n"):
                lines[at] += "\n"
            lines.insert(at + 1, PLOT_SWITCH)
            lines[-1] = lines[-1].rstrip("\n")
            cell["source"] = lines
            return


# -- the plots, drawn by the Chinese notebook itself
def plot_inputs_hash(english: Path) -> str:
    """What the Chinese plots are drawn from, besides their translations: the English
    notebook's code cells and its plots (a re-executed chapter whose plots changed: the
    library changed, or a plot shows a timing), and attention_lib/plotting.py. A prose
    edit, a new diagram or a cell's metadata re-runs nothing, nor does an exercise's
    self-contained check cell (it draws nothing; translate_checks runs it)."""
    import hashlib

    notebook = json.loads(english.read_text(encoding="utf-8"))
    code = [
        [drawing_code(c), [o["data"]["image/png"] for o in png_outputs(c)]]
        for c in notebook["cells"]
        if c["cell_type"] == "code" and CHECK_CALL not in "".join(c["source"])
    ]
    digest = hashlib.sha256(json.dumps(code).encode())
    for path in PLOT_INPUTS:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def drawing_code(cell: dict) -> str:
    """A code cell's source as far as the plots go: without a solution's first line,
    the comment tools/hide_answers.py puts there (it draws nothing)."""
    source = "".join(cell["source"])
    if hide_answers.is_solution(cell) and hide_answers.starts_with_first_line(cell):
        first = hide_answers.first_line(source)
        source = source.replace(first + "\n", "", 1)
    return source


def png_outputs(cell: dict) -> list[dict]:
    return [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]


def has_plots(notebook: dict) -> bool:
    return any(png_outputs(c) for c in notebook["cells"] if c["cell_type"] == "code")


def copy_pngs(target: dict, source: dict, page: str) -> None:
    """Each ``image/png`` output of ``target`` (data and size) from ``source``'s cell of
    the same id, the k-th PNG output for the k-th."""
    cells = {c.get("id"): c for c in source["cells"]}
    for cell in target["cells"]:
        if cell["cell_type"] != "code":
            continue
        mine = png_outputs(cell)
        theirs = png_outputs(cells.get(cell.get("id"), {}))
        if len(mine) != len(theirs):
            raise MissingTranslation(
                f"{page}: cell {cell.get('id')} has {len(mine)} plots in English, "
                f"{len(theirs)} in the Chinese run"
            )
        for out, new in zip(mine, theirs):
            out["data"]["image/png"] = new["data"]["image/png"]
            size = new.get("metadata", {}).get("image/png")
            metadata = out.setdefault("metadata", {})
            if size is None:
                metadata.pop("image/png", None)
            else:
                metadata["image/png"] = size


REPORT = """\
import json as _json
import attention_lib.plotting as _plotting
print(_json.dumps({"font": _plotting._font, "seen": _plotting.plot_strings_seen(),
                   "untranslated": _plotting.untranslated_plot_strings()}))
"""


def run_chinese(zh: dict, english: Path) -> tuple[dict, list[str]]:
    """Execute ``zh`` (a copy) from English's folder, one thread; returns the executed
    notebook and the plot strings it drew. Raises if one had no translation."""
    import os

    import nbformat
    from nbclient import NotebookClient

    page = english.relative_to(ROOT).with_suffix("").as_posix()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    os.environ.pop("ATTENTION_LIB_PLOT_LANG", None)
    run = copy.deepcopy(zh)
    run["cells"].append(
        {
            "cell_type": "code",
            "id": "zh-plot-report",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": REPORT,
        }
    )
    nb = nbformat.reads(json.dumps(run), as_version=4)
    try:
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(english.parent)}},
        ).execute()
    except Exception as error:  # a cell failed: name the chapter, keep going
        raise MissingTranslation(f"{page}: the Chinese run failed:\n{error}"[:3000])
    text = "".join(
        o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout"
    )
    report = json.loads(text.strip().splitlines()[-1])
    if report["font"] is None:
        raise MissingTranslation(
            f"{page}: no CJK font for the plots (Debian: apt-get install fonts-noto-cjk)"
        )
    if report["untranslated"]:
        raise MissingTranslation(
            f"{page}: plot strings without a translation in {shown(PLOTS_PO)}:\n    "
            + "\n    ".join(repr(s) for s in report["untranslated"])
        )
    nb.cells.pop()
    return json.loads(nbformat.writes(nb)), report["seen"]


def plot_catalog():
    sys.path.insert(0, str(ROOT))
    from attention_lib.plotting import PlotCatalog

    return PlotCatalog("zh_CN", PLOTS_PO)


def translations(strings) -> tuple[dict[str, str], list[str]]:
    """``({string: its translation now}, [strings without one])``."""
    catalog = plot_catalog()
    done, missing = {}, []
    for s in strings:
        done[s], lost = catalog.translate(s)
        missing += lost
    return done, missing


def untranslated(strings) -> list[str]:
    return translations(strings)[1]


def with_plots(zh: dict, english: Path, target: Path, check: bool) -> dict | None:
    """``zh`` with the Chinese plots: the committed notebook's when they are current (the
    same English notebook and plotting code, and each plot string it drew translated as
    then), else (not ``check``) a new run's. None: stale (``check``). A catalog message
    that no plot of this chapter uses does not make it stale."""
    page = english.relative_to(ROOT).with_suffix("").as_posix()
    if not has_plots(zh):
        return zh
    key = plot_inputs_hash(english)
    old = json.loads(target.read_text(encoding="utf-8")) if target.exists() else None
    record = (old or {}).get("metadata", {}).get(METADATA, {}).get("plots", {})
    drawn = record.get("strings")
    if record.get("inputs") == key and isinstance(drawn, dict):
        now, missing = translations(drawn)
        if missing:
            raise MissingTranslation(
                f"{page}: plot strings without a translation in {shown(PLOTS_PO)}:\n    "
                + "\n    ".join(repr(s) for s in missing)
            )
        current = now == drawn
    else:
        current = False
    if current:
        copy_pngs(zh, old, page)
    elif check:
        return None
    else:
        print(f"running {shown(target)} for its Chinese plots ...", flush=True)
        executed, seen = run_chinese(zh, english)
        copy_pngs(zh, executed, page)
        drawn = translations(seen)[0]
    zh["metadata"].setdefault(METADATA, {})["plots"] = {
        "inputs": key,
        "strings": drawn,
    }
    return zh


CHECK_CALL = "al.exercises.check("


def translate_checks(notebook: dict, page: str) -> None:
    """Each ``al.exercises.check`` cell's report in Chinese. Such a cell (a "write it
    yourself" stub, or its solution) is self-contained: it is run here, in this process,
    with the checks' messages in Chinese (what a learner's run of the Chinese notebook
    prints: al.plot_language("zh_CN") switches them too), and its report replaces the
    English ``text/plain`` result. Nothing else of the notebook runs."""
    import ast
    import math

    import torch

    import attention_lib as al

    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or CHECK_CALL not in source:
            continue
        results = [o for o in cell.get("outputs", []) if "text/plain" in o.get("data", {})]
        tree = ast.parse(source)
        last = tree.body.pop() if tree.body else None
        if len(results) != 1 or not isinstance(last, ast.Expr):
            raise MissingTranslation(
                f"{page}: cell {cell.get('id')} calls {CHECK_CALL}...) but does not end "
                "with it as the cell's value, or stores no result"
            )
        namespace = {"torch": torch, "al": al, "math": math}
        al.exercises.set_language("zh_CN")
        try:
            exec(compile(tree, f"{page}:{cell.get('id')}", "exec"), namespace)
            report = eval(compile(ast.Expression(last.value), page, "eval"), namespace)
        finally:
            al.exercises.set_language(None)
        results[0]["data"]["text/plain"] = repr(report).splitlines(keepends=True)


EXPLORER = 'class="attention-explorer '


def translate_explorers(notebook: dict) -> None:
    """Each head explorer (al.explore_heads, chapter 11) in Chinese: the English output's
    data with the interface's strings and the texts' names translated, as the Chinese
    notebook's own run displays it (attention_lib.explorer.relabel)."""
    sys.path.insert(0, str(ROOT))
    from attention_lib.explorer import relabel

    for cell in notebook["cells"]:
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html")
            text = "".join(html) if isinstance(html, list) else html
            if text and EXPLORER in text:
                out["data"]["text/html"] = relabel(text, "zh_CN").splitlines(True)


def dumps(notebook: dict) -> str:
    """As JupyterLab writes a notebook (nbformat's JSON: sorted keys, one space of
    indent, a final newline), so opening it there leaves it unmodified."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [
        ROOT / a if not Path(a).is_absolute() else Path(a)
        for a in argv
        if a != "--check"
    ]
    paths = paths or chapters_in_toc()
    md = parser()
    stale, failed = [], []
    for path in paths:
        target = OUT / path.name
        try:
            zh = with_plots(chinese_notebook(path, md), path, target, check)
            if zh is not None:
                translate_checks(zh, shown(path))
                translate_explorers(zh)
        except MissingTranslation as error:
            failed.append(str(error))
            continue
        if zh is None:  # --check: its plots were drawn from other inputs
            stale.append(f"{shown(target)} (plots)")
            continue
        text = dumps(zh)
        if check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(shown(target))
        elif not target.exists() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print("wrote", shown(target))
    for error in failed:
        print(error, file=sys.stderr)
    if stale:
        print(
            "stale Chinese notebooks (run make zh-notebooks and commit them):\n    "
            + "\n    ".join(stale),
            file=sys.stderr,
        )
    return 1 if stale or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
