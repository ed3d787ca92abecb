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
# scripts/pg-versions.sh). PG_CONFIG: which pg_config `all`, `install` and `installcheck` use.
#
# PGXN (META.json): pgxnclient builds a distribution with `make PG_CONFIG=... all`, then
# `make PG_CONFIG=... install` (and `installcheck` for `pgxn check`); `make dist` writes the
# archive to upload. `all` and `install` need cargo-pgrx 0.18.1, and build for PG_CONFIG's
# major version (the feature pgNN, from `$(PG_CONFIG) --version`), always with
# PGRX_PG_CONFIG_PATH=$(PG_CONFIG): the bindings come from the headers of the server installed
# into, not from whatever pg_config `cargo pgrx init` recorded for that major (another minor
# release, other configure options), and a PGXN user who never ran `cargo pgrx init` needs no
# config.toml.

PG ?= 15
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
CARGO_TARGET_DIR ?= $(HOME)/.cache/idgen/target
export CARGO_TARGET_DIR
VERSION := $(shell sed -nE 's/^version = "([^"]+)"$$/\1/p' Cargo.toml | head -1)
PGRX_VERSION := 0.18.1
PG_MAJOR = $(shell $(PG_CONFIG) --version 2>/dev/null | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p')
pgrx_env = PGRX_PG_CONFIG_PATH=$(PG_CONFIG)
# Stops with the reason before a build that cannot work: no cargo-pgrx 0.18.1, a pg_config that
# does not run, a major version idgen has no feature for.
pgrx_ready = @cargo pgrx --version 2>/dev/null | grep -q ' $(PGRX_VERSION)$$' || \
	{ echo 'idgen builds with cargo-pgrx $(PGRX_VERSION): cargo install cargo-pgrx --version =$(PGRX_VERSION) --locked' >&2; exit 1; }; \
	case '$(PG_MAJOR)' in 15|16|17|18) ;; *) \
	echo "idgen builds for PostgreSQL 15 to 18; PG_CONFIG=$(PG_CONFIG) says: $$($(PG_CONFIG) --version 2>&1 | head -1)" >&2; exit 1;; esac

.DEFAULT_GOAL := help
.PHONY: help deps all check check-model fmt lint install installcheck test test-all bench \
	bench-quick deb demo docs monitoring-check dist

help: ## this list
	@awk -F':.*## ' '/^[a-z-]+:.*## / { printf "  make %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: ## (root) Debian packages, cargo-pgrx 0.18.1, `cargo pgrx init`: scripts/setup.sh
	bash -c 'source scripts/setup.sh && idgen_setup'

check: ## (no root, no server) layers, DESIGN.md's test names, commit messages, core tests, format, META.json
	python3 scripts/check-layers.py --self-test
	python3 scripts/check-layers.py
	python3 scripts/check-design-tests.py --self-test
	python3 scripts/check-design-tests.py
	python3 scripts/check-commits.py
	python3 scripts/check-pgxn.py --self-test
	python3 scripts/check-pgxn.py
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

all: ## (no root) the release build for PG_CONFIG's PostgreSQL, staged in CARGO_TARGET_DIR
	$(pgrx_ready)
	$(pgrx_env) cargo pgrx package --pg-config $(PG_CONFIG) --out-dir $(CARGO_TARGET_DIR)/pgxn/pg$(PG_MAJOR)

install: ## (root) the release build into PG_CONFIG's PostgreSQL
	$(pgrx_ready)
	$(pgrx_env) cargo pgrx install --release --pg-config $(PG_CONFIG)

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

dist: ## the PGXN archive of HEAD, CARGO_TARGET_DIR/idgen-VERSION.zip (META.json checked first)
	python3 scripts/check-pgxn.py
	@git diff --quiet HEAD -- META.json Cargo.toml idgen.control || \
		{ echo 'dist: commit META.json, Cargo.toml and idgen.control first: the archive is HEAD' >&2; exit 1; }
	mkdir -p $(CARGO_TARGET_DIR)
	git archive --format zip --prefix idgen-$(VERSION)/ -o $(CARGO_TARGET_DIR)/idgen-$(VERSION).zip HEAD
	@echo $(CARGO_TARGET_DIR)/idgen-$(VERSION).zip
