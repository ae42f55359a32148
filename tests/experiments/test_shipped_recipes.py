"""The recipes the repository ships (recipes/*.json): each parses, names capabilities of the
standard catalogue, and trains what its name says."""

import json
from pathlib import Path

import pytest

from apps.experiments.recipe import recipe_parse
from apps.training.hyperparameters import GRPO_PRESETS, PRESETS, SMALL_PRESET_MODEL

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.json"))
CATALOGUE_FILE = ROOT / "apps/capabilities/catalogue.json"
CATALOGUE = {entry["slug"] for entry in json.loads(CATALOGUE_FILE.read_text())["capabilities"]}


def _load(name):
    return recipe_parse(json.loads((ROOT / "recipes" / name).read_text()))


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_shipped_recipe_parses_and_names_catalogue_capabilities(path):
    recipe = recipe_parse(json.loads(path.read_text()))
    assert set(recipe.capabilities) <= CATALOGUE
    assert recipe.held_out.family and recipe.held_out.family not in recipe.generator.families


def test_the_laptop_recipe_trains_the_small_cpu_model():
    recipe = _load("laptop.json")
    assert (recipe.sft.preset, recipe.grpo.preset) == ("laptop-cpu", "laptop-cpu")
    assert PRESETS["laptop-cpu"]["base_model"] == SMALL_PRESET_MODEL
    assert recipe.teacher.kind == "oracle" and not recipe.student_endpoint


def test_the_gpu_recipe_needs_only_its_model_path():
    recipe = _load("gpu-small.json")
    assert recipe.sft.base_model.startswith("/")  # a local folder: the one edit to make
    assert PRESETS[recipe.sft.preset]["hyperparameters"]["lora"] is True
    assert GRPO_PRESETS[recipe.grpo.preset]["hyperparameters"]["bf16"] is True
