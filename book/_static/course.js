/* The course site's own behaviour (loaded on every page after the theme's scripts are declared).
 *
 * 1. Wide figures on narrow screens: a diagram or plot that would shrink below a legible scale when fitted to
 *    the column is shown at that scale (of its intended width) in a strip that scrolls sideways, with a hint
 *    after it; its link opens the full-size image (the SVG itself for diagrams). A figure that fits is left
 *    alone.
 * 2. Chinese text carries lang="zh-Hans" (screen readers pick the right voice, browsers the right font).
 * 3. Small accessibility repairs of what the theme and extensions emit (see each function).
 * 4. The "中文 / English" switch keeps the reader's place: the section anchor goes along.
 */
(function () {
  "use strict";

  // Scaled below this, text in a figure gets smaller than ~8-9 px: scroll instead of shrinking further.
  var MIN_SCALE = { diagram: 0.7, plot: 0.65 };

  function kindOf(img) {
    // (the head explorer's static picture is its own: shown until its script runs, and in print)
    if (img.closest(".btn, .navbar-brand, .course-card-icon, .attention-explorer")) return null;
    if (img.closest(".cell_output, .output")) return "plot";
    if (img.closest(".bd-article")) return "diagram";
    return null;
  }

  // The width the image is meant to be shown at, read once before this script changes anything: its width
  // attribute or inline style (a plot is a 2x PNG whose metadata, half its pixel size, myst-nb writes as
  // style="width: ...px"), else its natural width (an SVG diagram's own size).
  function intendedWidth(img) {
    if (!img.dataset.courseWidth) {
      img.dataset.courseStyleWidth = img.style.width;
      var w = parseFloat(img.getAttribute("width")) || parseFloat(img.style.width);
      if (!(w > 0) && img.closest(".cell_output, .output")) w = img.naturalWidth / 2;
      img.dataset.courseWidth = String(w > 0 ? w : img.naturalWidth);
    }
    return parseFloat(img.dataset.courseWidth);
  }

  // The width of the column the figure sits in: the nearest block ancestor (the link around an image is an
  // inline box, 0 px wide), outside a strip this script made.
  function columnWidth(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.classList.contains("course-wide") || p.classList.contains("course-wide-strip")) continue;
      var style = getComputedStyle(p);
      if (style.display.indexOf("inline") === 0 || !p.clientWidth) continue;
      return p.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    }
    return document.documentElement.clientWidth;
  }

  function fitFigure(img) {
    var kind = kindOf(img);
    if (!kind || !img.naturalWidth) return;
    var natural = intendedWidth(img);
    var wrap = img.closest(".course-wide");
    var item = img.parentElement.tagName === "A" ? img.parentElement : img; // the image or its link
    if (columnWidth(wrap || item) >= natural * MIN_SCALE[kind]) {
      if (wrap) unwrap(wrap, item, img); // fits (shrunk at most to the legible scale by max-width: 100%)
      return;
    }
    if (!wrap) makeWrap(item);
    img.style.width = Math.round(natural * MIN_SCALE[kind]) + "px";
  }

  // The few words this script writes, in the page's language (the Chinese edition: lang="zh-CN").
  var WORDS = {
    en: { wider: "\u2194 Wider than the screen: scroll it sideways, or open the image to see it whole." },
    zh: { wider: "\u2194 图比屏幕宽：可横向滚动，或点开图片查看全图。" },
  };
  function say(key) {
    return WORDS[document.documentElement.lang.slice(0, 2) === "zh" ? "zh" : "en"][key];
  }

  // A figure too wide for the column scrolls in a strip, with a hint after it (outside the image's link). The
  // image's own link (to the full-size file) is the strip's one Tab stop: the keyboard scrolls the strip
  // from it. An image without a link gets one.
  function makeWrap(item) {
    var wrap = document.createElement("div");
    wrap.className = "course-wide";
    var strip = document.createElement("div");
    strip.className = "course-wide-strip";
    var hint = document.createElement("p");
    hint.className = "course-wide-hint";
    hint.textContent = say("wider");
    item.parentNode.insertBefore(wrap, item);
    if (item.tagName === "IMG") {
      var link = document.createElement("a");
      link.href = item.currentSrc || item.src;
      link.className = "course-wide-link";
      link.appendChild(item);
      item = link;
    }
    strip.appendChild(item);
    wrap.append(strip, hint);
    return wrap;
  }

  function unwrap(wrap, item, img) {
    img.style.width = img.dataset.courseStyleWidth || "";
    if (item.classList && item.classList.contains("course-wide-link")) {
      wrap.parentNode.insertBefore(img, wrap);
    } else {
      wrap.parentNode.insertBefore(item, wrap);
    }
    wrap.remove();
  }

  function fitAll() {
    document.querySelectorAll(".bd-article img").forEach(function (img) {
      if (img.complete) fitFigure(img);
      else img.addEventListener("load", function () { fitFigure(img); }, { once: true });
    });
  }

  // 2. lang="zh-Hans" on every run of Chinese characters (with the punctuation and spaces between them).
  var HAN = /[\u3400-\u9fff\uf900-\ufaff][\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef\s\/·、，。：；（）]*[\u3400-\u9fff\uf900-\ufaff\uff09]|[\u3400-\u9fff\uf900-\ufaff]/g;

  function markChinese(root) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        var p = node.parentElement;
        if (!p || p.closest("script, style, mjx-container, [lang^='zh']")) return NodeFilter.FILTER_REJECT;
        HAN.lastIndex = 0;
        return HAN.test(node.data) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
      },
    });
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    nodes.forEach(function (node) {
      var text = node.data, last = 0, frag = document.createDocumentFragment(), m;
      HAN.lastIndex = 0;
      while ((m = HAN.exec(text))) {
        if (m.index > last) frag.append(text.slice(last, m.index));
        var span = document.createElement("span");
        span.lang = "zh-Hans";
        span.textContent = m[0];
        frag.append(span);
        last = m.index + m[0].length;
      }
      if (last < text.length) frag.append(text.slice(last));
      node.parentNode.replaceChild(frag, node);
    });
  }

  // 3a. sphinxcontrib-bibtex writes role="list" with children of the deprecated role "doc-biblioentry":
  //     a list must own list items.
  function fixBibliography() {
    document.querySelectorAll("[role='list']").forEach(function (list) {
      Array.from(list.children).forEach(function (item) {
        if (item.getAttribute("role") !== "listitem") item.setAttribute("role", "listitem");
      });
    });
  }

  // 3b. The theme's search button is named "Search" but shows "Search Ctrl+K": the accessible name must
  //     contain the visible text (WCAG 2.5.3). Name it by what it shows.
  function fixLabels() {
    document.querySelectorAll("button.search-button-field[aria-label]").forEach(function (b) {
      var shown = b.innerText.replace(/\s+/g, " ").trim();
      if (shown) b.setAttribute("aria-label", shown);
    });
  }

  // 3c. myst-nb names every collapsed cell's <summary> "Toggle hidden content" while it shows "Show solution"
  //     (or "Show code cell source"): let the visible text name it.
  function fixSummaries() {
    document.querySelectorAll("summary[aria-label='Toggle hidden content']").forEach(function (s) {
      s.removeAttribute("aria-label");
    });
  }

  // 3d. The course title at the top of the sidebar sits outside every landmark: it is the site's banner.
  function fixLandmarks() {
    var brand = document.querySelector(".sidebar-primary-items__start > .sidebar-primary-item:has(.navbar-brand)");
    if (brand && !document.querySelector("[role='banner'], body > header:not(.d-none)")) {
      brand.setAttribute("role", "banner");
    }
  }

  // 3e. Formulas are not Tab stops (MathJax's menu, which made each one a stop, is not loaded), except a
  //     displayed formula wider than the column: it scrolls sideways, so the keyboard must be able to reach it.
  function wideMathTabStops() {
    document.querySelectorAll("mjx-container[display='true']").forEach(function (m) {
      if (m.scrollWidth > m.clientWidth + 1) m.tabIndex = 0;
      else m.removeAttribute("tabindex");
    });
  }

  // 4. Both editions keep the English section ids, so the other edition's page has the same #anchor: the
  //    section the reader is in (the last one whose heading has reached the top of the reading area, also
  //    after plain scrolling), else the URL's own anchor. The reading area starts under the sticky top bar
  //    (.bd-header-article, 64 px with its margin): a heading just under it, where a link to its section
  //    puts it (scroll-padding-top), or hidden behind it, is the reader's section.
  function readingTop() {
    var bar = document.querySelector(".bd-header-article");
    var barBottom = bar ? Math.max(bar.getBoundingClientRect().bottom, 0) : 0;
    var padding = parseFloat(getComputedStyle(document.documentElement).scrollPaddingTop) || 0;
    return Math.max(barBottom, padding);
  }

  function currentSection() {
    var here = null;
    var top = readingTop() + 2 * parseFloat(getComputedStyle(document.documentElement).fontSize || "16");
    document.querySelectorAll(".bd-article section[id]").forEach(function (section) {
      var heading = section.querySelector("h1, h2, h3, h4, h5, h6");
      if (heading && heading.getBoundingClientRect().top < top) here = section.id;
    });
    return here;
  }

  function keepAnchorOnSwitch() {
    document.querySelectorAll(".course-lang-switch a[hreflang]").forEach(function (a) {
      a.addEventListener("click", function () {
        // the URL's anchor while its heading is still in view (a section near the page's end cannot
        // scroll up to the top), else the section scrolled to
        var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
        var top = target ? target.getBoundingClientRect().top : -1;
        var id = currentSection();
        var hash = top >= 0 && top < window.innerHeight ? location.hash : id ? "#" + encodeURIComponent(id) : location.hash;
        if (hash) a.href = a.href.split("#")[0] + hash;
      });
    });
  }

  // 5. On a phone the contents (and navigation) drawer closes once a section of this page is chosen: the
  //    page has scrolled to it behind the drawer. (The drawers are the theme's <dialog>s.)
  function closeDrawerOnChoice() {
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("dialog[open] a[href]");
      if (!link) return;
      var dialog = link.closest("dialog");
      var url = new URL(link.href, location.href);
      if (url.pathname === location.pathname && url.hash) {
        setTimeout(function () { dialog.close(); }, 0); // after the browser has followed the link
      }
    });
  }

  // 6. Search results: a snippet is the page's text around the word searched for. Sphinx's own
  //    (searchtools.js) takes the text of [role="main"], which in this theme starts with the header bar
  //    ("中文 / English") and the print-only contents of the page ("Contents 10.1 The online softmax ..."),
  //    and looks for the stemmed word ("rotari" for "rotary"), which the text does not contain: it then showed
  //    the start of that text under every hit. Here the text is the article's alone, the place is that of
  //    the first word of the query as typed (else its stem), and a formula's TeX source
  //    ("\\(H_{kv} = H\\)") reads as plain letters (H_kv = H).
  var TEX_SYMBOLS = { top: "\u22a4", sqrt: "\u221a", cdot: "\u00b7", times: "\u00d7", le: "\u2264", leq: "\u2264",
    ge: "\u2265", geq: "\u2265", ldots: "\u2026", dots: "\u2026", to: "\u2192", infty: "\u221e", approx: "\u2248",
    in: "\u2208", sum: "\u2211", alpha: "\u03b1", beta: "\u03b2", theta: "\u03b8", lambda: "\u03bb", sigma: "\u03c3",
    tau: "\u03c4", phi: "\u03c6", omega: "\u03c9", pi: "\u03c0", mu: "\u03bc", epsilon: "\u03b5" };
  function plainTex(text) {
    return text
      .replace(/\\[()\[\]]|\$\$/g, "")
      .replace(/\\\{/g, "\u0001")
      .replace(/\\\}/g, "\u0002")
      .replace(/\\stackrel\s*\{[^{}]*\}\s*\{([^{}]*)\}/g, "$1")
      .replace(/\\(?:mathbf|mathrm|mathit|mathcal|mathbb|text|textrm|operatorname|boldsymbol)\s*\{([^{}]*)\}/g, "$1")
      .replace(/\\(?:mathbf|mathrm|mathit|mathcal|mathbb|boldsymbol)\s*/g, "")
      .replace(/\\(left|right|,|;|!|quad|qquad)/g, " ")
      .replace(/\\([A-Za-z]+)\s*/g, function (m, w) { return TEX_SYMBOLS[w] || w + " "; })
      .replace(/[{}]/g, "")
      .replace(/\u0001/g, "{")
      .replace(/\u0002/g, "}");
  }

  function articleText(html, anchor) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var main = doc.querySelector("article.bd-article") || doc.querySelector("[role='main']");
    if (!main) return "";
    main.querySelectorAll(".headerlink, script, style, #jb-print-docs-body").forEach(function (e) { e.remove(); });
    var part = null;
    try { part = anchor ? main.querySelector(anchor) : null; } catch (e) { part = null; }
    return plainTex((part || main).textContent).replace(/\s+/g, " ").trim();
  }

  function courseSnippets() {
    var S = typeof Search !== "undefined" ? Search : window.Search; // searchtools.js: a global const
    if (!S || !S.makeSearchSummary || S.makeSearchSummary.course) return;
    S.htmlToText = function (html, anchor) { return articleText(html, anchor); };
    S.makeSearchSummary = function (html, keywords, anchor) {
      var text = articleText(html, anchor);
      if (!text) return null;
      var lower = text.toLowerCase();
      var query = new URLSearchParams(location.search).get("q") || "";
      var words = (typeof splitQuery === "function" ? splitQuery(query) : query.split(/\s+/));
      var at = -1;
      words.concat(Array.from(keywords || [])).some(function (w) {
        at = w ? lower.indexOf(String(w).toLowerCase()) : -1;
        return at > -1;
      });
      var start = Math.max(at - 120, 0);
      var summary = document.createElement("p");
      summary.classList.add("context");
      summary.textContent = (start ? "..." : "") + text.substr(start, 240).trim() + (start + 240 < text.length ? "..." : "");
      return summary;
    };
    S.makeSearchSummary.course = true;
  }

  // 7. The sidebar's search field sticks to the top of the sidebar while its chapter list scrolls; the
  //    sidebar's top padding above it then showed a half-cut line of the list. Once it is stuck, it covers
  //    that strip (course.css: .course-stuck).
  function coverAboveStickySearch() {
    var side = document.querySelector(".bd-sidebar-primary");
    var item = side && side.querySelector(".sidebar-primary-item:has(> .search-button-field)");
    if (!item) return;
    function update() {
      var pad = parseFloat(getComputedStyle(side).paddingTop) || 0;
      var top = item.getBoundingClientRect().top - side.getBoundingClientRect().top;
      item.classList.toggle("course-stuck", side.scrollTop > 0 && top <= pad + 0.5);
    }
    side.addEventListener("scroll", update, { passive: true });
    update();
  }

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  ready(function () {
    markChinese(document.body);
    fixBibliography();
    fixLabels();
    fixSummaries();
    fixLandmarks();
    keepAnchorOnSwitch();
    closeDrawerOnChoice();
    courseSnippets();
    coverAboveStickySearch();
    fitAll();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(wideMathTabStops);
    }
    var pending;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () {
        fitAll();
        wideMathTabStops();
      }, 150);
    });
  });
})();
