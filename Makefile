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

.PHONY: demo test lint bench docs conformance fuzz torch-corpus notebooks
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

# run every notebook at SIZE = "full" and store its outputs in the file (the suite checks that they match the code)
notebooks: $(VENV)/.installed
	$(PY) notebooks/execute.py

# onnx's model corpus (model-zoo classics, PyTorch exports) and node tests on mid32 -> docs/conformance.md
# (48 s, measured 2026-11-28; 266-273 s before the compile-speed work)
conformance: $(VENV)/.installed
	$(PY) -m npusim.app.conformance --md docs/conformance.md

# torchvision and transformers models with random weights, exported by both of torch's ONNX exporters and run on mid32
# with values -> docs/torch-corpus.md (42 runs in 10 min on a quiet 2-core machine, 19-21 min with other work on it,
# measured 2026-11-28; building .venv-torch once: 4.3 min). torch lives in its own environment: the core and its
# tests never need it.
# torch and torchvision as pip installs them from the package registry (the CUDA builds, ~6 GB: the registry's
# torchvision does not load with a CPU-only torch wheel); TORCHVISION must pair with TORCH.
TORCH_VENV ?= .venv-torch
TORCH ?= torch==2.14.1
TORCHVISION ?= torchvision==0.29.1
$(TORCH_VENV)/.installed: pyproject.toml
	python3 -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(TORCH_VENV)/bin/python -m pip install -q -e '.[torch]' $(TORCH) $(TORCHVISION) 'transformers>=4.45'
	$(TORCH_VENV)/bin/npusim warm --quiet
	touch $@

torch-corpus: $(TORCH_VENV)/.installed
	mkdir -p build
	$(TORCH_VENV)/bin/python -m npusim.app.torch_corpus --md docs/torch-corpus.md --json build/torch-corpus.json
