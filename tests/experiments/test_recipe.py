import pytest

from apps.experiments.recipe import SCHEMA, RecipeError, ReviewPolicy, recipe_parse


def _error(data) -> RecipeError:
    with pytest.raises(RecipeError) as caught:
        recipe_parse(data)
    return caught.value


def test_the_example_parses_with_every_choice_kept(recipe):
    parsed = recipe_parse(recipe)
    assert parsed.capabilities == ("clarify-before-acting", "disambiguate-contacts")
    assert parsed.generator.families == ("meeting-coordination", "support-desk")
    assert parsed.generator.count == 2
    assert parsed.held_out.family == "onboarding"
    assert parsed.review == ReviewPolicy.STRICT_PASSES
    assert parsed.sft.preset == "tiny-cpu"
    assert parsed.k == 2
    stored = parsed.to_dict()
    assert stored["schema"] == SCHEMA
    assert stored["review"] == {"policy": "approve-strict-passes"}
    assert stored["evaluation"] == {"k": 2, "max_tokens": 0}
    assert recipe_parse(stored) == parsed  # what is stored parses back to the same recipe


def test_defaults_fill_what_a_minimal_recipe_leaves_out():
    parsed = recipe_parse({"name": "x", "capabilities": ["clarify-before-acting"]})
    assert parsed.generator.kind == "template"
    assert parsed.generator.horizons == ("short",)
    assert parsed.teacher.kind == "oracle"
    assert parsed.review == ReviewPolicy.HUMAN
    assert parsed.held_out.seeds == 1
    assert parsed.k == 2
    assert parsed.max_tokens == 0  # the served endpoints keep their own answer cap


def test_an_answer_cap_for_the_served_models_round_trips(recipe):
    recipe["evaluation"] = {"k": 1, "max_tokens": 256}
    parsed = recipe_parse(recipe)
    assert (parsed.k, parsed.max_tokens) == (1, 256)
    assert recipe_parse(parsed.to_dict()) == parsed


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"name": ""}, "name"),
        ({"capabilities": []}, "capabilities"),
        ({"generator": {"count": 0}}, "generator.count"),
        ({"generator": {"count": "2"}}, "generator.count"),
        ({"generator": {"families": ["nowhere"]}}, "generator.families"),
        ({"generator": {"horizons": []}}, "generator.horizons"),
        ({"generator": {"kind": "llm"}}, "generator.endpoint"),
        ({"generator": {"colour": "red"}}, "generator.colour"),
        ({"held_out": {"family": "meeting-coordination"}}, "held_out.family"),
        ({"teacher": {"kind": "endpoint"}}, "teacher.endpoint"),
        ({"review": {"policy": "approve-everything"}}, "review.policy"),
        ({"dataset": {"validation_fraction": 0.9}}, "dataset.validation_fraction"),
        ({"sft": {"preset": "huge"}}, "sft.preset"),
        ({"grpo": {"hyperparameters": []}}, "grpo.hyperparameters"),
        ({"evaluation": {"k": 0}}, "evaluation.k"),
        ({"evaluation": {"max_tokens": -1}}, "evaluation.max_tokens"),
        ({"evaluation": {"max_tokens": 1.5}}, "evaluation.max_tokens"),
        ({"surprise": 1}, "surprise"),
        ({"schema": "other/v9"}, "schema"),
    ],
)
def test_a_bad_field_is_named(recipe, change, path):
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(recipe.get(key), dict):
            recipe[key] = {**recipe[key], **value}
        else:
            recipe[key] = value
    error = _error(recipe)
    assert error.path == path
    assert list(error.extra["fields"]) == [path]
    assert error.message.startswith(f"{path}: ")


def test_a_recipe_must_be_an_object():
    assert _error(["name"]).path == "recipe"
