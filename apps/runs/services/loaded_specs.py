"""The per-process cache of loaded specs that a worker's runs play (kept: the runs bench's
pair in ``bench/NOTES.md`` shows it matters)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from apps.environments.models import Environment
from apps.environments.specs import environment_document, environment_documents
from apps.runs.models import Run
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.problems import SpecError


class LoadedSpecs:
    """Loaded specs by (environment id, revision, spec hash), so that a worker replaying an
    environment for many trials builds and checks it once (every edit bumps the revision).
    The least recently used is dropped past ``SIZE`` (a first-in-first-out cache smaller than
    a batch's environments missed on every run: its lanes go through them in turn).

    The first lane of a process to miss a spec of a batch loads the batch's environments
    it has not loaded yet — up to ``PRELOAD`` of them, their rows read together
    (``environment_documents``) — while the process's other lanes of that batch wait for it:
    a threads worker's lanes all start at once, and loading 32 environments one by one (seven
    queries each, ~4.5 ms on PostgreSQL) under one GIL held back their first calls and the
    worker's consumer handing out the batch's other first runs. A spec still missing after
    that (an environment edited meanwhile, or past ``PRELOAD``) is built alone, by one thread
    while the process's others wanting it wait."""

    SIZE = 256
    PRELOAD = 64

    def __init__(self):
        self._entries: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[int, threading.Lock] = {}
        self._preloading: dict[int, threading.Lock] = {}
        self._preloaded: set[int] = set()

    def get(self, environment, batch_id: int | None = None) -> tuple[object, str, int]:
        """The environment's loaded spec, its hash and its revision."""
        key = (environment.pk, environment.revision, environment.spec_hash)
        cached = self._cached(key)
        if cached is not None:
            return cached
        if batch_id is not None:
            self._preload(batch_id)
            cached = self._cached(key)
            if cached is not None:
                return cached
        with self._lock:
            building = self._building.setdefault(environment.pk, threading.Lock())
        with building:
            # The spec is built from the environment's rows as they are now, so its revision
            # and hash are read now too (the instance a run got may be up to a second old).
            environment = Environment.objects.select_related("latest_validation").get(
                pk=environment.pk
            )
            key = (environment.pk, environment.revision, environment.spec_hash)
            cached = self._cached(key)  # built by the thread this one waited for
            if cached is None:
                cached = self._build(environment, environment_document(environment))
        return cached

    def _preload(self, batch_id: int) -> None:
        """Load the batch's environments this process lacks, once per batch and process."""
        with self._lock:
            if batch_id in self._preloaded:
                return
            preloading = self._preloading.setdefault(batch_id, threading.Lock())
        with preloading:
            with self._lock:
                if batch_id in self._preloaded:
                    return  # done by the thread this one waited for
            ids = (
                Run.objects.filter(batch_id=batch_id, environment__isnull=False)
                .values_list("environment_id", flat=True)
                .distinct()
            )
            environments = Environment.objects.filter(pk__in=list(ids)).select_related(
                "latest_validation"
            )
            missing = [
                environment
                for environment in environments.order_by("pk")
                if self._cached((environment.pk, environment.revision, environment.spec_hash))
                is None
            ][: self.PRELOAD]
            for environment, document in zip(
                missing, environment_documents(missing).values(), strict=True
            ):
                try:
                    self._build(environment, document)
                except SpecError:
                    continue  # the run that plays it builds it alone and reports why
            with self._lock:
                self._preloaded.add(batch_id)
                self._preloading.pop(batch_id, None)
                while len(self._preloaded) > self.SIZE:
                    self._preloaded.pop()

    def _build(self, environment, document: dict) -> tuple[object, str, int]:
        # A document its last validation accepted as it is (same canonical hash) is built
        # without checking it again.
        report = environment.latest_validation
        certified = report.spec_hash if report is not None and report.valid else None
        document, spec = engine_spec.load_canonical(document, certified_hash=certified)
        spec_hash = environment.spec_hash or engine_spec.canonical_hash(document)
        cached = (spec, spec_hash, environment.revision)
        with self._lock:
            self._entries[(environment.pk, environment.revision, environment.spec_hash)] = cached
            while len(self._entries) > self.SIZE:
                self._entries.popitem(last=False)
        return cached

    def _cached(self, key: tuple) -> tuple | None:
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
            return cached


LOADED_SPECS = LoadedSpecs()
