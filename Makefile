# Two commands on a fresh clone:  `make book`  and  `make test`.  Everything else is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: help setup test unit notebooks book execute bench clean browser-deps

help:
	@echo "make book      build the website into _build/html (creates .venv on first use)"
	@echo "make test      run every test: library, notebooks (nbval), site"
	@echo "make execute   re-execute every chapter in place (commit the outputs afterwards)"
	@echo "make bench     speed and memory benchmarks (not part of make test)"

# The course environment: pinned versions from requirements.txt, d2l (the tests' reference) without its
# old pins, and attention_lib itself in editable mode.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps d2l==1.0.3
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist loadscope tests chapters \
	    --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

unit: $(STAMP)
	$(PY) -m pytest -n $(JOBS) tests

notebooks: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist loadscope chapters \
	    --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

execute: $(STAMP)
	$(PY) tools/execute_notebooks.py chapters/*.ipynb

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpicky --keep-going

bench: $(STAMP)
	$(PY) bench/bench_attention.py

clean:
	rm -rf _build
