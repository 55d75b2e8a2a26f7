# Two commands do everything on a fresh machine:
#   make book   builds the website into _build/html
#   make test   runs every test
# Both create the virtual environment .venv from requirements.txt when needed.

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# nbgrader calls `alembic` and Jupyter kernels call `python` from PATH.
export PATH := $(BIN):$(PATH)

.PHONY: book test release clean

book: $(VENV)/installed
	jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "The website is in _build/html: open $(CURDIR)/_build/html/index.html"

test: $(VENV)/installed
	python -m pytest

release: $(VENV)/installed
	python -m autograder release

$(VENV)/installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	touch $@

clean:
	rm -rf _build
