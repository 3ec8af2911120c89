# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export MEDIA_CRAWLER_HOME ?= $(CURDIR)/var
export DAGSTER_HOME ?= $(CURDIR)/var/dagster_home

.PHONY: install pywb demo test ui sim bench mutate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	# pip byte-compiles what it installs, but an editable install leaves our own modules
	# to their first import, and with PYTHONDONTWRITEBYTECODE=1 (set on some machines,
	# this one included) every command would compile them again (~0.1 s a start).
	$(BIN)/python -m compileall -q media_crawler media_crawler_sim
	touch $(STAMP)

install: $(STAMP)

## make pywb: pywb (pinned, .ci/pywb-requirements.txt) in a virtualenv of its own, .venv-pywb:
## pywb pins redis 2.10, which cannot share .venv with the test extra. The replay test
## (media_crawler_tests/export/test_pywb_replay.py) runs its wb-manager and wayback.
PYWB_VENV := .venv-pywb
PYWB_STAMP := $(PYWB_VENV)/.installed
$(PYWB_STAMP): .ci/pywb-requirements.txt
	test -x $(PYWB_VENV)/bin/python || $(PYTHON) -m venv $(PYWB_VENV)
	$(PYWB_VENV)/bin/python -m pip install -q --disable-pip-version-check -r .ci/pywb-requirements.txt
	$(PYWB_VENV)/bin/wayback --version >/dev/null
	touch $(PYWB_STAMP)

pywb: $(PYWB_STAMP)

## make demo: install, start the simulator, crawl it through Dagster into ./var, print a summary
demo: install
	$(BIN)/media-crawler demo --home $(MEDIA_CRAWLER_HOME)

## make test: install test extras and run the suite
test: install
	$(BIN)/python -m pytest

## make ui: simulator + dagster-daemon + dagster-webserver on 127.0.0.1:3000 (Ctrl-C stops all)
ui: install
	$(BIN)/python -m media_crawler.commands.ui --home $(MEDIA_CRAWLER_HOME)

## make bench: the peer download benchmark (writes bench/RESULTS.md); `python -m bench` lists the others
bench: install
	$(BIN)/python -m bench peer

## make mutate [MUTATE="transitions errors"]: plant one bug at a time in the core modules and
## run the tests covering each (.ci/mutate.py); ends with `mutation score: K/N killed (P%)`
mutate: install
	$(BIN)/python .ci/mutate.py $(MUTATE)

clean:
	rm -rf var
