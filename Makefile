# idgen's tasks, each a thin wrapper over cargo or scripts/ (read the script for the details).
# `make help` lists them. Only `deps`, `install`, `test`, `test-all`, `deb`, `demo` and `bench`
# need root: they install packages or write into PostgreSQL's directories. `check` needs no root,
# no PostgreSQL and no network, and takes seconds on a built tree.
#
# `docs` needs neither root nor PostgreSQL (mkdocs-material from PyPI into a venv under
# ~/.cache/idgen). `monitoring-check` needs no PostgreSQL; root only to install promtool
# (Debian's prometheus) and python3-yaml the first time.
#
# PG: the PostgreSQL major version (15 is Debian's; 16, 17, 18 are fetched by
# scripts/pg-versions.sh). PG_CONFIG: which pg_config `install` and `installcheck` use.

PG ?= 15
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
CARGO_TARGET_DIR ?= $(HOME)/.cache/idgen/target
export CARGO_TARGET_DIR

.DEFAULT_GOAL := help
.PHONY: help deps check check-model fmt lint install installcheck test test-all bench \
	bench-quick deb demo docs monitoring-check

help: ## this list
	@awk -F':.*## ' '/^[a-z-]+:.*## / { printf "  make %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: ## (root) Debian packages, cargo-pgrx 0.18.1, `cargo pgrx init`: scripts/setup.sh
	bash -c 'source scripts/setup.sh && idgen_setup'

check: ## (no root, no server) layers, DESIGN.md's test names, commit messages, core tests, format
	python3 scripts/check-layers.py --self-test
	python3 scripts/check-layers.py
	python3 scripts/check-design-tests.py --self-test
	python3 scripts/check-design-tests.py
	python3 scripts/check-commits.py
	cargo test -p idgen-core --lib
	cargo fmt --all --check
	@# The version reaches the scripts: make -n prints both commands with it.
	@test "$$($(MAKE) -s -n test deb PG=16 | grep -c -- '--pg 16$$')" = 2 || \
		{ echo 'make test/deb do not pass PG=16 on'; exit 1; }

check-model: ## (no root, no server) the registry protocol's model check, about a minute
	cargo test -p idgen-core --release --test registry_model -- --test-threads=1

lint: ## clippy over the extension (PG's headers) and the core
	cargo clippy --features pg$(PG) --all-targets -- -D warnings
	cargo clippy -p idgen-core --all-targets -- -D warnings

fmt: ## cargo fmt over the workspace
	cargo fmt --all

install: ## (root) the release build into PG_CONFIG's PostgreSQL
	cargo pgrx install --release --pg-config $(PG_CONFIG)

installcheck: ## the pg_regress golden files against the installed idgen (a server of its own)
	cd tests/cluster && IDGEN_PG_BIN=$$($(PG_CONFIG) --bindir) \
		cargo test --release --test pg_regress -- --test-threads=1

test: ## (root) the whole suite on PostgreSQL PG (default 15): scripts/test.sh --pg PG
	bash scripts/test.sh --pg $(PG)

test-all: ## (root) what CI runs, the README's test command: scripts/test.sh
	bash scripts/test.sh

bench: ## (root) the benchmark against PostgreSQL's own generators, about 20 minutes
	bash scripts/bench.sh

bench-quick: ## (root) every benchmark cell at a tiny size, in seconds
	bash scripts/bench.sh --quick

deb: ## (root) the Debian package for PostgreSQL PG (default 15): scripts/package.sh --pg PG
	bash scripts/package.sh --pg $(PG)

demo: ## (root) the demo on real data: scripts/demo.sh
	bash scripts/demo.sh

docs: ## the docs site from docs/ (mkdocs-material, --strict): scripts/docs.sh
	bash scripts/docs.sh

monitoring-check: ## (no server; root once, for promtool) alert rules, their tests, metric names
	bash scripts/monitoring-check.sh
