"""See every head: an interactive attention explorer for a notebook and the website.

``explore_heads(model, tokenizer, texts)`` runs the course's own model once per text
with ``need_weights=True`` and returns a :class:`HeadExplorer`, which Jupyter displays
as one self-contained HTML fragment: a grid of every layer's every head, one head
enlarged, the tokens of the text (hover, tap or arrow through the queries; the keys are
shaded by weight, with the numbers), and marks for sink, previous-token and induction
heads. Plain JavaScript shipped with the library (``explorer.js``), no framework, no
request off the page; the weights travel as uint8 (``round(255 w)``, lower triangles,
deflated). Until its script runs (an untrusted notebook, a PDF) the fragment shows a
static picture of the first text's heads and says how to make it interactive.

The scores, as chapter 11 defines them, of head ``(l, h)`` of a text of ``T`` tokens:
``sink`` the mean weight on the first token over the queries ``1 .. T-1``;
``previous`` the mean weight on the previous token over the same queries; and, for a
text that repeats itself with period ``N`` (a random sequence twice), ``induction`` the
mean weight of the second copy's queries ``i`` on the token after the first copy of
theirs, ``i - N + 1``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import struct
import zlib
from importlib.resources import files
from pathlib import Path

import numpy as np
import torch

from . import plotting

__all__ = ["HeadExplorer", "explore_heads", "relabel"]

# A head is marked when its score exceeds these (the explorer's "Mark" menu).
THRESHOLDS = {"sink": 0.5, "previous": 0.5, "induction": 0.3}
# The page grows as about 135 T^2 bytes per text for SmolLM2's 270 heads.
MAX_TOKENS = 64
MAX_BYTES = 1_500_000  # raw uint8 weights of all texts together (before deflate)

# The UI's strings: English here, translated through the plots' catalog
# (attention_lib/locales/<language>/plots.po), in the notebook's plot language.
STRINGS = {
    "text": "Text",
    "mark": "Mark",
    "none": "none",
    "sink": "sink heads",
    "previous": "previous-token heads",
    "induction": "induction heads",
    "grid": "Every head: layers %1, heads %2. Arrow keys choose a head.",
    "tokens": "Tokens of the text: hover, tap or use the arrow keys to choose a query.",
    "head": "Layer %1, head %2 (key/value head %3).",
    "scores": "Weight on the first token %1, on the previous token %2, induction %3.",
    "query": "Query %1 (%2) attends most to:",
    "marked": "Marked (%1): %2 heads",
    "nomarks": "no head",
    "noperiod": "not measured: this text does not repeat itself",
    "list": "list them",
    "layers": "layers →",
    "heads": "heads ↓",
    "picture": "Text: %1",  # above the static picture: the first text's name
    "static": (
        "A static view of every head (layers left to right, heads top to bottom; "
        "darker = more weight). Run the cell, or trust the notebook, to explore it."
    ),
    "print": (
        "Every head (layers left to right, heads top to bottom; darker = more weight). "
        "The interactive version is on the course's website and in the notebook."
    ),
    "legend": (
        "Thumbnails: square-root colour scale (faint weights show); enlarged head: "
        "linear, 0 to 1, rows are queries and columns keys. Induction score: on a text "
        "that repeats itself, the weight a token of the second copy puts on the token "
        "after its first occurrence."
    ),
}


class HeadExplorer:
    """Every head of a model on a few texts, ready to display (module docstring).

    Attributes:
        names: one name per text.
        tokens: each text's tokens as shown (``tokenizer.decode([id])``).
        ids: each text's token ids.
        weights: per text, the ``(L, H, T, T)`` float32 weights the page holds (the
            model's, quantised to ``round(255 w) / 255``; zero above the diagonal).
        scores: per text, ``{"sink", "previous", "induction"}`` -> ``(L, H)`` tensors
            computed from ``weights`` (``induction`` is NaN for a text that does not
            repeat itself).
        periods: per text, the period ``N`` of a text that repeats itself, or None.
        num_kv_heads: ``Hkv``; query head ``h`` shares key/value head
            ``h // (H / Hkv)``.
    """

    def __init__(self, names, ids, tokens, weights, periods, num_kv_heads, start, lang):
        self.names, self.ids, self.tokens = names, ids, tokens
        self.weights, self.periods = weights, periods
        self.num_kv_heads, self.start, self.language = num_kv_heads, start, lang
        self.scores = [head_scores(w, n) for w, n in zip(weights, periods)]

    @property
    def num_layers(self) -> int:
        return self.weights[0].shape[0]

    @property
    def num_heads(self) -> int:
        return self.weights[0].shape[1]

    def __repr__(self) -> str:
        texts = ", ".join(
            f"{n!r} ({len(t)} tokens)" for n, t in zip(self.names, self.ids)
        )
        return (
            f"HeadExplorer({self.num_layers} layers x {self.num_heads} heads, "
            f"{self.num_kv_heads} key/value heads; texts {texts})"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.html(), "text/plain": repr(self)}

    def html(self) -> str:
        """The self-contained HTML fragment (what a notebook and the website show)."""
        payload = {
            "layers": self.num_layers,
            "heads": self.num_heads,
            "kvHeads": self.num_kv_heads,
            "start": list(self.start),
            "thresholds": THRESHOLDS,
            "strings": dict(STRINGS),
            "texts": [
                {"name": n, "tokens": t, "period": p}
                for n, t, p in zip(self.names, self.tokens, self.periods)
            ],
            "weights": base64.b64encode(zlib.compress(self._uint8(), 9)).decode(),
        }
        png = base64.b64encode(_static_png(self.weights[0])).decode()
        return _fragment(payload, png, self.language)

    def save(self, path) -> Path:
        """A standalone page (works from ``file://``, no network); returns its path."""
        path = Path(path)
        lang = "zh-CN" if (self.language or "").startswith("zh") else "en"
        path.write_text(
            f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(repr(self))}</title></head><body>{self.html()}"
            "</body></html>",
            encoding="utf-8",
        )
        return path

    def _uint8(self) -> bytes:
        """The weights as the page holds them: per text, layer and head, the lower
        triangle row by row (``i (i + 1) / 2 + j``), ``round(255 w)``."""
        parts = []
        for w in self.weights:
            T = w.shape[-1]
            rows, cols = torch.tril_indices(T, T)  # row-major lower triangle
            q = torch.round(w[:, :, rows, cols] * 255).to(torch.uint8)  # (L, H, tri)
            parts.append(q.numpy().tobytes())
        return b"".join(parts)


def _fragment(payload: dict, png: str, language: str | None) -> str:
    """The HTML of an explorer: ``payload`` with English strings and names, shown in
    ``language`` (None: English)."""
    strings = _strings(language)
    payload = {**payload, "strings": strings}
    payload["texts"] = [
        {**t, "name": _name(t["name"], language)} for t in payload["texts"]
    ]
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    data = data.replace("</", "<\\/")  # never ends its <script> early
    uid = "ae-" + hashlib.sha256(data.encode()).hexdigest()[:12]
    esc = html.escape
    lang = "zh-CN" if (language or "").startswith("zh") else "en"
    script = (files("attention_lib") / "explorer.js").read_text(encoding="utf-8")
    return (
        f'<div class="attention-explorer mathjax_ignore tex2jax_ignore" id="{uid}" '
        f'lang="{lang}" style="background:#fff;color:#222;color-scheme:light;'
        f'padding:6px;border-radius:4px;max-width:100%;overflow:hidden">'
        f'<div class="ae-static">'
        f'<p class="ae-caption" style="margin:0 0 4px 0;font-size:0.9em">'
        f"{esc(strings['picture'].replace('%1', payload['texts'][0]['name']))}</p>"
        f'<img src="data:image/png;base64,{png}" alt="{esc(strings["static"])}" '
        f'style="max-width:100%;image-rendering:pixelated">'
        f'<p class="ae-note" style="margin:4px 0;font-size:0.9em">'
        f'<span class="ae-screen">{esc(strings["static"])}</span>'
        f'<span class="ae-print" style="display:none">{esc(strings["print"])}'
        f"</span></p></div>"
        f'<div class="ae-ui" style="display:none"></div>'
        f'<script type="application/json" class="ae-data">{data}</script>'
        f"<script>{script}</script></div>"
    )


_PAYLOAD = re.compile(
    r'<script type="application/json" class="ae-data">(.*?)</script>', re.S
)
_PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def relabel(fragment: str, language: str | None) -> str:
    """An explorer's HTML (English, as a notebook stores it) shown in ``language``: the
    same data, the interface's strings and the texts' names translated. The Chinese
    notebooks' explorers are made so (tools/make_zh_notebooks.py), equal to what the
    Chinese notebook's own run displays."""
    payload = json.loads(_PAYLOAD.search(fragment).group(1).replace("<\\/", "</"))
    if payload["strings"] != STRINGS:
        raise ValueError("relabel: expected an explorer shown in English")
    return _fragment(payload, _PNG.search(fragment).group(1), language)


def head_scores(weights: torch.Tensor, period: int | None) -> dict[str, torch.Tensor]:
    """Sink, previous-token and induction scores ``(L, H)`` of weights ``(L, H, T, T)``
    (see the module docstring); ``induction`` is NaN without a period."""
    T = weights.shape[-1]
    queries = torch.arange(1, T)
    out = {
        "sink": weights[:, :, 1:, 0].mean(-1),
        "previous": weights[:, :, queries, queries - 1].mean(-1),
    }
    if period:
        second = torch.arange(period, T)
        out["induction"] = weights[:, :, second, second - period + 1].mean(-1)
    else:
        out["induction"] = torch.full(weights.shape[:2], float("nan"))
    return out


def explore_heads(
    model,
    tokenizer,
    texts,
    *,
    names=None,
    start: tuple[int, int] | None = None,
    max_tokens: int = 50,
    language: str | None = None,
) -> HeadExplorer:
    """Every head of ``model`` on ``texts``, as an interactive explorer.

    Args:
        model: a model of the library that keeps its weights with
            ``need_weights=True`` (``LlamaModel``, ``TinyDecoder``, ...): called as
            ``model(ids (1, T), need_weights=True)``, then ``model.attention_weights``
            gives one ``(1, H, T, T)`` tensor per layer.
        tokenizer: ``encode(text)`` (a list of ids, or an object with ``.ids``) and
            ``decode([id])``; may be None when every text is given as token ids.
        texts: strings, or 1-D sequences / tensors of token ids (a random sequence
            repeated twice shows the induction heads).
        names: one name per text (default ``"text 1"``, ...).
        start: the ``(layer, head)`` shown first (default: the strongest induction
            head if a text repeats itself, else the strongest sink head).
        max_tokens: the longest text accepted (the page grows with ``T^2``).
        language: the UI's language (``"zh_CN"``); None: the notebook's plot language
            (:func:`attention_lib.plot_language`), whether or not a CJK font is there.
    """
    texts = list(texts) if not isinstance(texts, (str, torch.Tensor)) else [texts]
    if not texts:
        raise ValueError("explore_heads: expected at least one text, got none")
    names = [f"text {i + 1}" for i in range(len(texts))] if names is None else names
    if len(names) != len(texts):
        raise ValueError(
            f"explore_heads: expected {len(texts)} names (one per text), "
            f"got {len(names)}"
        )
    if not 2 <= max_tokens <= MAX_TOKENS:
        raise ValueError(
            f"explore_heads: expected max_tokens in [2, {MAX_TOKENS}], got {max_tokens}"
        )
    ids = [_ids(t, tokenizer, max_tokens) for t in texts]
    if tokenizer is None:
        tokens = [[str(i) for i in seq] for seq in ids]
    else:
        tokens = [[_shown(tokenizer.decode([i])) for i in seq] for seq in ids]
    weights = [_run(model, seq) for seq in ids]
    L, H = weights[0].shape[:2]
    size = sum(L * H * len(s) * (len(s) + 1) // 2 for s in ids)
    if size > MAX_BYTES:
        raise ValueError(
            f"explore_heads: expected at most {MAX_BYTES:,d} bytes of weights (the "
            f"page grows with T^2), got {size:,d}: use fewer or shorter texts"
        )
    periods = [_period(seq) for seq in ids]
    kv = _num_kv_heads(model, H)
    if language is None:
        language = _notebook_language()
    explorer = HeadExplorer(names, ids, tokens, weights, periods, kv, (0, 0), language)
    if start is None:
        score = next(
            (
                s["induction"]
                for s in explorer.scores
                if not s["induction"].isnan().any()
            ),
            explorer.scores[0]["sink"],
        )
        flat = int(score.flatten().argmax())
        start = (flat // H, flat % H)
    if not (0 <= start[0] < L and 0 <= start[1] < H):
        raise ValueError(
            f"explore_heads: expected start in [0, {L}) x [0, {H}), got {tuple(start)}"
        )
    explorer.start = (int(start[0]), int(start[1]))
    return explorer


def _ids(text, tokenizer, max_tokens: int) -> list[int]:
    if isinstance(text, str):
        if tokenizer is None:
            raise ValueError(
                "explore_heads: a text given as a string needs a tokenizer"
            )
        encoded = tokenizer.encode(text)
        seq = list(getattr(encoded, "ids", encoded))
    else:
        seq = torch.as_tensor(text).flatten().tolist()
        if not all(isinstance(i, int) for i in seq):
            raise ValueError("explore_heads: expected token ids as integers")
    if not 2 <= len(seq) <= max_tokens:
        raise ValueError(
            f"explore_heads: expected 2 to {max_tokens} tokens per text (the page "
            f"grows with T^2), got {len(seq)}"
        )
    return seq


def _shown(token: str) -> str:
    """A token as the page shows it: spaces and line breaks visible."""
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def _run(model, seq: list[int]) -> torch.Tensor:
    """The model's weights on one text, quantised as the page holds them:
    (L, H, T, T)."""
    device = next(model.parameters()).device
    x = torch.tensor([seq], device=device)  # (1, T)
    with torch.no_grad():
        model(x, need_weights=True)
    found = model.attention_weights
    found = found() if callable(found) else found
    if not found or any(w is None for w in found):
        raise ValueError(
            "explore_heads: expected the model to keep its attention weights with "
            "need_weights=True (model.attention_weights), got none"
        )
    w = torch.stack([layer[0] for layer in found]).float().cpu()  # (L, H, T, T)
    T = len(seq)
    if w.shape[-2:] != (T, T):
        raise ValueError(
            f"explore_heads: expected weights (L, H, {T}, {T}), got {tuple(w.shape)}"
        )
    w = torch.round(w.clamp(0, 1) * 255) / 255
    return w * torch.ones(T, T).tril()  # a causal model: nothing above the diagonal


def _period(seq: list[int]) -> int | None:
    """The smallest N >= 2 with the text made of at least two copies of its first N
    tokens (then the induction score is defined), else None."""
    T = len(seq)
    for n in range(2, T // 2 + 1):
        if all(seq[i] == seq[i - n] for i in range(n, T)):
            return n
    return None


def _num_kv_heads(model, num_heads: int) -> int:
    config = getattr(model, "config", None)
    if getattr(config, "num_kv_heads", None):
        return int(config.num_kv_heads)
    for module in model.modules():
        kv = getattr(module, "num_kv_heads", None)
        if isinstance(kv, int) and kv > 0:
            return kv
    return num_heads


def _notebook_language() -> str | None:
    """The language the notebook asked for with plot_language (even without a CJK
    font, which only the plots need), else the plots' current one."""
    asked = getattr(plotting, "_requested_language", None)
    if asked is not None:
        return asked
    return getattr(plotting._catalog, "language", None)


def _name(name: str, language: str | None) -> str:
    """A text's name in the UI's language (the plots' catalog, as a plot's title)."""
    return plotting.plot_catalog(language).translate(name)[0] if language else name


def _strings(language: str | None) -> dict[str, str]:
    if not language:
        return dict(STRINGS)
    messages = plotting.read_po(plotting.plot_catalog(language).path)
    return {k: messages.get(v) or v for k, v in STRINGS.items()}


# -- the static picture: every head of one text, without matplotlib ------------------
_CELL, _GAP = 16, 2
_SCALE = 2  # the digits' pixel size
_INK = (34, 34, 34)  # the fragment's text colour, #222
# 5 x 7 pixel digits (one row a string, "#" = ink), drawn _SCALE times larger
_DIGITS = {
    str(i): rows.split()
    for i, rows in enumerate(
        [
            ".###. #...# #...# #...# #...# #...# .###.",
            "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
            ".###. #...# ....# ...#. ..#.. .#... #####",
            "##### ...#. ..#.. ...#. ....# #...# .###.",
            "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
            "##### #.... ####. ....# ....# #...# .###.",
            "..##. .#... #.... ####. #...# #...# .###.",
            "##### ....# ...#. ..#.. .#... .#... .#...",
            ".###. #...# #...# .###. #...# #...# .###.",
            ".###. #...# #...# .#### ....# ...#. .##..",
        ]
    )
}


def _label(number: int) -> np.ndarray:
    """The digits of ``number`` as a boolean bitmap (ink = True), one pixel apart."""
    glyphs = []
    for char in str(number):
        glyph = np.array([[c == "#" for c in row] for row in _DIGITS[char]])
        glyphs += [glyph, np.zeros((7, 1), bool)]
    bitmap = np.concatenate(glyphs[:-1], axis=1)
    return bitmap.repeat(_SCALE, axis=0).repeat(_SCALE, axis=1)


def _static_png(weights: torch.Tensor) -> bytes:
    """A mosaic PNG of every head's weights (layers as columns, heads as rows), each
    head downsampled to 16 x 16 on a square-root scale, white to dark blue; the heads
    numbered on the left, every fifth layer below."""
    L, H, T, _ = weights.shape
    edges = np.linspace(0, T, _CELL + 1).round().astype(int)
    w = weights.sqrt().numpy()
    image = np.ones((H * (_CELL + _GAP) + _GAP, L * (_CELL + _GAP) + _GAP))
    for r in range(_CELL):
        for c in range(_CELL):
            a = min(edges[r], T - 1)  # each pixel one block of rows and columns,
            b = max(edges[r + 1], a + 1)  # at least one (T < 16: rows repeat)
            e = min(edges[c], T - 1)
            f = max(edges[c + 1], e + 1)
            block = w[:, :, a:b, e:f].max(axis=(2, 3))  # (L, H): keep thin diagonals
            for layer in range(L):
                x = _GAP + layer * (_CELL + _GAP) + c
                y = _GAP + np.arange(H) * (_CELL + _GAP) + r
                image[y, x] = 1 - block[layer]
    dark = np.array([8, 48, 107], float)  # the course's query blue, darkened
    mosaic = (255 - (255 - dark) * (1 - image[..., None])).round().astype(np.uint8)
    mosaic[image == 1] = 255
    # the margins: head numbers on the left, every fifth layer's number below
    heads = [_label(h) for h in range(H)]
    layers = {layer: _label(layer) for layer in range(0, L, 5)}
    left = max(b.shape[1] for b in heads) + 2 * _GAP
    centres = {  # each labelled column's centre, in the mosaic
        layer: _GAP + layer * (_CELL + _GAP) + _CELL // 2 for layer in layers
    }
    right = max(  # room for a wide number under the last columns
        [0]
        + [
            centres[k] + (b.shape[1] + 1) // 2 - mosaic.shape[1]
            for k, b in layers.items()
        ]
    )
    high = max(b.shape[0] for b in layers.values())
    top = mosaic.shape[0]
    ink = np.zeros((top + _GAP + high + _GAP, left + mosaic.shape[1] + right), bool)
    for h, bitmap in enumerate(heads):  # right-aligned, centred on its row
        y = _GAP + h * (_CELL + _GAP) + (_CELL - bitmap.shape[0]) // 2
        x = left - _GAP - bitmap.shape[1]
        ink[y : y + bitmap.shape[0], x : x + bitmap.shape[1]] = bitmap
    for layer, bitmap in layers.items():  # centred under its column
        y, x = top + _GAP, left + centres[layer] - bitmap.shape[1] // 2
        ink[y : y + bitmap.shape[0], x : x + bitmap.shape[1]] = bitmap
    rgb = np.full((*ink.shape, 3), 255, np.uint8)
    rgb[:top, left : left + mosaic.shape[1]] = mosaic
    rgb[ink] = _INK
    return _png(rgb)


def _png(rgb: np.ndarray) -> bytes:
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
