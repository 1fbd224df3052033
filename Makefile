# tenzro-train: `make demo` runs the main job, `make test` runs every suite.
# Both bootstrap first (idempotent: a second run only checks timestamps).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/node_modules/.bin
export PATH := $(NODE_BIN):$(BIN):$(PATH)
# py-solc-x (ape-solidity) finds the solc adapter of this checkout, not another clone's.
export SOLCX_BINARY_PATH := $(CURDIR)/.solc
# ape's data folder (dependency packages, node processes) per checkout too: nothing in $HOME
# that another clone, or an older machine image, left behind can change what compiles here.
export APE_DATA_FOLDER := $(CURDIR)/.ape
# ape talks to the devnet's anvil (not a throw-away one) for deploy and the demo.
# Ports of this checkout's devnet: `make demo RPC_PORT=8546 IPFS_PORT=5002` beside another checkout's.
DEVNET_PORT ?= 8545
RPC_PORT ?= $(DEVNET_PORT)
IPFS_PORT ?= 5001
DEVNET_RPC := http://127.0.0.1:$(RPC_PORT)
IPFS_API := http://127.0.0.1:$(IPFS_PORT)
DEVNET_PORTS = --rpc-port $(RPC_PORT) --ipfs-port $(IPFS_PORT)
# status and down: the ports given (RPC_PORT=... / IPFS_PORT=... / DEVNET_PORT=...), else the ones the
# devnet recorded in .devnet/pids.json when it started
GIVEN_PORTS = $(if $(filter-out file undefined,$(origin RPC_PORT) $(origin DEVNET_PORT)),--rpc-port $(RPC_PORT)) \
	$(if $(filter-out file undefined,$(origin IPFS_PORT)),--ipfs-port $(IPFS_PORT))
NETWORK := ethereum:local:foundry
PYTEST_ARGS ?=
# pytest's worker processes (pytest-xdist; 0 runs in one process). The devnet suites mostly wait on
# chain and IPFS round trips, so three workers keep two cores busy; each test file stays on one worker.
PYTEST_WORKERS ?= 3

.PHONY: bootstrap demo demo-hosts demo-adversarial test test-fast gpu-check devnet-up devnet-down devnet-status deploy compile clean-devnet

bootstrap: $(VENV)/.installed node_modules/.installed .solc/solc

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-cache-dir --upgrade pip setuptools wheel
	# torch first, pinned: a bare requirement would pull the CUDA build.
	$(BIN)/pip install -q --no-cache-dir torch==2.13.0
	$(BIN)/pip install -q --no-cache-dir -e ".[dev]"
	@touch $@

# `npm install` against the lock, not `npm ci`: the registry serves only this platform's
# @foundry-rs binaries, so the lock cannot list the other platforms' optional packages
# and `npm ci` refuses it as out of sync.
node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	@test -x node_modules/node/bin/node || { echo "node_modules/node/bin/node missing: Node 22 did not install"; exit 1; }
	@touch $@

.solc/solc: node_modules/.installed scripts/toolchain/install-solc.sh scripts/toolchain/solc-adapter.cjs
	scripts/toolchain/install-solc.sh

compile: bootstrap
	ape compile

devnet-up: bootstrap
	$(BIN)/python scripts/devnet.py up $(DEVNET_PORTS)

devnet-down:
	$(BIN)/python scripts/devnet.py down $(GIVEN_PORTS)

devnet-status:
	$(BIN)/python scripts/devnet.py status $(GIVEN_PORTS)

deploy: devnet-up compile
	$(BIN)/python scripts/devnet.py check $(DEVNET_PORTS)
	APE_FOUNDRY_HOST=$(DEVNET_RPC) TENZRO_IPFS_API=$(IPFS_API) ape run deploy --network $(NETWORK)

# `make demo TRAINERS=8 QUORUM=6`: M and K of the demo run (unset: the demo's defaults).
demo: deploy
	$(BIN)/python -m tenzro_operator.demo --rpc $(DEVNET_RPC) --ipfs $(IPFS_API) $(if $(TRAINERS),--trainers $(TRAINERS)) $(if $(QUORUM),--quorum $(QUORUM))

# The same job with every party on its own host: network namespaces (root and iproute2), a chain host
# with its own anvil and deployment, one IPFS node per host; ends with the bytes per trainer host per round.
demo-hosts: compile
	$(BIN)/python -m tenzro_operator.demo_hosts $(if $(TRAINERS),--trainers $(TRAINERS)) $(if $(QUORUM),--quorum $(QUORUM)) $(if $(CUT),--cut $(CUT)) $(if $(KILL_NODE),--kill-node $(KILL_NODE)) $(if $(CAP),--cap $(CAP))

# The honest set-up on the root flow plus a lying syncer, a copycat, a sign flipper and a false
# invalid report; a watcher proves the lie; ends with `caught: X of Y` (exit 1 unless all caught).
demo-adversarial: deploy
	$(BIN)/python -m tenzro_operator.demo_adversarial --rpc $(DEVNET_RPC) --ipfs $(IPFS_API)

test: bootstrap
	scripts/toolchain/forge test
	# one compile before the workers, which then read its artifacts instead of racing to write them; --force:
	# ape does not recompile an interface whose parent changed (ITrainingRegistryFull kept a stale ABI)
	ape compile --force
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

test-fast: bootstrap
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" $(PYTEST_ARGS)

clean-devnet: devnet-down
	rm -rf .devnet deployments/local.json

# The prepared device check (scripts/gpu_check.py): on a lent GPU machine `make gpu-check` (its python3
# holds PyTorch; carry .gpu-bundle, built here by `.venv/bin/python scripts/gpu_check.py bundle`);
# `make gpu-check DRY_RUN=1`: the CPU half of every stage (CI runs it through tests/trainer/test_gpu_check.py).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-check:
	$(GPU_PYTHON) scripts/gpu_check.py $(if $(DRY_RUN),--dry)
