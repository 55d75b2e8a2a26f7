# Two commands do everything on a fresh machine:
#   make book   builds the website into _build/html
#   make test   runs every test
# Both create the virtual environment .venv from requirements.txt when needed.

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# nbgrader calls `alembic` and Jupyter kernels call `python` from PATH.
export PATH := $(BIN):$(PATH)
# Debian packages the course needs: bubblewrap runs each student's notebook in a sandbox.
DEBIAN_PACKAGES := bubblewrap
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: book test release clean debian-packages

book: $(VENV)/installed
	jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "The website is in _build/html: open $(CURDIR)/_build/html/index.html"

test: debian-packages $(VENV)/installed
	python -m pytest

release: $(VENV)/installed
	python -m autograder release

$(VENV)/installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	touch $@

# Installs what is missing, and nothing when everything is there.
debian-packages:
	@missing="$$(for package in $(DEBIAN_PACKAGES); do dpkg -s $$package >/dev/null 2>&1 || echo $$package; done)"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

clean:
	rm -rf _build
