# Two entry points: `make demo` and `make test`. Both create the virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(BIN)/npusim warm --quiet   # numba's compiles, once (about a minute), not in the first runs
	touch $@

.PHONY: demo test lint bench docs conformance fuzz
demo: $(VENV)/.installed
	mkdir -p build
	$(BIN)/npusim zoo resnet18 -o build/resnet18.onnx
	$(BIN)/npusim run build/resnet18.onnx --arch mid32 --validate

test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest -q -n 2 --dist loadfile

# a seeded fuzz run over every input surface (199-223 s on 2 cores, measured 2026-11-25); prints counts by surface and outcome
fuzz: $(VENV)/.installed
	$(PY) -m tests.fuzz --cases 10000 --seed 17 --workers 2

bench: $(VENV)/.installed
	$(PY) bench/sim_speed.py
	$(PY) bench/seed_ops.py

docs: $(VENV)/.installed
	$(PY) -m npusim.app.docgen

# onnx's model corpus (model-zoo classics, PyTorch exports) and node tests on mid32 -> docs/conformance.md (83 s, measured 2026-11-25 after the compile-speed work; 266-273 s before)
conformance: $(VENV)/.installed
	$(PY) -m npusim.app.conformance --md docs/conformance.md
