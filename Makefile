# One command each: install, demo, test, lint, typecheck, bench. `make test` is what CI runs:
# lint (ruff, import layers), the type check and the whole test suite.
.PHONY: install install-runtimes install-dev demo test lint typecheck check bench screenshots

# uv on PATH, else the one scripts/bootstrap.sh fetched into .cache/uv (a PEP 668 Python)
UV = $(shell command -v uv 2>/dev/null || { test -x .cache/uv/bin/uv && echo .cache/uv/bin/uv; } || echo python3 -m uv)
RUN = $(UV) run --frozen --no-sync -q
# `make test` runs the test files on TEST_WORKERS pytest-xdist workers, each file whole on one
# worker (docs/testing.md, docs/decisions/0034-parallel-test-suite.md); `make test
# TEST_WORKERS=0` runs them in one process. A plain `pytest tests/FILE.py` is never parallel.
TEST_WORKERS ?= 3

install:
	scripts/bootstrap.sh

install-runtimes:
	scripts/bootstrap.sh --runtimes

install-dev:
	scripts/bootstrap.sh --dev

demo: install
	$(RUN) examples/dev-review/demo.sh

test: install-dev
	scripts/test-deps.sh
	$(RUN) ruff check src tests bench
	$(RUN) lint-imports
	$(RUN) mypy
	$(RUN) python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: install-dev
	$(RUN) ruff check src tests bench
	$(RUN) lint-imports

typecheck: install-dev
	$(RUN) mypy

check: test

# The console screenshots in docs/img, from the browser tests (the suite alone writes them to a
# temporary folder).
screenshots: install-dev
	PODIUM_SCREENSHOTS=docs/img $(RUN) python -m pytest -q tests/web/test_browser.py tests/web/test_browser_live.py

bench: install-dev
	$(RUN) python bench/bench_cli.py
	$(RUN) python bench/bench_engine.py
	$(RUN) python bench/bench_providers.py
	$(RUN) python bench/bench_foreach.py
	$(RUN) python bench/bench_store.py
	$(RUN) python bench/bench_store_growth.py
