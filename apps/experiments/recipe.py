"""An experiment's recipe: one JSON document naming every choice of the loop, parsed into
frozen dataclasses. A bad recipe raises ``RecipeError`` naming the field by its dotted path
(``generator.count``), so the form, the API and the command show where it is wrong; nothing
here touches the database (names are resolved against a project by the services)."""

import json
from dataclasses import asdict, dataclass, field

from apps.core.exceptions import ApplicationError
from apps.synthesis.generators import RECEIPTS_FAMILY, TEMPLATE_FAMILY_CHOICES
from apps.synthesis.models import MAX_TASKS_PER_ENVIRONMENT, Horizon
from apps.training.hyperparameters import GRPO_PRESETS, PRESETS

SCHEMA = "coworkenv.experiment/v1"
FAMILIES = tuple(key for key, _ in TEMPLATE_FAMILY_CHOICES if key != RECEIPTS_FAMILY)
MAX_COUNT = 50  # environments per (family, horizon) cell
MAX_K = 16
MAX_ANSWER_TOKENS = 32768


class ReviewPolicy:
    """Who approves the teacher's demonstrations: the human queue, or a recorded rule."""

    HUMAN = "human"
    STRICT_PASSES = "approve-strict-passes"
    PASSES = "approve-passes"
    CHOICES = (HUMAN, STRICT_PASSES, PASSES)


class RecipeError(ApplicationError):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}", {"fields": {path: [message]}})
        self.path = path


@dataclass(frozen=True)
class GeneratorRecipe:
    kind: str = "template"
    endpoint: str = ""
    families: tuple[str, ...] = ()
    horizons: tuple[str, ...] = (Horizon.SHORT,)
    count: int = 2
    tasks_per_environment: int = 3
    seed: int = 0


@dataclass(frozen=True)
class HeldOutRecipe:
    seeds: int = 1  # held-out environments per (family, horizon), from seeds never trained on
    family: str = ""  # one whole family kept out of training: the out-of-distribution row


@dataclass(frozen=True)
class PolicyRecipe:
    kind: str = "oracle"
    endpoint: str = ""


@dataclass(frozen=True)
class DatasetRecipe:
    validation_fraction: float = 0.2
    seed: int = 0


@dataclass(frozen=True)
class TrainingRecipe:
    preset: str = "tiny-cpu"
    base_model: str = ""
    hyperparameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    name: str
    capabilities: tuple[str, ...]
    generator: GeneratorRecipe
    held_out: HeldOutRecipe
    teacher: PolicyRecipe
    review: str
    dataset: DatasetRecipe
    sft: TrainingRecipe
    grpo: TrainingRecipe
    k: int
    student_endpoint: str = ""
    max_tokens: int = 0  # the served models' answer cap in the student batches; 0: theirs

    def to_dict(self) -> dict:
        data = asdict(self)
        data["schema"] = SCHEMA
        data["review"] = {"policy": self.review}
        data["evaluation"] = {"k": data.pop("k"), "max_tokens": data.pop("max_tokens")}
        return json.loads(json.dumps(data))  # tuples become lists, as the JSON field stores


def _object(value, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecipeError(path, "Give an object.")
    return value


def _unknown(data: dict, known: set[str], path: str) -> None:
    extra = sorted(set(data) - known)
    if extra:
        where = f"{path}.{extra[0]}" if path else extra[0]
        raise RecipeError(where, "Unknown field.")


def _int(data: dict, name: str, path: str, default: int, low: int, high: int) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RecipeError(f"{path}.{name}", f"Give a whole number from {low} to {high}.")
    return value


def _text(data: dict, name: str, path: str, default: str = "", limit: int = 200) -> str:
    value = data.get(name, default)
    if not isinstance(value, str) or len(value) > limit:
        raise RecipeError(
            f"{path}.{name}".lstrip("."), f"Give a text of at most {limit} characters."
        )
    return value.strip()


def _choice(data: dict, name: str, path: str, default: str, choices) -> str:
    value = data.get(name, default)
    if value not in choices:
        raise RecipeError(f"{path}.{name}".lstrip("."), f"Choose one of {', '.join(choices)}.")
    return value


def _choices(data: dict, name: str, path: str, default, choices) -> tuple[str, ...]:
    value = data.get(name, list(default))
    if not isinstance(value, list) or any(v not in choices for v in value):
        raise RecipeError(f"{path}.{name}", f"Give a list of: {', '.join(choices)}.")
    return tuple(dict.fromkeys(value))


def _generator(data: dict) -> GeneratorRecipe:
    data = _object(data, "generator")
    _unknown(data, {f for f in GeneratorRecipe.__dataclass_fields__}, "generator")
    kind = _choice(data, "kind", "generator", "template", ("template", "llm"))
    endpoint = _text(data, "endpoint", "generator")
    if kind == "llm" and not endpoint:
        raise RecipeError("generator.endpoint", "The llm generator needs an endpoint's name.")
    families = _choices(data, "families", "generator", (), FAMILIES)
    if families and kind != "template":
        raise RecipeError("generator.families", "Families are chosen for the template generator.")
    horizons = _choices(data, "horizons", "generator", (Horizon.SHORT,), Horizon.values)
    if not horizons:
        raise RecipeError("generator.horizons", "Choose at least one horizon.")
    return GeneratorRecipe(
        kind=kind,
        endpoint=endpoint if kind == "llm" else "",
        families=families,
        horizons=horizons,
        count=_int(data, "count", "generator", 2, 1, MAX_COUNT),
        tasks_per_environment=_int(
            data, "tasks_per_environment", "generator", 3, 1, MAX_TASKS_PER_ENVIRONMENT
        ),
        seed=_int(data, "seed", "generator", 0, 0, 2**31 - 1),
    )


def _held_out(data: dict, generator: GeneratorRecipe) -> HeldOutRecipe:
    data = _object(data, "held_out")
    _unknown(data, {"seeds", "family"}, "held_out")
    family = _choice(data, "family", "held_out", "", ("", *FAMILIES))
    if family and generator.kind != "template":
        raise RecipeError("held_out.family", "A held-out family needs the template generator.")
    if family and family in generator.families:
        raise RecipeError("held_out.family", "The held-out family must not be trained on.")
    return HeldOutRecipe(seeds=_int(data, "seeds", "held_out", 1, 0, MAX_COUNT), family=family)


def _policy(data: dict, path: str) -> PolicyRecipe:
    data = _object(data, path)
    _unknown(data, {"kind", "endpoint"}, path)
    kind = _choice(data, "kind", path, "oracle", ("oracle", "endpoint"))
    endpoint = _text(data, "endpoint", path)
    if kind == "endpoint" and not endpoint:
        raise RecipeError(f"{path}.endpoint", "Name the project's model endpoint.")
    return PolicyRecipe(kind=kind, endpoint=endpoint if kind == "endpoint" else "")


def _dataset(data: dict) -> DatasetRecipe:
    data = _object(data, "dataset")
    _unknown(data, {"validation_fraction", "seed"}, "dataset")
    fraction = data.get("validation_fraction", 0.2)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise RecipeError("dataset.validation_fraction", "Give a number from 0 to 0.5.")
    if not 0 <= fraction <= 0.5:
        raise RecipeError("dataset.validation_fraction", "Give a number from 0 to 0.5.")
    return DatasetRecipe(
        validation_fraction=float(fraction), seed=_int(data, "seed", "dataset", 0, 0, 2**31 - 1)
    )


def _training(data: dict, path: str, presets: dict) -> TrainingRecipe:
    data = _object(data, path)
    _unknown(data, {"preset", "base_model", "hyperparameters"}, path)
    hyperparameters = data.get("hyperparameters", {})
    if not isinstance(hyperparameters, dict):
        raise RecipeError(f"{path}.hyperparameters", "Give an object of hyperparameters.")
    return TrainingRecipe(
        preset=_choice(data, "preset", path, "tiny-cpu", tuple(presets)),
        base_model=_text(data, "base_model", path),
        hyperparameters=hyperparameters,
    )


def _capabilities(value) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RecipeError("capabilities", "Give a list of at least one capability slug.")
    return tuple(dict.fromkeys(v.strip() for v in value))


TOP_FIELDS = {
    "schema",
    "name",
    "capabilities",
    "generator",
    "held_out",
    "teacher",
    "review",
    "dataset",
    "sft",
    "grpo",
    "evaluation",
    "student_endpoint",
}


def recipe_parse(data) -> Recipe:
    """The recipe in ``data`` (a decoded JSON object), or ``RecipeError`` naming its field."""
    if not isinstance(data, dict):
        raise RecipeError("recipe", "Give a JSON object.")
    _unknown(data, TOP_FIELDS, "")
    if data.get("schema", SCHEMA) != SCHEMA:
        raise RecipeError("schema", f"Use “{SCHEMA}”.")
    name = _text(data, "name", "")
    if not name:
        raise RecipeError("name", "Name the experiment.")
    generator = _generator(data.get("generator"))
    review = _object(data.get("review"), "review")
    _unknown(review, {"policy"}, "review")
    evaluation = _object(data.get("evaluation"), "evaluation")
    _unknown(evaluation, {"k", "max_tokens"}, "evaluation")
    return Recipe(
        name=name,
        capabilities=_capabilities(data.get("capabilities")),
        generator=generator,
        held_out=_held_out(data.get("held_out"), generator),
        teacher=_policy(data.get("teacher"), "teacher"),
        review=_choice(review, "policy", "review", ReviewPolicy.HUMAN, ReviewPolicy.CHOICES),
        dataset=_dataset(data.get("dataset")),
        sft=_training(data.get("sft"), "sft", PRESETS),
        grpo=_training(data.get("grpo"), "grpo", GRPO_PRESETS),
        k=_int(evaluation, "k", "evaluation", 2, 1, MAX_K),
        student_endpoint=_text(data, "student_endpoint", ""),
        max_tokens=_int(evaluation, "max_tokens", "evaluation", 0, 0, MAX_ANSWER_TOKENS),
    )
