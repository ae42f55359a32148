"""Issue 12 (datasets an ML engineer can trust): near-duplicates removed on a normalised form
and reported, the split by group stratified by capability, tokens counted by a configured
tokenizer — through real builds over real oracle transcripts."""

import json
from pathlib import Path

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.datasets.models import DatasetRow
from apps.datasets.services import dataset_create, export_absolute_path
from apps.datasets.services.datasets import dataset_update
from apps.environments.models import Environment, TaskCapability
from coworkenv_engine import policies, runner
from tests.datasets.conftest import (
    SAMPLES,
    build_version,
    make_demonstration,
    oracle_transcript,
    variant,
)

pytestmark = pytest.mark.django_db

SUPPORT = next(p for p in SAMPLES if p.name == "support-desk.json")


def _oracle(task_key: str, *, seed: int, faults: bool) -> tuple[list, list]:
    result = runner.run_task(
        json.loads(SUPPORT.read_text()), task_key, policies.OraclePolicy(), seed=seed, faults=faults
    )
    return result.transcript, result.tools


def _support(sample_environments) -> Environment:
    return next(e for e in sample_environments if e.name.startswith("Acme Support"))


def _card(version) -> str:
    return export_absolute_path(version.exports.get(format="card")).read_text()


# ----------------------------------------------------------------------------- near-duplicates


def test_retried_runs_are_near_duplicates_removed_with_the_reason(
    dataset, author, sample_environments, client_for, viewer
):
    support = _support(sample_environments)
    clean, tools = _oracle("answer-refund-ticket", seed=0, faults=False)
    retried, _ = _oracle("answer-refund-ticket", seed=4, faults=True)  # four injected faults
    assert sum('"error"' in (m.get("content") or "") for m in retried if m["role"] == "tool") == 4
    kept = make_demonstration(support, "answer-refund-ticket", transcript=clean, tools=tools)
    near = make_demonstration(support, "answer-refund-ticket", transcript=retried, tools=tools)
    exact = make_demonstration(support, "answer-refund-ticket", transcript=clean, tools=tools)
    other = make_demonstration(support, "escalate-platinum-outage")
    version = build_version(dataset, author, validation_fraction=0.0)

    assert (version.demonstrations, version.removed_duplicates) == (4, 1)
    assert version.removed_near_duplicates == 1
    assert version.removals == [
        {
            "demonstration": near.pk,
            "kept": kept.pk,
            "kind": "near",
            "reason": "the same once retries after injected faults are collapsed and ids "
            "and dates masked",
        },
        {
            "demonstration": exact.pk,
            "kept": kept.pk,
            "kind": "exact",
            "reason": "the same messages (tool-call ids renumbered)",
        },
    ]
    assert set(
        DatasetRow.objects.filter(version=version).values_list("demonstration", flat=True)
    ) == {
        kept.pk,
        other.pk,
    }

    page = (
        client_for(viewer)
        .get(reverse("datasets:version_detail", args=[dataset.pk, version.number]))
        .content.decode()
    )
    assert page.count('data-testid="removal"') == 2
    assert f'href="/demonstrations/{near.pk}/">#{near.pk}</a>' in page
    assert 'data-testid="near-duplicates">1<' in page
    card = _card(version)
    assert "| near-duplicates removed (retries collapsed, ids and dates masked) | 1 |" in card
    assert (
        f"| {near.pk} | {kept.pk} | near | the same once retries after injected faults are "
        "collapsed and ids and dates masked |" in card
    )


def test_differently_worded_takes_are_not_near_duplicates(dataset, author, sample_environments):
    support = _support(sample_environments)
    clean, tools = _oracle("answer-refund-ticket", seed=0, faults=False)
    for take in range(3):
        make_demonstration(
            support, "answer-refund-ticket", transcript=variant(clean, take), tools=tools
        )
    version = build_version(dataset, author, validation_fraction=0.0)
    assert (version.train_rows, version.removed_duplicates, version.removed_near_duplicates) == (
        3,
        0,
        0,
    )
    assert version.removals == []
    assert "None: every matched train-task demonstration is a distinct example." in _card(version)


# ----------------------------------------------------------------------------- groups


def test_a_template_family_is_no_coarser_group_than_its_environments(
    dataset, author, approved_demonstrations, client_for, viewer
):
    ops, finance, support = Environment.objects.order_by("id")
    for env in (ops, finance):
        Environment.objects.filter(pk=env.pk).update(metadata={"family": "office"})
    version = build_version(dataset, author, validation_fraction=0.3)
    envs = {f"spec:{env.spec_hash}": env for env in (ops, finance, support)}
    by_env = {f"env:{env.pk}": key for key, env in envs.items()}
    for key, group in DatasetRow.objects.filter(version=version).values_list(
        "environment_key", "group_key"
    ):
        assert group == by_env[key]  # its own revision: no masked prompt or reply joins them
    # once, the family's two environments were one group of 12 rows, always on one side
    groups = {g["key"]: g for g in version.groups}
    assert set(groups) == set(envs)
    assert all(g["rows"] == 6 and g["environments"] == [envs[k].name] for k, g in groups.items())
    held = [envs[k] for k, g in groups.items() if g["split"] == "validation"]
    assert len(held) == 1  # 6 of 18 rows: the 30% asked for, one environment whole

    def capabilities(environments):
        """Of the tasks the version's rows demonstrate in these environments."""
        rows = DatasetRow.objects.filter(version=version)
        tasks = rows.filter(environment_key__in=[f"env:{e.pk}" for e in environments])
        links = TaskCapability.objects.filter(task__in=tasks.values("demonstration__task"))
        return set(links.values_list("capability__slug", flat=True))

    trained = [env for env in envs.values() if env not in held]
    missing = sorted(capabilities(trained) - capabilities(held))
    assert missing  # the three samples' capabilities overlap only in part
    assert version.capabilities_without_validation == missing
    card = _card(version)
    assert "The split is by group, stratified by capability" in card
    assert "No validation rows (their rows share groups that went to train" in card
    html = (
        client_for(viewer)
        .get(reverse("datasets:version_detail", args=[dataset.pk, version.number]))
        .content.decode()
    )
    assert html.count('data-testid="no-validation"') == len(missing)
    assert 'data-testid="no-validation-warning"' in html
    assert "No validation row for 6 capabilities: " + ", ".join(missing) in html
    fragment = client_for(viewer).get(
        reverse("datasets:version_detail", args=[dataset.pk, version.number]) + "?split=train",
        HTTP_HX_REQUEST="true",
    )
    assert fragment.status_code == 200


def test_a_version_whose_capabilities_all_have_validation_rows_warns_of_none(
    dataset, author, sample_environments, client_for, viewer
):
    ops = sample_environments[0]
    make_demonstration(ops, "book-q3-review", capabilities=["tagged"])
    make_demonstration(sample_environments[1], "book-invoices", capabilities=["tagged"])
    version = build_version(dataset, author, validation_fraction=0.5)
    assert version.capability_mix == {"tagged": {"train": 1, "validation": 1}}
    assert version.capabilities_without_validation == []
    html = (
        client_for(viewer)
        .get(reverse("datasets:version_detail", args=[dataset.pk, version.number]))
        .content.decode()
    )
    assert 'data-testid="no-validation' not in html


def test_environments_sharing_a_masked_reply_are_joined(dataset, author, sample_environments):
    ops, finance, support = sorted(sample_environments, key=lambda e: e.pk)
    make_demonstration(ops, "book-q3-review")
    make_demonstration(finance, "book-invoices")
    # A support-desk row whose reply is an ops reply with other names and numbers: the same
    # template answer, so the two environments must not straddle the split.
    clarify = make_demonstration(ops, "budget-figure-clarify")
    ops_reply = clarify.current_version.transcript[-1]["content"]
    transcript, tools, _score = oracle_transcript(support, "escalate-platinum-outage")
    transcript[-1]["content"] = ops_reply.replace("Dana", "Priya")
    make_demonstration(support, "escalate-platinum-outage", transcript=transcript, tools=tools)
    version = build_version(dataset, author, validation_fraction=0.3)
    groups = {g["key"]: g for g in version.groups}
    # named by the smaller of the two revisions' spec hashes
    joined = groups[f"spec:{min(ops.spec_hash, support.spec_hash)}"]
    assert joined["environments"] == sorted([ops.name, support.name])
    assert joined["joined_by_similarity"] is True
    assert joined["rows"] == 3
    splits = dict(
        DatasetRow.objects.filter(version=version).values_list("environment_key", "split")
    )
    assert splits[f"env:{ops.pk}"] == splits[f"env:{support.pk}"]
    assert splits[f"env:{finance.pk}"] != splits[f"env:{ops.pk}"]


# ----------------------------------------------------------------------------- tokenizers


@pytest.fixture
def word_tokenizer(tmp_path) -> Path:
    """A real `tokenizers` tokenizer: word-level over whitespace and punctuation, every
    token known (its vocabulary is trained on nothing but an [UNK])."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_tokens_are_counted_by_the_configured_tokenizer(
    settings, word_tokenizer, dataset, author, sample_environments, client_for, viewer
):
    from tokenizers import pre_tokenizers

    settings.DATASET_TOKENIZERS = {"words": str(word_tokenizer.parent)}  # a directory works
    dataset_update(
        dataset=dataset, name=dataset.name, description=dataset.description, tokenizer="words"
    )
    support = _support(sample_environments)
    demonstration = make_demonstration(support, "answer-refund-ticket")
    version = build_version(dataset, author, validation_fraction=0.0)
    assert version.tokenizer == "words"
    row = DatasetRow.objects.get(version=version)
    # By hand: the row's canonical JSON split on whitespace and punctuation.
    from apps.datasets.formats import canonical_json, normalize_messages, normalize_tools

    text = canonical_json(
        {
            "messages": normalize_messages(demonstration.current_version.transcript),
            "tools": normalize_tools(demonstration.current_version.tools),
        }
    )
    words = pre_tokenizers.Whitespace().pre_tokenize_str(text)
    assert row.tokens == len(words)
    assert row.tokens != -(-len(text) // 4)  # not the estimate
    assert version.token_stats["train"]["total"] == len(words)
    expected = (
        f"counted with the tokenizer “words” ({word_tokenizer}) over the row's canonical "
        "JSON, no chat template applied"
    )
    assert version.token_counting == expected
    assert f"Tokens per row: {expected}." in _card(version)
    page = (
        client_for(viewer)
        .get(reverse("datasets:version_detail", args=[dataset.pk, version.number]))
        .content.decode()
    )
    assert "Counted with the tokenizer “words”" in page


def test_without_a_tokenizer_tokens_are_estimated(dataset, author, sample_environments):
    make_demonstration(_support(sample_environments), "answer-refund-ticket")
    version = build_version(dataset, author, validation_fraction=0.0)
    assert version.tokenizer == ""
    assert "Tokens per row: estimated: characters of the row's canonical JSON divided by 4" in (
        _card(version)
    )


def test_the_server_default_tokenizer_applies_and_a_missing_file_is_refused_early(
    settings, word_tokenizer, project, author, sample_environments, tmp_path
):
    settings.DATASET_TOKENIZERS = {"words": str(word_tokenizer), "gone": str(tmp_path / "nope")}
    settings.DATASET_TOKENIZER_DEFAULT = "words"
    make_demonstration(_support(sample_environments), "answer-refund-ticket")
    dataset = dataset_create(project=project, name="Default", user=author)
    assert build_version(dataset, author).tokenizer == "words"
    broken = dataset_create(project=project, name="Broken", tokenizer="gone", user=author)
    with pytest.raises(ApplicationError) as refused:
        build_version(broken, author)
    assert refused.value.message == (f"The tokenizer “gone” has no file at {tmp_path / 'nope'}.")
    assert not broken.versions.exists()
    with pytest.raises(ApplicationError) as unknown:
        dataset_create(project=project, name="Unknown", tokenizer="llama", user=author)
    assert unknown.value.extra == {
        "fields": {"tokenizer": ["No tokenizer named “llama” is configured on this server."]}
    }


# ----------------------------------------------------------------------------- weights


def test_the_card_says_which_consumers_honour_per_turn_weights(built_version):
    card = _card(built_version)
    assert "### Per-turn weights: which trainers honour them" in card
    assert "- **OpenAI fine-tuning** (`openai`): honoured." in card
    assert "- **TRL `SFTTrainer`** (`trl`): **not honoured**." in card
    assert "- **LLaMA-Factory** (`sharegpt`): **not honoured**" in card
