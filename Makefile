# The two commands of the README: `make lab` and `make test`. Everything else here
# is a step of one of them.
VENV := .venv
KILN := $(VENV)/bin/kiln
# The machine's own python3 (the one with PyTorch and CUDA), for `make gpu-check`.
ifndef GPU_PYTHON
GPU_PYTHON := $(shell command -v python3)
endif
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: lab test prereqs venv standins lint unit images molecule e2e e2e-migration e2e-newuser e2e-ubuntu lab-down docs collection gpu-check

## Bring up the local lab cluster and provision it; OS picks the nodes' release:
## debian-13 (the default), debian-12, ubuntu-24.04 or ubuntu-22.04 (docs/lab.md).
lab: prereqs venv standins
	$(KILN) lab up $(if $(OS),--distro $(OS))
	$(KILN) provision

## STAND-INs for NVIDIA's enroot and pyxis, which the lab cannot download (test aids,
## not part of Kiln): built into build/standins and pinned in the lab's settings
## (inventories/lab/group_vars/all/standins.yml), which `kiln lab up` copies.
standins: venv
	$(VENV)/bin/python tests/standins.py lab

## Run every test: lint, unit and CLI tests, Molecule scenarios, the lab end to end,
## then print the time each stage took. The node images are built beside the unit
## tests; Molecule's scenarios run one at a time beside the lab's tests, then the new
## user's lab (their output in build/logs/, printed after).
test:
	KILN_MOLECULE_LANES=1 scripts/timed-stages.sh prereqs venv lint unit+images e2e+molecule,e2e-newuser

# chromium: the unit tests open every kind of HTML report in it (tests/unit/test_report_browser.py).
prereqs:
	scripts/setup-host.sh chromium

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	# CPU torch for the benchmark's test, only from a local wheel (PyPI's pulls CUDA)
	if ls $${PIP_FIND_LINKS:-/opt/wheels}/torch-*.whl >/dev/null 2>&1; then \
		$(VENV)/bin/pip install -q --find-links $${PIP_FIND_LINKS:-/opt/wheels} torch==2.13.0; fi
	touch $@

lint: venv
	ruff check cli node_library tests bench roles plugins molecule
	ruff format --check cli node_library tests bench roles plugins molecule
	yamllint --strict .
	# The roles' own modules (kiln.cluster.apt_present) found as kiln finds them.
	ANSIBLE_COLLECTIONS_PATH="$$(python -c 'from kiln.run.execute import collections_path; print(collections_path())')" \
		ansible-lint

unit: venv
	# A file's tests stay together: they share fixtures built once per module.
	pytest -n auto --dist loadfile tests/unit tests/cli tests/gpu

## Kiln's node programs on a real GPU machine (docs/gpu.md): no Slurm, apt or network
## needed; skips, saying why, where there is no GPU. Outputs are recorded, sanitised,
## under tests/fixtures/gpu/<model>-<driver>/.
gpu-check:
	PYTHONPATH=$(CURDIR)/cli:$(CURDIR)/node_library$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -m pytest tests/gpu -v -p no:cacheprovider

## The node images of the lab and of `make molecule` (debootstrap, then base's packages),
## built once; what waits on the network and disk more than on the cores.
images: prereqs venv
	scripts/molecule.sh --images

## Every scenario on the releases scripts/molecule.sh's CI_RELEASES names: the compute
## node's roles on Ubuntu 24.04 (Slurm's with config files pushed), the driver's and
## HPC-X's on Debian 13 and 12; the e2e lab covers Debian 13 (docs/performance.md).
molecule: prereqs venv
	scripts/molecule.sh --ci

e2e: prereqs venv
	scripts/setup-host.sh chromium
	pytest tests/e2e -m "not migration and not ubuntu and not newuser" --durations=0

## The region migration between two labs (about 15 minutes): not in `make test`.
e2e-migration: prereqs venv
	pytest tests/e2e -m migration --durations=0

## A new user's first hour on a lab of its own (about 5 minutes; `make test` runs it after
## Molecule's scenarios, beside the lab's tests).
e2e-newuser: prereqs venv standins
	pytest tests/e2e -m newuser --durations=0

## The lab on Ubuntu 24.04 nodes (about 15 minutes): provision twice, validate, a short
## burn-in on PyPI's torch for Python 3.12 (docs/lab.md). Not in `make test`.
e2e-ubuntu: prereqs venv
	pytest tests/e2e -m ubuntu --durations=0

## The collection kiln.cluster and the kiln wheel in dist/: what
## execution-environment.yml builds from (docs/ansible.md).
collection: venv
	rm -rf dist
	$(VENV)/bin/pip wheel -q --no-deps --no-build-isolation -w dist .
	$(VENV)/bin/ansible-galaxy collection build --output-path dist .

lab-down: venv
	$(KILN) lab down

## Regenerate the variable tables in docs/ and role READMEs from the argument specs.
docs: venv
	.venv/bin/python -m kiln.vardocs docs/*.md roles/*/README.md
