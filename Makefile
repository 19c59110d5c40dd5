# drctl developer targets. Each one installs into .venv what it needs, so they work on a fresh
# Debian machine with Python 3.11 (`make deps` installs the Debian tools they need, listed in .ci/debian-tools).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.drctl-installed
CONFIG ?= config/fleet.yaml
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: deps venv test test-e2e test-stacks test-crash demo down lint mutate

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# System packages from Debian: the tools in .ci/debian-tools (the one list, which .ci/run installs
# too), and venv support for Python. As root this installs them; otherwise through sudo.
deps:
	@SUDO="$(SUDO)" .ci/install-debian-tools
	@test -x $(BIN)/python || $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
	    echo "installing python3-venv from Debian"; \
	    $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }

venv: deps $(STAMP)

MUTATE_STAMP := $(VENV)/.drctl-mutate-installed
MUTATE_CHILDREN ?= 1
MUTATE_MIN ?= 90

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# Staged on purpose: resolved in one command with everything else, pip backtracks through
	# dozens of botocore releases; with boto3 and moto settled first it resolves at once.
	$(BIN)/pip install --quiet 'boto3>=1.44,<1.45' 'botocore>=1.44,<1.45' 'moto[server]>=5.2,<5.3'
	$(BIN)/pip install --quiet -e '.[devstack,test,dev]'
	touch $(STAMP)

# Four shards, each inside the 20-minute budget on 2 cores; CI runs them all, and together they run
# every test once (tests/conftest.py marks them). `test`: lint, then the tests on no dev stack.
# `test-e2e`: the workflows' tests on the session dev stack, two lanes, one stack per worker.
# `test-stacks`: the other session-stack tests (two lanes) and the tests that bring up a private dev
# stack of their own (bench smoke runs, the HAProxy 3.2 stack, `drctl dev up/down`). `test-crash`:
# worker SIGKILLs and Temporal restarts (~17 min, mostly Temporal's retry timeouts).
test: lint
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "not crash and not ownstack and not devstack and not flows"

test-e2e: venv
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "flows and not crash"

test-stacks: venv
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "(ownstack or devstack) and not flows and not crash"

test-crash: venv
	$(BIN)/pytest -q -m crash

# The main job on the embedded dev stack: stack + one worker per region + the health monitor, then
# an operator's failover of all traffic to us-east-1, with its phases, measured RTO and UI link.
demo: venv
	$(BIN)/drctl dev up -c $(CONFIG)
	$(BIN)/drctl monitor start -c $(CONFIG)
	$(BIN)/drctl replicate start -c $(CONFIG)
	$(BIN)/drctl status -c $(CONFIG)
	$(BIN)/drctl failover -c $(CONFIG) --to us-east-1 --yes
	$(BIN)/drctl status -c $(CONFIG)
	@echo
	@echo "The fleet is failed over to us-east-1 on purpose (drctl status exits 0 and says so)."
	@echo "Temporal UI: http://127.0.0.1:8233  (workflows monitor/dev and failover/dev)"
	@echo "Fail back to the configured weights: $(BIN)/drctl failback -c $(CONFIG) --yes"
	@echo "Stop everything: make down"

down: venv
	$(BIN)/drctl dev down -c $(CONFIG)

lint: venv
	$(BIN)/ruff format --check drctl tests workflows activities bench
	$(BIN)/ruff check drctl tests workflows activities bench
	$(BIN)/mypy drctl workflows activities
	$(BIN)/lint-imports
	$(BIN)/vulture

$(MUTATE_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet -e '.[mutate]'
	touch $(MUTATE_STAMP)

# Mutation testing of the pure modules (drctl/models, drctl/chaos, drctl/providers/errors.py; see
# [tool.mutmut] in pyproject.toml) against the fast unit tests: prints the score and every mutant
# not killed, and fails below MUTATE_MIN %. Always a fresh run: mutmut keeps earlier verdicts, so a
# test added since would not count. MUTATE_CHILDREN=N tests N mutants at once (default 1).
mutate: venv $(MUTATE_STAMP)
	rm -rf mutants
	mkdir -p mutants
	$(BIN)/mutmut run --max-children $(MUTATE_CHILDREN) > mutants/run.log 2>&1 || { tail -c 3000 mutants/run.log; exit 1; }
	$(BIN)/python tests/units/mutation_score.py --min $(MUTATE_MIN)
