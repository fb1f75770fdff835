# Everything a fresh machine needs: `make run` (operator with a live demo) and `make test`.
# KUBECONFIG is kept out of `make test` (the tests use APPSCHEDULE_TEST_KUBECONFIG or the local cluster).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the venv's Python: the cluster's PKI is made by the project's certificate helper (appschedule/shell/certs.py)
CLUSTER := $(BIN)/python hack/cluster/localcluster.py
# every step of `make test` says how long it took (hack/step); STEP_LOG=FILE collects them
STEP := hack/step

.PHONY: run longest bench bench-page bench-cluster venv crd lock tools node-tools prom-tools browser-tools db-tools node-claim js-fixtures ruby-tools php-tools corpus check-cold cluster-up cluster-down cluster-status lint typecheck unit integration e2e e2e-local test \
	e2e-node soak soak-ci \
	image kind-up kind-down e2e-kind clean

$(VENV)/.installed: pyproject.toml libs/python/pyproject.toml
	$(STEP) venv sh -c "$(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]' -e libs/python"
	touch $@

venv: $(VENV)/.installed  ## the project and its dev tools in .venv

# Everything a test tier runs is made by these prerequisites, never inside a test's timeout: the fixtures only
# check that it is there and fail naming the target when it is not.
tools: venv  ## build etcd, kube-*, kubectl, kwok, helm from pinned Go modules (cached by version)
	$(STEP) tools $(CLUSTER) tools

node-tools: tools node-claim  ## the real node's: Debian's packages (apt-get), kubelet, kube-proxy, CoreDNS, the images it runs (the claim demo's packs libs/node)
	$(STEP) node-tools $(CLUSTER) node-tools

# better-sqlite3 has no prebuilt binary here (GitHub is not reached): node-gyp builds it against the installed Node's
# own headers (nodedir), not headers downloaded from nodejs.org.
node-claim:  ## the Node claim library (libs/node): its dependencies from npm (package-lock.json), compiled with tsc
	$(STEP) node-claim sh -c 'cd libs/node && nodedir=$$(dirname "$$(dirname "$$(readlink -f "$$(command -v node)")")") && \
		if [ -f "$$nodedir/include/node/node.h" ]; then export npm_config_nodedir="$$nodedir"; fi && \
		npm ci --no-audit --no-fund --loglevel=error && npx tsc -p .'

js-fixtures:  ## the frameworks import source is checked against (tests/unit/data/js): node-cron and @nestjs/schedule from npm (package-lock.json)
	$(STEP) js-fixtures sh -c 'cd tests/unit/data/js && npm ci --no-audit --no-fund --loglevel=error'

corpus: venv  ## real published code with schedules (npm, PyPI, and Debian packages' crontabs; pinned by SHA-256 in hack/corpus.py), for the imports' corpus test
	$(STEP) corpus $(BIN)/python hack/corpus.py

db-tools: venv  ## PostgreSQL and MariaDB (Debian's packages, apt-get when missing): the claim's conformance suite
	$(STEP) db-tools $(CLUSTER) db-tools

ruby-tools: venv  ## Ruby and Fugit (Debian's ruby-fugit, apt-get when missing): import source's Solid Queue and sidekiq-cron translations are checked on it
	$(STEP) ruby-tools $(CLUSTER) ruby-tools

php-tools: venv  ## PHP and Laravel (Debian's php-laravel-framework, apt-get when missing): import source's Laravel translations are checked on its own ManagesFrequencies
	$(STEP) php-tools $(CLUSTER) php-tools

browser-tools: venv  ## Chromium and its driver (Debian's packages, apt-get when missing): the page of runs in a real browser
	$(STEP) browser-tools $(CLUSTER) browser-tools

prom-tools: venv  ## Prometheus' server and promtool (Debian's package, apt-get when missing): the alerts' and dashboard's tests
	$(STEP) prom-tools $(CLUSTER) prom-tools

cluster-up: tools  ## start the local control plane (reuses a running one); REAL_NODE=1: a real node instead of kwok's (root)
	$(CLUSTER) up

cluster-down: venv  ## stop exactly what cluster-up started and remove its state
	$(CLUSTER) down

cluster-status: venv
	$(CLUSTER) status

run: venv tools  ## the operator with a live demo: current kubeconfig, else the local cluster
	hack/demo.sh

crd: venv  ## regenerate crds/ and the chart's copy from operator/appschedule/core/models.py
	$(BIN)/appschedule crd -o crds/appschedule.dev_appschedules.yaml
	$(BIN)/appschedule crd -o charts/appschedule-operator/files/appschedule.dev_appschedules.yaml
	$(BIN)/appschedule crd --calendar -o crds/appschedule.dev_appschedulecalendars.yaml
	$(BIN)/appschedule crd --calendar -o charts/appschedule-operator/files/appschedule.dev_appschedulecalendars.yaml

lint: venv  ## ruff, and the import rules of .importlinter (layers, a pure core that never reads the clock)
	$(STEP) lint sh -c '$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports'

typecheck: venv
	$(STEP) typecheck $(BIN)/mypy

unit: venv db-tools node-claim js-fixtures ruby-tools php-tools corpus  ## and the claim's conformance suite (SQLite, PostgreSQL, MariaDB); APPSCHEDULE_REQUIRE_GO: the live robfig/cron comparison must run, not skip
	APPSCHEDULE_REQUIRE_GO=1 $(STEP) unit $(BIN)/pytest tests/unit tests/claim

integration: venv tools prom-tools browser-tools  ## starts the local cluster for the session unless one runs (or APPSCHEDULE_TEST_KUBECONFIG is set)
	$(STEP) integration $(BIN)/pytest tests/integration

e2e: venv tools  ## the user's scenario (tests/e2e) against KUBECONFIG, else the local cluster
	$(BIN)/pytest tests/e2e

e2e-local: venv tools  ## tests/e2e on the local cluster, whatever KUBECONFIG says
	env -u KUBECONFIG -u APPSCHEDULE_E2E_IMAGE -u REAL_NODE $(STEP) e2e-local $(BIN)/pytest tests/e2e

# The real node (hack/cluster/realnode.py) on a cluster of its own, ports shifted by 4000: containerd, kubelet
# and kube-proxy run pods for real, so it needs root; it fails and says why when it cannot start
# (APPSCHEDULE_ALLOW_NO_REAL_NODE=1: skip instead).
NODE_CLUSTER := APPSCHEDULE_CLUSTER_DIR=$${APPSCHEDULE_CACHE:-$$HOME/.cache/appschedule-operator}/node-cluster \
	APPSCHEDULE_PORT_OFFSET=4000 REAL_NODE=1
e2e-node: venv tools node-tools  ## tests/e2e on a real node: the operator image (node-tools) from the chart, task pods really run
	env -u KUBECONFIG -u APPSCHEDULE_E2E_IMAGE $(NODE_CLUSTER) $(STEP) e2e-node $(BIN)/pytest tests/e2e

test: lint typecheck unit integration e2e-local e2e-node soak-ci  ## what CI runs

check-cold:  ## `make test` on a clean clone with every cache empty (COLD_ROOT, default a new temp dir), timed by step
	hack/check-cold.sh

# The chaos soak (tests/soak/soak.py, RELIABILITY.md) on a cluster of its own: it stops the API server and the
# controller manager, so it never shares the test cluster.
SOAK_MINUTES ?= 10
SOAK_SEED ?= 1
soak: venv tools  ## the chaos soak: SOAK_MINUTES (default 10) of chaos, seeded by SOAK_SEED; the ledger against the audit log
	$(BIN)/python -m tests.soak.soak --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)

soak-ci: venv tools  ## the short soak CI runs: 3 minutes, three replicas sharing 3 shards, a seed whose plan has every kind of chaos
	$(STEP) soak-ci $(BIN)/python -m tests.soak.soak --minutes 3 --seed 5 --shards 3

longest: venv  ## the N (default 10) longest functions of the operator's code, longest first
	$(BIN)/python hack/lint/longest.py $(N)

bench: venv  ## benchmarks of the pure core, as ratios against a baseline in the same run
	$(BIN)/python bench/bench_core.py

bench-page: venv browser-tools  ## the page of runs (kubectl appschedule ui) in headless Chromium: 100 AppSchedules of 5 tasks against none
	$(BIN)/python bench/bench_page.py

bench-cluster: venv tools  ## the operator on its own local cluster against the floor (BENCHMARKS.md); ARGS=--quick
	$(BIN)/python -m bench.cluster $(ARGS)

lock:  ## resolve image.lock (the image's dependencies) from pyproject.toml in a clean virtualenv
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet --disable-pip-version-check .
	{ sed -n '1,2p' image.lock; .lock-venv/bin/pip freeze --exclude appschedule-operator; } > image.lock.new
	mv image.lock.new image.lock && rm -rf .lock-venv

# For users with Docker and kind (no image can be pulled on our CI machines: these do not run there).
IMAGE ?= appschedule-operator:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
KIND_CLUSTER ?= appschedule
KIND_KUBECONFIG := $(CURDIR)/.kind-kubeconfig

image:  ## build the operator image (IMAGE=registry/you/appschedule-operator:tag to push elsewhere)
	docker build -t $(IMAGE) .

kind-up:  ## a kind cluster for the e2e tests (its kubeconfig in .kind-kubeconfig)
	kind get clusters | grep -qx '$(KIND_CLUSTER)' || kind create cluster --name $(KIND_CLUSTER) --wait 120s
	kind get kubeconfig --name $(KIND_CLUSTER) > $(KIND_KUBECONFIG)

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)
	rm -f $(KIND_KUBECONFIG)

e2e-kind: venv tools kind-up image  ## kind cluster, image loaded into it, tests/e2e with the chart's own pod
	kind load docker-image $(IMAGE) --name $(KIND_CLUSTER)
	KUBECONFIG=$(KIND_KUBECONFIG) APPSCHEDULE_E2E_IMAGE=$(IMAGE) PATH=$(CURDIR)/.tools/bin:$$PATH $(BIN)/pytest tests/e2e

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache .kind-kubeconfig
