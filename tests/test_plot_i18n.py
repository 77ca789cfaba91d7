"""Plots in Chinese (issue 25): ``al.plot_language("zh_CN")`` translates a figure's text
right before it is drawn, from the catalog shipped in the package
(attention_lib/locales/zh_CN/plots.po), in a CJK font; tick labels (tokens, numbers) stay;
a string without a translation stays English and is listed."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import attention_lib as al
from attention_lib import plotting

ROOT = Path(__file__).resolve().parents[1]
PO = ROOT / "attention_lib" / "locales" / "zh_CN" / "plots.po"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def chinese():
    if plotting.cjk_font() is None:
        pytest.skip("no CJK font here (Debian: apt-get install fonts-noto-cjk)")
    plotting._untranslated.clear()
    plotting._seen.clear()
    yield al.plot_language("zh_CN")
    al.plot_language(None)
    plotting._untranslated.clear()
    plotting._seen.clear()


def draw(fig) -> bytes:
    png, _ = al.sharp_png(fig)
    return png


def test_a_figure_is_drawn_in_chinese(chinese):
    fig = al.show_heatmaps(
        torch.rand(1, 2, 3, 3),
        xlabel="keys",
        ylabel="queries",
        titles=["weights A", r"$\tau$ = 2"],
    )
    english = [t.get_text() for t in plotting._texts(fig)]
    assert "keys" in english and "attention weight" in english
    draw(fig)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "键" and ax.get_ylabel() == "查询"
    assert ax.get_title() == "权重 A"
    assert fig.axes[1].get_title() == r"$\tau$ = 2"  # math and numbers: as they are
    colorbar = fig.axes[-1]
    assert colorbar.get_ylabel() == "注意力权重"
    assert chinese in ax.xaxis.label.get_fontfamily()  # in the CJK font
    # tick labels are numbers here: untouched
    assert all(not CJK.search(t.get_text()) for t in ax.get_xticklabels())
    assert al.untranslated_plot_strings() == []
    assert "keys" in plotting.plot_strings_seen()


def test_legend_suptitle_annotation_and_placeholders(chinese):
    fig, axes = al.subplots(1, 1)
    ax = axes[0, 0]
    ax.plot([0, 1], [0, 1], label="convex hull of the values")
    ax.legend()
    ax.annotate("query", (0.5, 0.5))
    fig.suptitle("head 3")
    draw(fig)
    assert [t.get_text() for t in ax.get_legend().texts] == ["值的凸包"]
    assert ax.texts[0].get_text() == "查询"
    assert fig._suptitle.get_text() == "头 3"  # "head %1", the number kept
    draw(fig)  # drawn twice: translated once, nothing reported the second time
    assert al.untranslated_plot_strings() == []


def test_untranslated_strings_stay_english_and_are_listed(chinese):
    fig = al.plot([0, 1, 2], xlabel="no such label anywhere", title="head no such")
    draw(fig)
    assert fig.axes[0].get_xlabel() == "no such label anywhere"
    # a placeholder's text is translated too, and reported when it cannot be
    assert al.untranslated_plot_strings() == ["no such", "no such label anywhere"]


def test_tick_labels_change_only_where_the_catalog_has_them(chinese):
    fig, axes = al.subplots(1, 1)
    ax = axes[0, 0]
    ax.set_xticks([0, 1], labels=["query", "Zhang"])
    draw(fig)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["查询", "Zhang"]
    assert al.untranslated_plot_strings() == []  # tokens are not reported


def test_switched_off_english_again():
    al.plot_language(None)
    fig = al.plot([0, 1], xlabel="keys")
    draw(fig)
    assert fig.axes[0].get_xlabel() == "keys"


def test_an_unknown_language_is_refused_and_changes_nothing():
    al.plot_language(None)
    with pytest.raises(
        ValueError, match=r"expected one of \['zh_CN'\] or None, got 'xx'"
    ):
        al.plot_language("xx")
    assert plotting._catalog is None


def test_catalog_reader_and_patterns(tmp_path):
    po = tmp_path / "plots.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Language: zh_CN\\n"\n\n'
        'msgid "a \\"quoted\\"\\n"\n"line"\nmsgstr "引号\\n行"\n\n'
        '#, fuzzy\nmsgid "fuzzy one"\nmsgstr "模糊"\n\n'
        'msgid "empty one"\nmsgstr ""\n',
        encoding="utf-8",
    )
    assert plotting.read_po(po) == {
        'a "quoted"\nline': "引号\n行",
        "fuzzy one": None,
        "empty one": None,
    }
    anything = tmp_path / "anything.po"
    anything.write_text('msgid "%1"\nmsgstr "%1"\n', encoding="utf-8")
    # a message that is only a placeholder matches everything, itself included: skipped
    assert plotting.PlotCatalog("zh_CN", anything).translate("word") == (
        "word",
        ["word"],
    )
    catalog = plotting.plot_catalog("zh_CN")
    assert catalog.translate("$x$ = 0.5") == ("$x$ = 0.5", [])  # nothing to translate
    assert catalog.translate("head 12") == ("头 12", [])
    # LaTeX braces are not placeholders
    assert (
        catalog.translate(
            r"$\log_{10}$ of the largest $|\partial\alpha_i / \partial a_j|$"
        )[1]
        == []
    )


def test_the_catalog_is_complete_and_ships_with_the_package():
    messages = plotting.read_po(PO)
    assert messages, PO
    empty = [k for k, v in messages.items() if v is None]
    assert not empty, f"{PO.name}: untranslated or fuzzy: {empty}"
    for msgid, msgstr in messages.items():  # the same placeholders on both sides
        assert sorted(plotting._PLACEHOLDER.findall(msgid)) == sorted(
            plotting._PLACEHOLDER.findall(msgstr)
        ), msgid
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]["attention_lib"]
    shipped = PO.relative_to(ROOT / "attention_lib")
    assert any(shipped.match(pattern) for pattern in data), data


def test_the_env_variable_switches_the_language():
    code = (
        "import attention_lib as al, attention_lib.plotting as p; "
        "print(p._catalog.language if p._catalog else None)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ATTENTION_LIB_PLOT_LANG": "zh_CN"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == ("zh_CN" if plotting.cjk_font() else "None")


def test_without_a_cjk_font_the_plots_stay_english_and_a_warning_says_so(monkeypatch):
    monkeypatch.setattr(plotting, "CJK_FONT_FILES", ())
    monkeypatch.setattr(plotting, "CJK_FAMILIES", ())
    with pytest.warns(UserWarning, match="no CJK font found .* stay in English"):
        assert al.plot_language("zh_CN") is None
    assert plotting._catalog is None
    fig = al.plot([0, 1], xlabel="keys")
    draw(fig)
    assert fig.axes[0].get_xlabel() == "keys"
