"""The head explorer (attention_lib/explorer.py): the numbers the page holds are the
model's weights within quantisation, its scores are chapter 11's, the fragment is
self-contained and deterministic, and bad input is refused. The page itself (drawing,
clicks, keyboard, both editions, phone width) is checked in Chromium by
tests/integration/test_site_explorer.py."""

import base64
import json
import re
import zlib

import pytest
import torch

import attention_lib as al
from attention_lib import explorer as E

V, EMB, LAYERS, HEADS, KV = 50, 48, 3, 6, 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return al.LlamaModel(al.LlamaConfig(V, EMB, LAYERS, HEADS, KV, 64)).eval()


class Tok:
    """A tokenizer like tokenizers.Tokenizer: encode(text).ids, decode([id])."""

    class Encoding:
        def __init__(self, ids):
            self.ids = ids

    def encode(self, text):
        return self.Encoding([ord(c) % V for c in text])

    def decode(self, ids):
        return "".join(chr(97 + i % 26) if i % 7 else " " for i in ids)


def payload(fragment: str) -> dict:
    data = re.search(
        r'<script type="application/json" class="ae-data">(.*?)</script>',
        fragment,
        re.S,
    ).group(1)
    return json.loads(data.replace("<\\/", "</"))


def decode(fragment: str) -> list[torch.Tensor]:
    """The page's weights, decoded as explorer.js does: (L, H, T, T) per text."""
    data = payload(fragment)
    raw = torch.frombuffer(
        bytearray(zlib.decompress(base64.b64decode(data["weights"]))), dtype=torch.uint8
    )
    L, H, out, at = data["layers"], data["heads"], [], 0
    for text in data["texts"]:
        T = len(text["tokens"])
        tri = T * (T + 1) // 2
        block = raw[at : at + L * H * tri].view(L, H, tri).float() / 255
        at += L * H * tri
        w = torch.zeros(L, H, T, T)
        rows, cols = torch.tril_indices(T, T)
        w[:, :, rows, cols] = block
        out.append(w)
    assert at == raw.numel()
    return out


def library_weights(model, ids) -> torch.Tensor:
    with torch.no_grad():
        model(torch.tensor([ids]), need_weights=True)
    return torch.stack([w[0] for w in model.attention_weights()])  # (L, H, T, T)


@pytest.mark.parametrize("seed", range(3))
def test_the_page_holds_the_models_weights_within_quantisation(model, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 40, (3,), generator=g).tolist()
    texts = [torch.randint(0, V, (n,), generator=g) for n in lengths]
    ex = E.explore_heads(model, None, texts)
    pages = decode(ex.html())
    for text, page, held in zip(texts, pages, ex.weights):
        truth = library_weights(model, text.tolist())
        assert page.shape == truth.shape == held.shape
        assert (page - truth).abs().max() <= 1 / 510 + 1e-6
        assert torch.equal(page, held)  # .weights is what the page holds
        assert page.triu(1).abs().max() == 0  # causal: nothing above the diagonal


def test_scores_are_chapter_11s_and_the_period_is_found(model):
    g = torch.Generator().manual_seed(1)
    r = torch.randint(0, V, (9,), generator=g)
    text = torch.cat([r, r, r[:4]])  # period 9, 22 tokens
    ex = E.explore_heads(model, None, [text, torch.arange(12)])
    assert ex.periods == [9, None]
    w = library_weights(model, text.tolist())
    T, N = w.shape[-1], 9
    # chapter 11's definitions, written out as loops over the queries
    for layer, head in [(0, 0), (2, 5), (1, 3)]:
        sink = sum(w[layer, head, q, 0] for q in range(1, T)) / (T - 1)
        prev = sum(w[layer, head, q, q - 1] for q in range(1, T)) / (T - 1)
        ind = sum(w[layer, head, i, i - N + 1] for i in range(N, T)) / (T - N)
        s = ex.scores[0]
        assert abs(s["sink"][layer, head] - sink) <= 1 / 510 + 1e-6
        assert abs(s["previous"][layer, head] - prev) <= 1 / 510 + 1e-6
        assert abs(s["induction"][layer, head] - ind) <= 1 / 510 + 1e-6
    assert ex.scores[1]["induction"].isnan().all()
    # the first head shown is the strongest induction head of the repeating text
    best = int(ex.scores[0]["induction"].flatten().argmax())
    assert ex.start == (best // HEADS, best % HEADS)


def test_the_fragment_is_self_contained_deterministic_and_safe(model):
    tok = Tok()
    texts = ["a text </script><b>x</b> & more", "another one"]
    a = E.explore_heads(model, tok, texts, names=["one", "two </script>"]).html()
    b = E.explore_heads(model, tok, texts, names=["one", "two </script>"]).html()
    assert a == b  # re-execution writes the same bytes (its id is a hash of the data)
    assert not re.search(r"""(src|href)=["']?https?:""", a)  # no request off the page
    assert "http://" not in a and "https://" not in a
    data = re.search(r'class="ae-data">(.*?)</script>', a, re.S).group(1)
    assert "</" not in data  # the data cannot end its <script> early
    assert payload(a)["texts"][1]["name"] == "two </script>"
    # tokens as decoded, spaces made visible
    assert payload(a)["texts"][0]["tokens"] == [
        E._shown(tok.decode([i])) for i in tok.encode(texts[0]).ids
    ]
    assert a.count("<script") == 2 and "attention-explorer" in a
    assert 'class="ae-ui" style="display:none"' in a  # until the script runs
    assert "data:image/png;base64," in a  # the static view, shown untrusted


def test_the_static_picture_is_a_png_of_every_head(model):
    ex = E.explore_heads(model, None, [torch.arange(20)], names=["twenty tokens"])
    png = E._static_png(ex.weights[0])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    digit = 5 * E._SCALE, 7 * E._SCALE  # a number's width and height in pixels
    left = digit[0] + 2 * E._GAP  # the heads' numbers (one digit each: 6 heads)
    below = E._GAP + digit[1] + E._GAP  # layer 0's number
    assert width == left + LAYERS * (E._CELL + E._GAP) + E._GAP
    assert height == HEADS * (E._CELL + E._GAP) + E._GAP + below
    # the picture's numbers: every head, every fifth layer (30 layers: 0, 5, .. 25)
    assert E._label(7).shape == (digit[1], digit[0])
    assert E._label(25).shape == (digit[1], 2 * digit[0] + E._SCALE)
    # and the text it shows is named above it
    assert '<p class="ae-caption"' in ex.html() and "Text: twenty tokens" in ex.html()


def test_the_ui_speaks_the_notebooks_language(model, monkeypatch):
    ex = E.explore_heads(model, None, [torch.arange(10)], language="zh_CN")
    strings = payload(ex.html())["strings"]
    assert all(re.search(r"[\u4e00-\u9fff]", s) for k, s in strings.items()), strings
    assert 'lang="zh-CN"' in ex.html()
    # every UI string has its translation in the plots' catalog
    messages = al.plotting.read_po(al.plotting.plot_catalog("zh_CN").path)
    assert all(messages.get(s) for s in E.STRINGS.values())
    # the notebook's language (the Chinese notebooks' plot_language), with no CJK font
    monkeypatch.setattr(al.plotting, "_requested_language", "zh_CN", raising=False)
    monkeypatch.setattr(al.plotting, "_catalog", None)
    zh = E.explore_heads(model, None, [torch.arange(10)])
    assert payload(zh.html())["strings"] == strings
    monkeypatch.setattr(al.plotting, "_requested_language", None, raising=False)
    en = E.explore_heads(model, None, [torch.arange(10)])
    assert payload(en.html())["strings"] == E.STRINGS


def test_the_chapter_9_decoder_works_too():
    torch.manual_seed(0)
    decoder = al.TinyDecoder(20, 32, 4, 2, num_layers=2, max_len=64).eval()
    ex = E.explore_heads(decoder, None, [torch.arange(10) % 20])
    assert ex.num_kv_heads == 2 and ex.weights[0].shape == (2, 4, 10, 10)


def test_save_writes_a_standalone_page(model, tmp_path):
    ex = E.explore_heads(model, None, [torch.arange(8)])
    page = ex.save(tmp_path / "x.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and ex.html() in page


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"texts": []}, "at least one text"),
        ({"texts": [torch.arange(1)]}, "2 to 50 tokens"),
        ({"texts": [torch.arange(51)]}, "2 to 50 tokens"),
        ({"texts": ["text"]}, "needs a tokenizer"),
        ({"texts": [torch.arange(5)], "names": ["a", "b"]}, "expected 1 names"),
        ({"texts": [torch.arange(5)], "start": (3, 0)}, "expected start"),
        ({"texts": [torch.arange(5)], "max_tokens": 100}, "max_tokens"),
        ({"texts": [torch.tensor([0.5, 1.5])]}, "integers"),
    ],
)
def test_bad_input_is_refused(model, kwargs, message):
    kwargs = {"tokenizer": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        E.explore_heads(model, **kwargs)


def test_a_model_that_keeps_no_weights_is_refused():
    layer = torch.nn.Linear(3, 3)
    layer.attention_weights = lambda: []
    layer.forward = lambda x, need_weights=True: x
    with pytest.raises(ValueError, match="keep its attention weights"):
        E.explore_heads(layer, None, [torch.arange(4)])


def test_relabel_gives_what_a_chinese_run_displays(model):
    """The Chinese notebook's explorer is the English output relabelled
    (tools/make_zh_notebooks.py): equal to what the Chinese notebook's own run shows,
    which nbval compares in make long-tests."""
    texts, names = [torch.arange(12), torch.arange(6)], ["prose", "another"]
    en = E.explore_heads(model, None, texts, names=names, language=None).html()
    zh = E.explore_heads(model, None, texts, names=names, language="zh_CN").html()
    assert E.relabel(en, "zh_CN") == zh
    assert E.relabel(en, None) == en
    assert payload(zh)["texts"][0]["name"] == "散文"  # a name the catalog knows
    assert payload(zh)["texts"][1]["name"] == "another"  # one it does not: as given
    with pytest.raises(ValueError, match="in English"):
        E.relabel(zh, "zh_CN")
