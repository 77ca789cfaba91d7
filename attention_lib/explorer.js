// attention_lib's head explorer (attention_lib/explorer.py writes the data; this draws it).
// Plain JavaScript, no library, no request: it finds its own root from this script, so two
// explorers on one page (two notebooks, a re-run cell, the PDF's single page) both work.
(function () {
  "use strict";
  var me = document.currentScript;
  var root = me && me.closest(".attention-explorer");
  if (!root || root.dataset.aeStarted) return;
  root.dataset.aeStarted = "1";
  var data = JSON.parse(root.querySelector("script.ae-data").textContent);
  var S = data.strings, L = data.layers, H = data.heads, group = H / data.kvHeads;
  var TH = data.thresholds;
  var BLUE = [0, 114, 178], MARK = "#d55e00";
  // punctuation of the interface's language (Chinese: full-width, no space after 。)
  var P = (root.lang || "").indexOf("zh") === 0 ?
    { sep: "\uff0c", end: "\u3002", space: "", open: "\uff08", close: "\uff09" } :
    { sep: ", ", end: ".", space: " ", open: " (", close: ") " };
  function label(l, h) { return "L" + l + " H" + h; }

  function fill(template) {
    var args = arguments;
    return template.replace(/%([1-9])/g, function (m, k) { return args[+k]; });
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }
  function luminance(v) {  // relative luminance of BLUE at opacity v over white
    var lin = BLUE.map(function (c) {
      var x = (255 - (255 - c) * v) / 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  }
  function fixed(x) { return isNaN(x) ? "\u2014" : x.toFixed(2); }

  // -- the weights: deflated uint8 lower triangles, [text][layer][head][i(i+1)/2 + j] ----------
  function bytesOf(b64) {
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function inflate(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer().then(function (b) { return new Uint8Array(b); });
  }

  var texts = data.texts, offsets = [], W = null;
  var total = 0;
  texts.forEach(function (t) {
    var T = t.tokens.length;
    t.T = T; t.tri = T * (T + 1) / 2;
    offsets.push(total);
    total += L * H * t.tri;
  });
  function w(p, l, h, i, j) {
    if (j > i) return 0;
    return W[offsets[p] + (l * H + h) * texts[p].tri + i * (i + 1) / 2 + j] / 255;
  }
  function scores(p) {
    var t = texts[p], T = t.T, N = t.period, out = { sink: [], previous: [], induction: [] };
    for (var l = 0; l < L; l++) for (var h = 0; h < H; h++) {
      var s = 0, v = 0, n = 0;
      for (var i = 1; i < T; i++) { s += w(p, l, h, i, 0); v += w(p, l, h, i, i - 1); }
      if (N) for (var q = N; q < T; q++) n += w(p, l, h, q, q - N + 1);
      out.sink.push(s / (T - 1));
      out.previous.push(v / (T - 1));
      out.induction.push(N ? n / (T - N) : NaN);
    }
    return out;
  }

  // -- the page ----------------------------------------------------------------------------
  var uid = root.id || "ae";
  var state = { text: 0, layer: data.start[0], head: data.start[1], query: 0, mark: "" };
  var ui = root.querySelector(".ae-ui");
  var controls = el("div", { "class": "ae-controls" });
  controls.style.cssText = "display:flex;flex-wrap:wrap;gap:12px;margin:4px 0";
  var textSelect = el("select", { "class": "ae-text" });
  texts.forEach(function (t, p) { textSelect.appendChild(el("option", { value: p }, t.name)); });
  var markSelect = el("select", { "class": "ae-mark" });
  [["", S.none], ["sink", S.sink], ["previous", S.previous], ["induction", S.induction]]
    .forEach(function (o) { markSelect.appendChild(el("option", { value: o[0] }, o[1])); });
  [[S.text, textSelect], [S.mark, markSelect]].forEach(function (pair) {
    var label = el("label", {}, pair[0] + " ");
    label.appendChild(pair[1]);
    controls.appendChild(label);
  });
  var marked = el("div", { "class": "ae-marked" });
  marked.style.cssText = "margin:2px 0;font-size:0.9em";
  var body = el("div", { "class": "ae-body" });
  body.style.cssText = "display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start";
  var gridBox = el("div", { "class": "ae-gridbox" });
  var axis = el("div", { "class": "ae-axis", "aria-hidden": "true" });
  axis.style.cssText = "font-size:0.8em;color:#555";
  var grid = el("canvas", { "class": "ae-grid", tabindex: "0", role: "application",
                            "aria-label": fill(S.grid, L, H) });
  grid.style.cssText = "display:block;cursor:pointer;touch-action:manipulation";
  gridBox.appendChild(axis);
  gridBox.appendChild(grid);
  var detail = el("div", { "class": "ae-detail" });
  detail.style.cssText = "flex:1 1 240px;min-width:0";
  var big = el("canvas", { "class": "ae-head", "aria-hidden": "true" });
  big.style.cssText = "display:block;max-width:100%;cursor:crosshair;touch-action:manipulation";
  var desc = el("p", { "class": "ae-desc", "aria-live": "polite" });
  desc.style.cssText = "margin:6px 0;font-size:0.9em;min-height:3.6em";
  detail.appendChild(big);
  detail.appendChild(desc);
  body.appendChild(gridBox);
  body.appendChild(detail);
  var strip = el("div", { "class": "ae-tokens", tabindex: "0", role: "listbox",
                          "aria-label": S.tokens });
  strip.style.cssText = "display:flex;flex-wrap:wrap;gap:2px;margin:8px 0;line-height:1.6;" +
    "font-family:monospace;font-size:0.9em";
  var legend = el("p", { "class": "ae-legend" }, S.legend);
  legend.style.cssText = "margin:2px 0;font-size:0.8em;color:#555";
  detail.appendChild(strip);  // beside the enlarged head (and above the grid on a phone)
  [controls, marked, body, legend].forEach(function (e) { ui.appendChild(e); });

  if (!document.getElementById("ae-print-style")) {
    var style = el("style", { id: "ae-print-style" },
      "@media print{.attention-explorer .ae-ui{display:none!important}" +
      ".attention-explorer .ae-static{display:block!important}" +
      ".attention-explorer .ae-screen{display:none!important}" +
      ".attention-explorer .ae-print{display:inline!important}}" +
      ".attention-explorer .ae-tokens span[aria-selected=true]{outline:2px solid #222}" +
      ".attention-explorer :focus-visible{outline:3px solid #d55e00;outline-offset:2px}");
    document.head.appendChild(style);
  }

  // -- drawing -------------------------------------------------------------------------------
  var sc = null, layout = null, thumbs = null;
  function thumbnails(cell) {
    // every head at cell x cell pixels: the largest weight of each block of the T x T
    // matrix (a one-pixel diagonal or first column stays visible), square-root scale
    var key = state.text + ":" + cell;
    if (thumbs && thumbs.key === key) return thumbs.canvas;
    var T = texts[state.text].T, edges = [];
    for (var e = 0; e <= cell; e++) edges.push(Math.round(e * T / cell));
    var c = document.createElement("canvas");
    c.width = L * cell; c.height = H * cell;
    var ctx = c.getContext("2d"), img = ctx.createImageData(L * cell, H * cell);
    for (var l = 0; l < L; l++) for (var h = 0; h < H; h++)
      for (var r = 0; r < cell; r++) for (var q = 0; q < cell; q++) {
        var i0 = Math.min(edges[r], T - 1), j0 = Math.min(edges[q], T - 1), v = 0;
        var i1 = Math.max(edges[r + 1], i0 + 1), j1 = Math.max(edges[q + 1], j0 + 1);
        var base = offsets[state.text] + (l * H + h) * texts[state.text].tri;
        for (var i = i0; i < i1; i++) {
          var row = base + i * (i + 1) / 2, end = Math.min(j1, i + 1);
          for (var j = j0; j < end; j++) if (W[row + j] > v) v = W[row + j];
        }
        v = Math.sqrt(v / 255);
        var k = 4 * ((h * cell + r) * L * cell + l * cell + q);
        img.data[k] = 255 - 247 * v; img.data[k + 1] = 255 - 207 * v;
        img.data[k + 2] = 255 - 148 * v; img.data[k + 3] = 255;
      }
    ctx.putImageData(img, 0, 0);
    thumbs = { key: key, canvas: c };
    return c;
  }
  var PAD = 18;  // room for the layer and head numbers
  function drawGrid() {
    var width = Math.max(root.clientWidth - 16, 200);
    var across = width >= 640;  // layers across the columns; narrower, down the rows
    var cols = across ? L : H, rows = across ? H : L;
    var cell = Math.max(10, Math.min(across ? 28 : 20,
                                     Math.floor((Math.min(width, 900) - PAD) / cols) - 2));
    layout = { across: across, cell: cell, step: cell + 2 };
    body.style.flexDirection = across ? "row" : "column-reverse";
    var dpr = window.devicePixelRatio || 1, cw = PAD + cols * layout.step + 2;
    var ch = PAD + rows * layout.step + 2;
    grid.width = cw * dpr; grid.height = ch * dpr;
    grid.style.width = cw + "px"; grid.style.height = ch + "px";
    axis.textContent = across ? S.layers + "   " + S.heads : S.heads.replace("\u2193", "\u2192") +
      "   " + S.layers.replace("\u2192", "\u2193");
    var ctx = grid.getContext("2d"), tiles = thumbnails(cell);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, cw, ch);
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = "#444"; ctx.font = "10px sans-serif"; ctx.textAlign = "center";
    for (var a = 0; a < cols; a++) if (!across || a % 5 === 0)
      ctx.fillText(String(a), PAD + 2 + a * layout.step + cell / 2, 11);
    ctx.textAlign = "right";
    for (var b = 0; b < rows; b++) if (across || b % 5 === 0)
      ctx.fillText(String(b), PAD - 3, PAD + 2 + b * layout.step + cell / 2 + 3);
    for (var l = 0; l < L; l++) for (var h = 0; h < H; h++) {
      var x = PAD + 2 + (across ? l : h) * layout.step, y = PAD + 2 + (across ? h : l) * layout.step;
      ctx.drawImage(tiles, l * cell, h * cell, cell, cell, x, y, cell, cell);
      var s = state.mark && sc[state.mark][l * H + h];
      if (s > TH[state.mark]) {  // marked: dashed, apart from the focus ring and query row
        ctx.strokeStyle = MARK; ctx.lineWidth = 2; ctx.setLineDash([3, 2]);
        ctx.strokeRect(x - 1, y - 1, cell + 2, cell + 2); ctx.setLineDash([]);
      }
    }
    var sx = PAD + 2 + (across ? state.layer : state.head) * layout.step;
    var sy = PAD + 2 + (across ? state.head : state.layer) * layout.step;
    ctx.strokeStyle = "#000"; ctx.lineWidth = 2; ctx.strokeRect(sx - 1, sy - 1, cell + 2, cell + 2);
  }
  function drawHead() {
    var t = texts[state.text], T = t.T;
    var size = Math.max(120, Math.min(360, detail.clientWidth || 300));
    var px = Math.max(1, Math.floor(size / T)), dpr = window.devicePixelRatio || 1;
    big.width = T * px * dpr; big.height = T * px * dpr;
    big.style.width = T * px + "px"; big.style.height = T * px + "px";
    var ctx = big.getContext("2d"), small = document.createElement("canvas");
    small.width = T; small.height = T;
    var sctx = small.getContext("2d"), img = sctx.createImageData(T, T);
    var base = offsets[state.text] + (state.layer * H + state.head) * t.tri;
    for (var i = 0; i < T; i++) for (var j = 0; j < T; j++) {
      var k = 4 * (i * T + j), v = j > i ? -1 : W[base + i * (i + 1) / 2 + j] / 255;
      if (v < 0) { img.data[k] = img.data[k + 1] = img.data[k + 2] = 230; }  // not visible
      else {  // linear scale
        img.data[k] = 255 - 247 * v; img.data[k + 1] = 255 - 207 * v; img.data[k + 2] = 255 - 148 * v;
      }
      img.data[k + 3] = 255;
    }
    sctx.putImageData(img, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(small, 0, 0, T * px, T * px);
    ctx.strokeStyle = MARK; ctx.lineWidth = 2;
    ctx.strokeRect(1, state.query * px + 1, (state.query + 1) * px - 2, px - 2);
  }
  function drawTokens() {
    var t = texts[state.text];
    if (strip.childElementCount !== t.T || strip.dataset.text !== String(state.text)) {
      strip.textContent = "";
      strip.dataset.text = state.text;
      t.tokens.forEach(function (tok, i) {
        var span = el("span", { id: uid + "-t" + state.text + "-" + i, role: "option",
                                "data-index": i }, tok);
        span.style.cssText = "padding:0 2px;border-radius:2px;white-space:pre;cursor:pointer";
        strip.appendChild(span);
      });
    }
    var q = state.query;
    Array.prototype.forEach.call(strip.children, function (span, j) {
      var v = w(state.text, state.layer, state.head, q, j);
      span.style.background = j <= q ? "rgba(" + BLUE + "," + v.toFixed(3) + ")" : "transparent";
      // text black or white, whichever contrasts more with that shade (WCAG: >= 4.5 : 1);
      // the later tokens, which the query does not see, in a grey that still reads
      span.style.color = j > q ? "#6b6b6b" : (luminance(v) < 0.18 ? "#fff" : "#000");
      span.setAttribute("aria-selected", j === q ? "true" : "false");
      span.title = j <= q ? v.toFixed(2) : "";
    });
    strip.setAttribute("aria-activedescendant", uid + "-t" + state.text + "-" + q);
  }
  function describe() {
    var t = texts[state.text], k = state.layer * H + state.head, q = state.query;
    var keys = [];
    for (var j = 0; j <= q; j++) keys.push([w(state.text, state.layer, state.head, q, j), j]);
    keys.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
    var top = keys.slice(0, 3).map(function (e) {
      return t.tokens[e[1]] + P.open + e[1] + P.close.trim() + (P.space || "") + e[0].toFixed(2);
    }).join(P.sep);
    desc.textContent = [
      fill(S.head, state.layer, state.head, Math.floor(state.head / group)),
      fill(S.scores, fixed(sc.sink[k]), fixed(sc.previous[k]), fixed(sc.induction[k])),
      fill(S.query, q, t.tokens[q]) + P.space + top + P.end
    ].join(P.space);
    marked.textContent = "";
    if (state.mark === "induction" && !t.period) {
      marked.textContent = S.noperiod;
    } else if (state.mark) {
      var list = [];
      for (var i = 0; i < L * H; i++)
        if (sc[state.mark][i] > TH[state.mark]) list.push(label(Math.floor(i / H), i % H));
      var name = markSelect.options[markSelect.selectedIndex].text;
      if (!list.length) {
        marked.textContent = fill(S.marked, name, 0);
      } else {
        var box = el("details", {}), summary = el("summary", {}, fill(S.marked, name, list.length));
        summary.style.cursor = "pointer";
        box.appendChild(summary);
        box.appendChild(el("div", { "class": "ae-marked-list" }, list.join(P.sep)));
        if (list.length <= 12) box.open = true;
        marked.appendChild(box);
      }
    }
    root.dataset.layer = state.layer; root.dataset.head = state.head;
    root.dataset.query = q; root.dataset.text = state.text;
  }
  function draw(rebuild) {
    if (rebuild) sc = scores(state.text);
    drawGrid(); drawHead(); drawTokens(); describe();
  }

  // -- interaction -------------------------------------------------------------------------
  function select(layer, head) {
    state.layer = Math.max(0, Math.min(L - 1, layer));
    state.head = Math.max(0, Math.min(H - 1, head));
    drawGrid(); drawHead(); drawTokens(); describe();
  }
  function setQuery(i) {
    state.query = Math.max(0, Math.min(texts[state.text].T - 1, i));
    drawHead(); drawTokens(); describe();
  }
  function firstQuery(p) {  // a text that repeats itself: a query of its second copy
    var t = texts[p];
    return t.period ? Math.min(t.period + 5, t.T - 1) : t.T - 1;
  }
  function setText(p) {
    state.text = p; textSelect.value = p;
    state.query = firstQuery(p);
    draw(true);
  }
  grid.addEventListener("click", function (e) {
    var r = grid.getBoundingClientRect();
    var a = Math.floor((e.clientX - r.left - PAD - 2) / layout.step);
    var b = Math.floor((e.clientY - r.top - PAD - 2) / layout.step);
    if (a < 0 || b < 0) return;
    if (layout.across) select(a, b); else select(b, a);
    // on a phone the enlarged head is above the grid: bring it into view
    if (!layout.across) detail.scrollIntoView({ block: "start", behavior: "instant" });
  });
  grid.addEventListener("keydown", function (e) {
    if (e.key === "Home" || e.key === "End") {
      e.preventDefault();
      if (e.key === "Home") select(0, 0); else select(L - 1, H - 1);
      return;
    }
    var d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    if (!d) return;
    e.preventDefault();
    if (layout.across) select(state.layer + d[0], state.head + d[1]);
    else select(state.layer + d[1], state.head + d[0]);
  });
  function queryAt(target) {
    var i = target && target.dataset && target.dataset.index;
    if (i != null) setQuery(+i);
  }
  strip.addEventListener("mouseover", function (e) { queryAt(e.target); });
  strip.addEventListener("click", function (e) { queryAt(e.target); });
  strip.addEventListener("keydown", function (e) {
    var T = texts[state.text].T;
    var next = { ArrowLeft: state.query - 1, ArrowUp: state.query - 1, ArrowRight: state.query + 1,
                 ArrowDown: state.query + 1, Home: 0, End: T - 1 }[e.key];
    if (next == null) return;
    e.preventDefault();
    setQuery(next);
  });
  big.addEventListener("mousemove", function (e) {
    var r = big.getBoundingClientRect();
    setQuery(Math.floor((e.clientY - r.top) / (r.height / texts[state.text].T)));
  });
  big.addEventListener("click", function (e) {
    var r = big.getBoundingClientRect();
    setQuery(Math.floor((e.clientY - r.top) / (r.height / texts[state.text].T)));
  });
  textSelect.addEventListener("change", function () { setText(+textSelect.value); });
  markSelect.addEventListener("change", function () {
    state.mark = markSelect.value; drawGrid(); describe();
  });

  inflate(bytesOf(data.weights)).then(function (bytes) {
    if (bytes.length !== total) throw new Error("attention explorer: " + bytes.length +
                                                " bytes of weights, expected " + total);
    W = bytes;
    root.querySelector(".ae-static").style.display = "none";
    ui.style.display = "";
    state.query = firstQuery(0);
    draw(true);
    var width = root.clientWidth;
    if (window.ResizeObserver) new ResizeObserver(function () {
      if (Math.abs(root.clientWidth - width) > 8) { width = root.clientWidth; draw(false); }
    }).observe(root);
    root.explorer = {
      w: w, scores: function (p) { return scores(p); }, state: state,
      select: select, setQuery: setQuery, setText: setText,
      // where head (l, h)'s thumbnail is drawn, in CSS pixels of the grid canvas
      center: function (l, h) {
        var a = layout.across ? l : h, b = layout.across ? h : l;
        return { x: PAD + 2 + a * layout.step + layout.cell / 2,
                 y: PAD + 2 + b * layout.step + layout.cell / 2 };
      }
    };
    root.dataset.ready = "1";
  });
})();
