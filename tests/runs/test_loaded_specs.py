"""The per-process cache of loaded specs: least recently used dropped, one build for many
threads, a batch's environments preloaded together, a validated document not checked again."""

import time

import pytest

from apps.runs.services import loaded_specs
from tests.runs.test_claims import celery_batch, in_threads

pytestmark = pytest.mark.django_db(transaction=True)


def test_loaded_specs_drop_the_least_recently_used(sample_environments, monkeypatch):
    """A batch over more environments than the cache holds: a spec used again stays, the
    one used longest ago goes (first-in-first-out missed on every run of such a batch)."""

    built = []
    real = loaded_specs.environment_document
    monkeypatch.setattr(
        loaded_specs, "environment_document", lambda e: built.append(e.pk) or real(e)
    )
    specs = loaded_specs.LoadedSpecs()
    monkeypatch.setattr(specs, "SIZE", 2)
    first, second, third = sample_environments[:3]
    for environment in (first, second, first, third, first, second):
        _spec, spec_hash, revision = specs.get(environment)
        assert (spec_hash, revision) == (environment.spec_hash, environment.revision)
    # first stays (used again before third came); second was the least recent when third came
    assert built == [first.pk, second.pk, third.pk, second.pk]


def test_threads_wanting_one_missing_spec_build_it_once(sample_environments, monkeypatch):

    built = []
    real = loaded_specs.environment_document

    def slow_build(environment):
        built.append(environment.pk)
        time.sleep(0.2)  # the others ask meanwhile
        return real(environment)

    monkeypatch.setattr(loaded_specs, "environment_document", slow_build)
    specs = loaded_specs.LoadedSpecs()
    environment = sample_environments[0]
    got = []
    in_threads(lambda _: got.append(specs.get(environment)), range(6))
    assert built == [environment.pk]
    assert len(got) == 6 and all(spec is got[0] for spec in got)


def test_a_batchs_first_miss_loads_all_its_environments_with_fixed_queries(
    project, author, sample_environments, monkeypatch, django_assert_num_queries
):
    """A process's first lane to miss a spec of a batch loads every environment of that
    batch it lacks, their rows read together: the same queries for three environments as
    for one; the batch's other lanes (threads) wait for it and then find theirs loaded,
    each the spec its rows build, as ``environment_document`` builds it one at a time."""
    from apps.environments.specs import environment_document
    from coworkenv_engine import spec as engine_spec

    environments = sample_environments[:3]
    batch = celery_batch(project, author, environments, trials=2, concurrency=1)
    single = []
    monkeypatch.setattr(
        loaded_specs,
        "environment_document",
        lambda e: single.append(e.pk) or environment_document(e),
    )
    specs = loaded_specs.LoadedSpecs()
    with django_assert_num_queries(8):  # its environments' ids, their rows, 6 of their parts
        specs.get(environments[0], batch.pk)
    got = []
    in_threads(lambda environment: got.append(specs.get(environment, batch.pk)), environments)
    assert single == []  # nothing built alone
    by_hash = {spec_hash: spec for spec, spec_hash, _ in got}
    for environment in environments:
        _document, expected = engine_spec.load_canonical(environment_document(environment))
        assert by_hash[environment.spec_hash] == expected


def test_a_validated_environment_is_loaded_without_checking_it_again(
    sample_environments, monkeypatch
):
    """Its last validation accepted exactly these rows (same canonical hash): no schema pass
    when a worker loads it; once edited, the whole way again."""
    from apps.environments.services import environment_update, environment_validation_record
    from apps.environments.specs import environment_spec
    from coworkenv_engine import spec as engine_spec
    from coworkenv_engine.validation import validate_spec

    environment = sample_environments[0]
    report = environment_validation_record(
        environment=environment, result=validate_spec(environment_spec(environment)).to_dict()
    )
    assert report.valid
    passes = []
    real = engine_spec.parse_spec
    monkeypatch.setattr(engine_spec, "parse_spec", lambda doc: passes.append(1) or real(doc))
    _spec, spec_hash, _revision = loaded_specs.LoadedSpecs().get(environment)
    assert (passes, spec_hash) == ([], report.spec_hash)
    edited = environment_update(
        environment=environment,
        name=environment.name,
        domain=environment.domain,
        description="Edited after its validation.",
    )
    passes.clear()
    _spec, spec_hash, _revision = loaded_specs.LoadedSpecs().get(edited)
    assert passes == [1] and spec_hash == edited.spec_hash != report.spec_hash
