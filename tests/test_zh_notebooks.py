"""The Chinese notebooks (chapters/zh_CN/, tools/make_zh_notebooks.py) are what the English
notebooks and the Chinese catalogs make now: an English edit or a new translation without
`make zh-notebooks` fails here, naming the stale notebook."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_zh_notebooks as zh


def test_every_chinese_notebook_is_current(capsys):
    code = zh.main(["--check"])
    assert code == 0, capsys.readouterr().err


def test_one_chinese_notebook_per_chapter():
    chapters = {p.name for p in zh.chapters_in_toc()}
    written = {p.name for p in zh.OUT.glob("*.ipynb")}
    assert written == chapters, (
        f"chapters/zh_CN/ should hold exactly the chapters of _toc.yml: "
        f"missing {sorted(chapters - written)}, extra {sorted(written - chapters)}"
    )


def test_chinese_notebook_keeps_code_outputs_and_metadata():
    english = zh.chapters_in_toc()[0]
    chinese = json.loads((zh.OUT / english.name).read_text(encoding="utf-8"))
    original = json.loads(english.read_text(encoding="utf-8"))
    assert len(chinese["cells"]) == len(original["cells"])
    switches, fonts, plots, redrawn, checks = 0, 0, 0, 0, 0
    for en, cn in zip(original["cells"], chinese["cells"]):
        assert cn["cell_type"] == en["cell_type"]
        if en["cell_type"] == "code":
            source = "".join(cn["source"])
            switch = "\n" + zh.PLOT_SWITCH.rstrip("\n")
            if switch in source:  # the setup cell: one more line
                source = source.replace(switch, "", 1)
                switches += 1
            font = "\n" + zh.COLAB_FONT
            if font in source:  # the Colab cell: one more line
                source = source.replace(font, "", 1)
                fonts += 1
            assert source == "".join(en["source"])
            if zh.CHECK_CALL in source:  # an exercise's check: its report in Chinese
                checks += 1
                (report,) = (o["data"]["text/plain"] for o in cn["outputs"])
                assert any(ch in "".join(report) for ch in "还尚正确出错"), report
                continue
            # every output as in English but the plots' PNG (and its size)
            assert [strip_png(o) for o in cn["outputs"]] == [
                strip_png(o) for o in en["outputs"]
            ]
            for a, b in zip(zh.png_outputs(en), zh.png_outputs(cn)):
                plots += 1
                redrawn += a["data"]["image/png"] != b["data"]["image/png"]
            assert cn["metadata"].get("jupyter") == en["metadata"].get("jupyter")
            assert cn["metadata"].get("tags") == en["metadata"].get("tags")
    assert switches == 1 and fonts == 1
    assert checks == 2  # chapter 1's exercise: the stub's check and the solution's
    assert plots and redrawn == plots, f"{redrawn} of {plots} plots drawn in Chinese"
    text = "".join(
        "".join(c["source"]) for c in chinese["cells"] if c["cell_type"] == "markdown"
    )
    assert "第 1 章" in text  # the title, translated
    names = {n for c in chinese["cells"] for n in (c.get("attachments") or {})}
    assert names and all(n.endswith(".zh_CN.png") for n in names), names


def strip_png(output: dict) -> dict:
    output = json.loads(json.dumps(output))
    output.get("data", {}).pop("image/png", None)
    output.get("metadata", {}).pop("image/png", None)
    return output


def test_chinese_plot_strings_are_all_translated():
    """Every plot string the Chinese notebooks drew (recorded in their metadata when
    make_zh_notebooks ran them) has a translation in attention_lib/locales/zh_CN/plots.po."""
    missing = {}
    for path in sorted(zh.OUT.glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if not zh.has_plots(notebook):
            continue
        record = notebook["metadata"].get(zh.METADATA, {}).get("plots")
        assert record is not None, f"{path.name}: no plot strings recorded"
        missing[path.name] = zh.untranslated(record["strings"])
    assert missing and not any(missing.values()), {
        k: v for k, v in missing.items() if v
    }


def test_the_chinese_site_shows_the_chinese_notebooks_plots():
    """book/_ext/course_zh_notebooks.py: on the Chinese site each plot of a chapter is
    the Chinese notebook's PNG (same cell id and rank); nothing else changes."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import course_zh_notebooks as ext

    english_path = zh.chapters_in_toc()[0]
    english = json.loads(english_path.read_text(encoding="utf-8"))
    chinese = json.loads((zh.OUT / english_path.name).read_text(encoding="utf-8"))
    before = json.loads(json.dumps(english))
    wanted = [o for c in chinese["cells"] for o in zh.png_outputs(c)]
    assert ext.swap_plots(english, chinese) == len(wanted) > 0
    assert [o for c in english["cells"] for o in zh.png_outputs(c)] == wanted
    for a, b in zip(english["cells"], before["cells"]):
        assert a["source"] == b["source"]
        assert [strip_png(o) for o in a.get("outputs", [])] == [
            strip_png(o) for o in b.get("outputs", [])
        ]


def test_an_untranslated_plot_string_stops_the_tool(tmp_path, monkeypatch):
    english = zh.chapters_in_toc()[0]
    notebook = json.loads((zh.OUT / english.name).read_text(encoding="utf-8"))
    notebook["metadata"][zh.METADATA]["plots"]["strings"]["no such plot label"] = "?"
    (tmp_path / english.name).write_text(zh.dumps(notebook), encoding="utf-8")
    monkeypatch.setattr(zh, "OUT", tmp_path)
    with pytest.raises(zh.MissingTranslation, match="no such plot label"):
        zh.with_plots(
            zh.chinese_notebook(english), english, tmp_path / english.name, True
        )


def test_a_changed_plot_translation_makes_the_plots_stale(
    tmp_path, monkeypatch, capsys
):
    """--check runs nothing: a plot string drawn with another translation than the
    catalog's now = stale plots; a new message for another chapter changes nothing."""
    english = zh.chapters_in_toc()[0]
    po = zh.PLOTS_PO.read_text(encoding="utf-8")
    changed = tmp_path / "plots.po"
    monkeypatch.setattr(zh, "PLOTS_PO", changed)
    changed.write_text(po + '\nmsgid "not in any plot"\nmsgstr "不在图中"\n', "utf-8")
    assert zh.main(["--check", str(english)]) == 0
    old = 'msgid "keys"\nmsgstr "键"\n'
    assert old in po
    changed.write_text(po.replace(old, 'msgid "keys"\nmsgstr "键们"\n'), "utf-8")
    assert zh.main(["--check", str(english)]) == 1
    assert f"{english.name} (plots)" in capsys.readouterr().err


CATALOG = {
    "A paragraph on two lines.": "两行的段落。",
    "1.1 A heading": "1.1 标题",
    "first item": "第一项",
    "second, with `code`": "第二项，含 `code`",
    "x": "x",
    "a | b": "甲 | 乙",
    "left": "左",
    "Quoted text.": "引用的文字。",
}


def test_markdown_blocks_are_translated_in_place():
    source = (
        "## 1.1 A heading\n\nA paragraph\non two lines.\n\n$$\na = b\n$$\n\n"
        "- first item\n- second,\n  with `code`\n\n| x | left |\n|---|---|\n| x | a \\| b |\n\n"
        "> Quoted\n> text.\n\n<details>\n<summary>Show</summary>\n</details>\n"
    )
    catalog = dict(CATALOG)
    catalog["a \\| b"] = "甲 \\| 乙"
    out = zh.translate_markdown(source, catalog, "test", zh.parser())
    assert out == (
        "## 1.1 标题\n\n两行的段落。\n\n$$\na = b\n$$\n\n"
        "- 第一项\n- 第二项，含 `code`\n\n| x | 左 |\n|---|---|\n| x | 甲 \\| 乙 |\n\n"
        "> 引用的文字。\n\n<details>\n<summary>Show</summary>\n</details>\n"
    )


def test_untranslated_text_stops_the_tool_and_names_it():
    with pytest.raises(
        zh.MissingTranslation, match=r"(?s)chapters/99_x.*Not in the catalog"
    ):
        zh.translate_markdown(
            "Not in the catalog.\n", CATALOG, "chapters/99_x", zh.parser()
        )
    with pytest.raises(zh.MissingTranslation, match="not translated"):
        zh.translate_markdown(
            "Fuzzy.\n", {"Fuzzy.": None}, "chapters/99_x", zh.parser()
        )


def test_a_stale_notebook_fails_the_check(tmp_path, monkeypatch, capsys):
    english = zh.chapters_in_toc()[0]
    stale = json.loads((zh.OUT / english.name).read_text(encoding="utf-8"))
    stale["cells"][0]["source"] = ["# 旧的标题\n"]
    (tmp_path / english.name).write_text(zh.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(zh, "OUT", tmp_path)
    assert zh.main(["--check", str(english)]) == 1
    assert english.name in capsys.readouterr().err
    assert zh.main([str(english)]) == 0  # rewritten
    assert zh.main(["--check", str(english)]) == 0


def test_only_code_plots_or_plotting_py_rerun_a_chapter(tmp_path):
    english = zh.chapters_in_toc()[0]
    notebook = json.loads(english.read_text(encoding="utf-8"))
    copy = tmp_path / english.name
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    key = zh.plot_inputs_hash(copy)
    assert key == zh.plot_inputs_hash(english)
    markdown = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = ["# A new title\n"]
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    assert zh.plot_inputs_hash(copy) == key  # prose: the plots stay
    code = next(c for c in notebook["cells"] if zh.png_outputs(c))
    code["source"] = ["".join(code["source"]) + "\n# changed"]
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    assert zh.plot_inputs_hash(copy) != key  # code: drawn again


def test_the_colab_cell_installs_a_cjk_font_on_colab_only():
    """Colab has no CJK font: without one the Chinese plots stay English (with an
    English warning). Each Chinese notebook's Colab cell installs fonts-noto-cjk in its
    ``if "google.colab"`` block, so nowhere else; the English notebooks do not."""
    for english in zh.chapters_in_toc():
        chinese = json.loads((zh.OUT / english.name).read_text(encoding="utf-8"))
        colab = next(c for c in chinese["cells"] if c["cell_type"] == "code")
        lines = "".join(colab["source"]).split("\n")
        assert zh.COLAB_FONT in lines, (
            f"zh_CN/{english.name}: no font in the Colab cell"
        )
        block = lines[lines.index(zh.COLAB_IF) :]
        assert all(line.startswith("    ") for line in block[1:]), (
            f"zh_CN/{english.name}: the font line is outside the Colab if block"
        )
        assert zh.COLAB_FONT not in english.read_text(encoding="utf-8")


def test_the_setup_cell_prints_no_font_name():
    """The Chinese notebook's outputs are the English ones (nbval checks them in make
    long-tests, on any machine): the plot switch prints nothing (the font's name it
    returns depends on the machine)."""
    assert zh.PLOT_SWITCH.startswith('plot_font = al.plot_language("zh_CN")')


def test_a_solution_first_line_reruns_no_chinese_plots(tmp_path):
    """tools/hide_answers.py's comment on a solution's first line draws nothing: it does
    not make the Chinese plots stale."""
    english = zh.chapters_in_toc()[0]
    notebook = json.loads(english.read_text(encoding="utf-8"))
    solution = next(c for c in notebook["cells"] if zh.hide_answers.is_solution(c))
    source = "".join(solution["source"])
    if zh.hide_answers.starts_with_first_line(solution):
        first = zh.hide_answers.first_line(source)
        solution["source"] = source.replace(first + "\n", "", 1)
    copy = tmp_path / english.name
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    key = zh.plot_inputs_hash(copy)
    solution["source"] = zh.hide_answers.FIRST_LINE + "\n" + solution["source"]
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    assert zh.plot_inputs_hash(copy) == key
    solution["source"] += "\n# another comment"
    copy.write_text(zh.dumps(notebook), encoding="utf-8")
    assert zh.plot_inputs_hash(copy) != key
