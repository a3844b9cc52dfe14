# Hermes Web — everything installs into .venv: what the site runs from requirements.txt
# (`make install`, `make run`), the test, lint and benchmark tools from requirements-dev.txt
# (`make install-dev`, which the test, lint and bench targets call).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements
DEV_STAMP := $(VENV)/.installed-requirements-dev
# Workers of the parallel half of `make test` (and `make test-fast`, pytest-xdist); each gets
# its own test database and Redis prefix.
FAST_WORKERS ?= auto

.PHONY: messages install install-dev run demo serve test test-fast lint format worker beat bench migrate clean vendor

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

migrate: install
	$(PY) manage.py migrate --noinput

## make run: the whole site on this machine (SQLite + embedded Valkey + Celery worker)
## make demo: the same, chatting with the scripted model of `manage.py fake_llm` (no API key)
demo: SERVE_ARGS += --fake-llm
run demo: migrate
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_admin
	$(PY) manage.py serve $(SERVE_ARGS)

## make test: the whole test suite (uses DATABASE_URL / REDIS_URL when set): the tests that
## need no process of their own in parallel, then those that start processes (worker,
## server, browser; marked `slow`) one at a time. Exit status 5 (nothing selected, e.g. a
## PYTEST_ARGS that names only slow tests) is not a failure.
test: test-fast
	$(PY) -m pytest -m slow $(PYTEST_ARGS) || test $$? -eq 5

## make test-fast: the first half of `make test` alone (everything but the `slow` tests).
test-fast: install-dev
	$(PY) -m pytest -m "not slow" -n $(FAST_WORKERS) $(PYTEST_ARGS) || test $$? -eq 5

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## make worker: a Celery worker for a team deployment (needs REDIS_URL)
worker: install
	@test -n "$$REDIS_URL" || (echo "make worker needs REDIS_URL (make run starts its own worker)"; exit 2)
	$(VENV)/bin/celery -A hermes_site worker --loglevel INFO

## make serve: one production ASGI process (daphne) for a team deployment behind a reverse
## proxy, on HERMES_HOST:HERMES_PORT (default 127.0.0.1:8000). Start several on different
## ports (deploy/systemd/hermes-asgi@.service). X-Forwarded-* headers are believed only
## from HERMES_TRUSTED_PROXIES (hermes_site/asgi_proxy.py), so daphne's --proxy-headers
## (which believes anyone) stays off.
serve: install
	@test -n "$$REDIS_URL" || (echo "make serve needs REDIS_URL: the channel layer all ASGI processes share"; exit 2)
	exec $(VENV)/bin/daphne --bind "$${HERMES_HOST:-127.0.0.1}" --port "$${HERMES_PORT:-8000}" \
		--verbosity 0 --websocket_timeout 86400 --websocket_connect_timeout 10 \
		--ping-interval 20 --ping-timeout 30 --websocket-max-message-size 1048576 \
		--application-close-timeout 10 hermes_site.asgi_proxy:application

## make beat: the periodic-task scheduler (exactly one per deployment; needs REDIS_URL)
beat: install
	@test -n "$$REDIS_URL" || (echo "make beat needs REDIS_URL"; exit 2)
	exec $(VENV)/bin/celery -A hermes_site beat --loglevel INFO

bench: install-dev
	$(PY) -m bench

## make vendor: fetch the browser libraries pinned in static/vendor/vendor.json from the npm
## registry (checking their integrity) into static/vendor/<name>/; needs npm, not the venv
vendor:
	$(PYTHON) -m devtools.vendor

clean:
	rm -rf var/test_* .pytest_cache

## make messages: collect the marked strings into locale/*/django.po (templates, Python) and
## djangojs.po (static/js) and compile the .mo files (committed, so a fresh clone speaks
## Chinese). Needs GNU gettext (Debian: gettext).
MESSAGES_IGNORE := --ignore=.venv --ignore=var --ignore=tests --ignore=static/vendor
messages: install
	$(PY) manage.py makemessages -l zh_Hans $(MESSAGES_IGNORE) --no-obsolete
	$(PY) manage.py makemessages -d djangojs -l zh_Hans $(MESSAGES_IGNORE) --no-obsolete
	$(PY) manage.py compilemessages --ignore=.venv
