/* The course site's own behaviour (loaded on every page after the theme's scripts are declared).
 *
 * 1. Wide figures on narrow screens: a diagram or plot that would shrink below a legible scale when fitted to
 *    the column is shown at that scale in a strip that scrolls sideways, with a visible hint and a link to the
 *    full-size image (the SVG itself for diagrams).
 * 2. Chinese text carries lang="zh-Hans" (screen readers pick the right voice, browsers the right font).
 * 3. Small accessibility repairs of what the theme and extensions emit (see each function).
 * 4. The "中文 / English" switch keeps the reader's place: the section anchor goes along.
 */
(function () {
  "use strict";

  // Scaled below this, text in a figure gets smaller than ~8-9 px: scroll instead of shrinking further.
  var MIN_SCALE = { diagram: 0.7, plot: 0.65 };

  function kindOf(img) {
    if (img.closest(".btn, .navbar-brand, .course-card-icon")) return null;
    if (img.closest(".cell_output, .output")) return "plot";
    if (img.closest(".bd-article")) return "diagram";
    return null;
  }

  // The width the image is meant to be shown at: its width attribute (retina PNGs carry half their pixel
  // width there) or its natural width.
  function intendedWidth(img) {
    var w = parseFloat(img.getAttribute("width"));
    return w > 0 ? w : img.naturalWidth;
  }

  function fitFigure(img) {
    var kind = kindOf(img);
    if (!kind || !img.naturalWidth) return;
    var wrap = img.closest(".course-wide");
    var box = wrap ? wrap.parentElement : img.parentElement;
    var column = box.clientWidth;
    var natural = intendedWidth(img);
    var scale = column / natural;
    if (scale >= MIN_SCALE[kind]) {
      if (wrap) unwrap(wrap, img);
      return;
    }
    if (!wrap) wrap = makeWrap(img, kind);
    img.style.width = Math.round(natural * MIN_SCALE[kind]) + "px";
  }

  // The few words this script writes, in the page's language (the Chinese edition: lang="zh-CN").
  var WORDS = {
    en: { diagram: "Diagram (scrolls sideways)", plot: "Plot (scrolls sideways)",
          wider: "\u2194 Wider than the screen: scroll sideways, or ", "full size": "open it full size", end: "." },
    zh: { diagram: "图（可横向滚动）", plot: "绘图（可横向滚动）",
          wider: "\u2194 图比屏幕宽：可横向滚动，或", "full size": "打开原尺寸图", end: "。" },
  };
  function say(key) {
    return WORDS[document.documentElement.lang.slice(0, 2) === "zh" ? "zh" : "en"][key];
  }

  function makeWrap(img, kind) {
    var wrap = document.createElement("div");
    wrap.className = "course-wide";
    var strip = document.createElement("div");
    strip.className = "course-wide-strip";
    strip.tabIndex = 0; // keyboard users can scroll it too
    strip.setAttribute("role", "region");
    strip.setAttribute("aria-label", say(kind === "diagram" ? "diagram" : "plot"));
    var hint = document.createElement("p");
    hint.className = "course-wide-hint";
    var link = document.createElement("a");
    link.href = img.currentSrc || img.src;
    link.textContent = say("full size");
    link.target = "_blank";
    link.rel = "noopener";
    hint.append(say("wider"), link, say("end"));
    img.parentNode.insertBefore(wrap, img);
    strip.appendChild(img);
    wrap.append(strip, hint);
    return wrap;
  }

  function unwrap(wrap, img) {
    img.style.width = "";
    wrap.parentNode.insertBefore(img, wrap);
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

  // 4. Both editions keep the English section ids, so the other edition's page has the same #anchor.
  function keepAnchorOnSwitch() {
    document.querySelectorAll(".course-lang-switch a[hreflang]").forEach(function (a) {
      a.addEventListener("click", function () {
        if (location.hash) a.href = a.href.split("#")[0] + location.hash;
      });
    });
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
