# One command each: install, demo, test, lint, typecheck, bench.
.PHONY: install demo test lint typecheck check bench

UV = $(shell command -v uv 2>/dev/null || echo python3 -m uv)

install:
	scripts/bootstrap.sh

demo: install
	$(UV) run --frozen examples/dev-review/demo.sh

test: install
	scripts/test-deps.sh
	$(UV) run --frozen python -m pytest -q

lint: install
	$(UV) run --frozen ruff check src tests bench
	$(UV) run --frozen lint-imports

typecheck: install
	$(UV) run --frozen mypy

check: lint typecheck test

bench: install
	$(UV) run --frozen python bench/bench_cli.py
	$(UV) run --frozen python bench/bench_engine.py
	$(UV) run --frozen python bench/bench_providers.py
	$(UV) run --frozen python bench/bench_foreach.py
	$(UV) run --frozen python bench/bench_store.py
	$(UV) run --frozen python bench/bench_store_growth.py
