# rackgate: `make demo` runs the whole path on the container rack; `make test` runs every test.
# Both install what they need first (scripts/bootstrap.sh) and are safe to run twice.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export CONTAINERS_CONF := $(CURDIR)/molecule/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Debian mirrors: this machine's own APT sources (scripts/debian-mirror.sh), unless set in
# the environment or on the command line. Read by scripts/build-image.sh and the molecule
# scenarios (molecule.yml expands them). ?= alone would rerun the probe for every recipe
# line; the := lines expand it once.
RACKGATE_DEBIAN_MIRROR ?= $(shell $(CURDIR)/scripts/debian-mirror.sh)
RACKGATE_DEBIAN_SECURITY_MIRROR ?= $(shell $(CURDIR)/scripts/debian-mirror.sh --security)
RACKGATE_DEBIAN_MIRROR := $(RACKGATE_DEBIAN_MIRROR)
RACKGATE_DEBIAN_SECURITY_MIRROR := $(RACKGATE_DEBIAN_SECURITY_MIRROR)
export RACKGATE_DEBIAN_MIRROR RACKGATE_DEBIAN_SECURITY_MIRROR
# The demo inventory's BMC password is vaulted (vault id "demo"); a real site sets its own.
export ANSIBLE_VAULT_IDENTITY_LIST ?= demo@$(CURDIR)/molecule/demo-bmc/vault-password.txt
DEMO_INVENTORY := inventory/demo

.PHONY: demo test bootstrap bootstrap-test image demo-up demo-down demo-status provision \
        validate lint unit molecule molecule-ci e2e clean

## demo: bring up the container rack, provision it, validate it, print where the report is
demo: bootstrap image demo-up provision validate

## test: lint, unit tests, the molecule scenario of every role (on bookworm; common and slurm
##       on trixie too), end-to-end on the demo rack
test: bootstrap-test image lint unit molecule-ci e2e

bootstrap:
	scripts/bootstrap.sh

bootstrap-test:
	scripts/bootstrap.sh --test

image:
	@scripts/build-image.sh >/dev/null

demo-up:
	rackgate demo up -i $(DEMO_INVENTORY)

demo-down:
	rackgate demo down -i $(DEMO_INVENTORY)

demo-status:
	rackgate demo status -i $(DEMO_INVENTORY)

provision:
	ansible-playbook -i $(DEMO_INVENTORY) playbooks/site.yml

validate:
	rackgate validate -i $(DEMO_INVENTORY) --profile demo

lint:
	ruff check validators tests scripts bench
	mypy
	ansible-lint
	python scripts/check-argument-specs.py
	python scripts/role-docs.py --check
	python scripts/check-registry-hosts.py

# pytest exits 5 when it collects nothing; make treats that as the failure it is. The
# slowest tests are listed at the end, so CI's log says where its time went.
unit:
	pytest -m "not e2e" --durations=25

# Every role's scenarios (or ROLES="common slurm"), on one Debian release (DISTRO=bookworm,
# the default, or DISTRO=trixie), a few roles at a time (JOBS=1 for one after the other).
DISTRO ?= bookworm
ROLES ?=
MOLECULE_ROLES := $(patsubst roles/%/molecule/,%,$(wildcard roles/*/molecule/))
# What `make test` runs: every role on bookworm, and these on trixie as well (CI's time
# allows two; `make molecule DISTRO=trixie` runs every role there).
MOLECULE_CI_TRIXIE := common slurm
molecule:
	MOLECULE_DISTRO=$(DISTRO) scripts/molecule-all.sh $(ROLES)

molecule-ci:
	scripts/molecule-all.sh $(MOLECULE_ROLES) $(addsuffix :trixie,$(MOLECULE_CI_TRIXIE))

e2e:
	pytest -m e2e tests/e2e --durations=0

clean: demo-down
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
