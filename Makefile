# Two entry points: `make demo` and `make test`. Both create the virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: demo test lint bench docs
demo: $(VENV)/.installed
	$(BIN)/npusim presets
	$(BIN)/npusim simulate examples/gemm_int8.s --arch edge16 --inputs examples/gemm_int8.npz
	$(PY) examples/gemm_demo.py
	-$(BIN)/npusim simulate examples/deadlock.s --arch edge16

test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest -q

bench: $(VENV)/.installed
	$(PY) bench/sim_speed.py

docs: $(VENV)/.installed
	$(PY) -m npusim.docgen
