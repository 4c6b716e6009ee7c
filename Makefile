# One task runner for people and CI. `make demo` and `make test` do all their own set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FLOOR := .venv-floor
# A CPU build of torch where this machine keeps one (the torch.profiler tests need it; PyPI's is a CUDA build)
TORCH_CPU_WHEEL ?= $(firstword $(wildcard /opt/wheels/torch-*+cpu-*.whl))

.PHONY: demo test test-quick test-floor lint docs bench system-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	$(if $(TORCH_CPU_WHEEL),$(BIN)/pip install -q '$(TORCH_CPU_WHEEL)',@echo "no CPU torch wheel: the torch.profiler tests are skipped")
	touch $(STAMP)

system-deps:
	./scripts/install-system-deps.sh

demo: $(STAMP)
	mkdir -p demo-out
	$(BIN)/nsync analyze fixtures/h200/print_deg.sqlite.xz --json demo-out/print_deg.json
	@echo "healthy twin, for comparison:"
	$(BIN)/nsync analyze fixtures/h200/print_ok.sqlite.xz --top 3

lint: $(STAMP)
	$(BIN)/ruff check nsync tests benchmarks
	$(BIN)/ruff format --check nsync tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/cog --check docs/cli.md
	@! grep -rnE --include="*.py" "iterrows|itertuples|apply\(.*axis=1" nsync/ || (echo "per-row Python on the data path"; exit 1)

# docs/cli.md's --help blocks, from the code (make lint fails when they are stale)
docs: $(STAMP)
	$(BIN)/cog -r docs/cli.md

test: system-deps $(STAMP) lint
	$(BIN)/pytest -q

# The quick subset while working (under a minute here, on two cores): no real nsys, browser, wheel build or
# nsync subprocess, so its tests can run side by side.
test-quick: $(STAMP)
	$(BIN)/pytest -q -m "not slow" -n 2

# The suite again on the lowest versions pyproject.toml declares (uv's lowest-direct resolution), so that
# the floors are versions that work. The wheel's own test is left to `make test`.
test-floor: $(STAMP)
	rm -rf $(FLOOR) build
	$(BIN)/uv venv -q --python $(PYTHON) $(FLOOR)
	$(BIN)/uv pip install -q --python $(FLOOR)/bin/python --resolution lowest-direct '.[test]'
	$(FLOOR)/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/test_wheel.py

clean:
	rm -rf $(VENV) $(FLOOR) demo-out .pytest_cache .ruff_cache

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_fixtures.py
	$(BIN)/python -m benchmarks.bench_scale
	$(BIN)/python -m benchmarks.bench_ranks
	$(BIN)/python -m benchmarks.bench_kineto
