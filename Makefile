# Everything a fresh machine needs: `make run` (operator with a live demo) and `make test`.
# KUBECONFIG is kept out of `make test` (the tests use APPSCHEDULE_TEST_KUBECONFIG or the local cluster).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CLUSTER := $(PYTHON) hack/cluster/localcluster.py

.PHONY: run bench bench-cluster venv crd tools cluster-up cluster-down cluster-status lint typecheck unit integration test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(VENV)/.installed  ## the project and its dev tools in .venv

tools:  ## build etcd, kube-*, kubectl, kwok, helm from pinned Go modules (cached by version)
	$(CLUSTER) tools

cluster-up: tools  ## start the local control plane (reuses a running one)
	$(CLUSTER) up

cluster-down:  ## stop exactly what cluster-up started and remove its state
	$(CLUSTER) down

cluster-status:
	$(CLUSTER) status

run: venv tools  ## the operator with a live demo: current kubeconfig, else the local cluster
	hack/demo.sh

crd: venv  ## regenerate crds/ and the chart's copy from operator/appschedule/models.py
	$(BIN)/appschedule crd -o crds/appschedule.dev_appschedules.yaml
	$(BIN)/appschedule crd -o charts/appschedule-operator/files/appschedule.dev_appschedules.yaml

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

unit: venv  ## APPSCHEDULE_REQUIRE_GO: the live robfig/cron comparison must run, not skip
	APPSCHEDULE_REQUIRE_GO=1 $(BIN)/pytest tests/unit

integration: venv tools  ## starts the local cluster for the session unless one runs (or APPSCHEDULE_TEST_KUBECONFIG is set)
	$(BIN)/pytest tests/integration

test: lint typecheck unit integration  ## what CI runs

bench: venv  ## benchmarks of the pure core, as ratios against a baseline in the same run
	$(BIN)/python bench/bench_core.py

bench-cluster: venv tools  ## the operator on its own local cluster against the floor (BENCHMARKS.md); ARGS=--quick
	$(BIN)/python bench/bench_cluster.py $(ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
