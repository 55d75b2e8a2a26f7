# Two commands do everything on a fresh machine:
#   make book   builds the website into _build/html
#               (make class-book: the class edition, without the graded code)
#   make test   runs every test
# Both create the virtual environment .venv from requirements.txt when needed,
# after installing the Debian packages the course needs.
# `make publish` then puts the website on the gh-pages branch (GitHub Pages).

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# nbgrader calls `alembic` and Jupyter kernels call `python` from PATH.
export PATH := $(BIN):$(PATH)
# Debian packages the course needs: bubblewrap runs each student's notebook in
# a sandbox while it is graded; chromium is the browser of the website's tests;
# slurm-wlm and munge run the single-node Slurm of the cluster-grading test;
# TeX Live's XeLaTeX, latexmk, xindy and the FreeFont and DejaVu fonts typeset
# the book's PDF (Sphinx's LaTeX builder); poppler-utils and qpdf read it back
# in the tests.
DEBIAN_PACKAGES := bubblewrap chromium slurm-wlm munge \
	texlive-xetex texlive-latex-recommended texlive-latex-extra \
	texlive-fonts-recommended latexmk xindy fonts-freefont-otf fonts-dejavu-core fonts-dejavu-extra \
	poppler-utils qpdf
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# npm installs axe-core, the accessibility engine of the website's tests
# (tests/book/package.json); Debian's npm only where Node.js brought none.
DEBIAN_PACKAGES += $(if $(shell command -v npm),,npm)
AXE := tests/book/node_modules/axe-core/axe.min.js

.PHONY: book class-book test release publish clean debian-packages

book: $(VENV)/installed
	jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "The website is in _build/html: open $(CURDIR)/_build/html/index.html"

# The class edition (book/_ext/graded_code.py): the same chapters without the
# bodies of the functions the exercises grade, into _build/class/html and
# _build/class/pdf. It reads the executed chapters from the cache of `make book`
# (_build/.jupyter_cache) and executes those that are missing or out of date.
class-book: $(VENV)/installed
	COURSE_EDITION=class python book/_ext/build_edition.py . _build/class --warningiserror --nitpick --keep-going
	@echo "The class edition is in _build/class/html, its PDF in _build/class/pdf"

# Publishes the website as Jupyter Book's guide does: ghp-import commits the
# built site to the gh-pages branch (with .nojekyll, so that GitHub Pages
# serves the folders whose names start with "_") and pushes it to REMOTE, a
# remote's name, a git URL or a path. `make publish EDITION=class` publishes
# the class edition. Each builds its site first; SITE=FOLDER publishes a site
# already built in FOLDER instead. .github/workflows/publish.yml deploys the
# same site on GitHub Pages from GitHub Actions.
REMOTE ?= origin
EDITION ?=
ifneq ($(filter-out class,$(EDITION)),)
$(error EDITION is "$(EDITION)": leave it out for the open edition, or set it to class)
endif
BUILT_SITE := $(if $(EDITION),_build/class/html,_build/html)
publish: $(if $(SITE),,$(if $(EDITION),class-book,book)) | $(VENV)/installed
	ghp-import --no-jekyll --push --force --remote "$(REMOTE)" --branch gh-pages \
	    --message "The course's website$(if $(EDITION), (class edition))" "$(or $(SITE),$(BUILT_SITE))"
	@echo "Published $(or $(SITE),$(BUILT_SITE)) to the gh-pages branch of $(REMOTE)"

# The second run executes the instructor notebooks (their solutions and hidden
# tests) under nbval: one that no longer runs clean fails (outputs are not compared).
test: $(VENV)/installed $(AXE)
	python -m pytest
	python -m pytest -p no:cacheprovider --nbval-lax autograder/source

release: $(VENV)/installed
	python -m autograder release

$(VENV)/installed: requirements.txt pyproject.toml | debian-packages
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	touch $@

# The exact axe-core of tests/book/package-lock.json.
$(AXE): tests/book/package.json tests/book/package-lock.json | debian-packages
	npm ci --prefix tests/book --no-audit --no-fund
	touch $@

# Installs the DEBIAN_PACKAGES that are missing; a no-op when none is.
debian-packages:
	@missing=$$(for package in $(DEBIAN_PACKAGES); do \
	    dpkg-query -W -f='$${db:Status-Status}' $$package 2>/dev/null | grep -qx installed || echo $$package; \
	done); \
	if [ -n "$$missing" ]; then \
	    $(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi

clean:
	rm -rf _build
