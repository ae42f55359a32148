# The two commands: `make run` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` installs the train extra (training and serving on the CPU); `make test` both.
EXTRAS ?= test,train

.PHONY: run test install lint format migrate seed bench clean

$(VENV)/.installed-$(EXTRAS): pyproject.toml requirements/verl-import.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	@case ',$(EXTRAS),' in *,test,*) \
	  $(BIN)/python -m pip install --quiet --no-deps -r requirements/verl-import.txt;; esac
	@touch $@

install: $(VENV)/.installed-$(EXTRAS)

migrate: install
	$(BIN)/python manage.py migrate --noinput

seed: migrate
	$(BIN)/python manage.py seed_demo --url http://$${HOST:-127.0.0.1}:$${PORT:-8000}/

run: EXTRAS = train
run: migrate
	$(BIN)/python scripts/run_local.py --seed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/dead_code.py
	$(BIN)/python scripts/module_length.py

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	@for b in bench/*.py; do case $$b in */__init__.py) ;; *) echo "== $$b"; $(BIN)/python $$b || exit 1;; esac; done

clean:
	rm -rf var/test var/broker
