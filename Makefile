# Two entry points for a fresh machine: `make run` (dashboard on the sample data) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-server

.PHONY: run audit test test-fast bench clean

$(STAMP): requirements.txt pyproject.toml scripts/install_system_libraries.sh
	bash scripts/install_system_libraries.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# the local OpenAI-compatible server for the LLM attackers' integration tests (wheel cached in ~/.cache/cpa)
$(LLM_STAMP): $(STAMP) scripts/install_llm_server.sh
	bash scripts/install_llm_server.sh $(PY)
	touch $(LLM_STAMP)

run: $(STAMP)
	$(VENV)/bin/streamlit run app.py

audit: $(STAMP)
	$(VENV)/bin/cpa audit --documents sample_data/documents.csv --registry sample_data/registry.csv \
		--config sample_data/audit.toml --out out/sample-audit

# both cores, one test file per worker at a time (a file's fixtures, the LLM server, the packaged model and the
# real releases, are built once per worker); compiled modules (tests with their rewritten asserts) are kept between
# runs even where the environment says not to write them (PYTHONDONTWRITEBYTECODE): collecting compiles nothing twice
test: $(STAMP) $(LLM_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest tests -n 2 --dist loadfile

# the unit tier, for a tight loop (under a minute): everything but tests/integration (subprocesses, AppTest, the
# browser, statistical coverage, the packaged model, the LLM server), on both cores; the layers of the code are
# checked here
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest tests --ignore=tests/integration -n 2

bench: $(STAMP)
	$(PY) bench/run.py
	$(PY) bench/bench_temperature.py
	$(PY) bench/bench_default_run.py

clean:
	rm -rf $(VENV) out test-artifacts .pytest_cache
