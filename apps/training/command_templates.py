"""The operator's command templates: the only commands a ``command`` training job runs.

A template is deployment configuration, never project data: the operator writes them in
the file ``TRAINING_COMMAND_TEMPLATES_FILE`` names (JSON, or YAML for ``.yaml``/``.yml``)
and project members only pick one and fill its declared parameters. See
``docs/commands.md`` for the format; in short::

    {"templates": {"slurm-a100": {
        "kind": "slurm", "description": "…",
        "argv": ["sbatch", "--job-name=cw-{job_id}", "--gres", "{gres}", "{script}"],
        "parameters": {"gres": {"type": "choice", "choices": ["gpu:1", "gpu:4"]}},
        "env": {"SLURM_CONF": "/etc/slurm/slurm.conf"},
        "pass_env": ["KUBECONFIG"]}}}

``argv`` is run as it is, without a shell. The job's own placeholders (``PLACEHOLDERS``,
filled by the server) may appear inside an element; a parameter only as a whole element
(``"{gres}"``), so a value is always exactly one argument. The environment holds only
``env``, the ``pass_env`` variables copied from the worker, a minimal ``PATH`` and the
job's callback URL and secret.
"""

from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.core.exceptions import ApplicationError
from apps.training.redaction import SECRET_NAME, SERVER_SECRET_NAMES

PLACEHOLDERS = (
    "job_id",
    "name",
    "method",
    "base_model",
    "output_dir",
    "config_path",
    "config_url",
    "train_file",
    "eval_file",
    "train_url",
    "eval_url",
    "train_bundle_url",
    "eval_bundle_url",
    "callback_url",
    "callback_secret",
    "hyperparameters",
)
KINDS = ("slurm", "skypilot", "kubernetes", "other")
TYPES = ("string", "integer", "number", "choice")
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
PARAMETER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
DEFAULT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/@+=,-]{0,199}"
VALUE_MAX_CHARS = 500
# What the server sets in every job's environment (apps.training.services.command).
SERVER_SET = (
    "PATH",
    "LANG",
    "COWORKENV_CALLBACK_URL",
    "COWORKENV_CALLBACK_SECRET",
    "COWORKENV_CONFIG",
    "COWORKENV_CONFIG_URL",
    "COWORKENV_TRAIN_BUNDLE_URL",
    "COWORKENV_EVAL_BUNDLE_URL",
)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class TemplateFileError(ApplicationError):
    """The operator's file is unreadable or out of shape (an operator's error, shown whole)."""


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    label: str = ""
    help: str = ""
    required: bool = False
    default: Any = None
    pattern: str = DEFAULT_PATTERN
    choices: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None

    def clean(self, raw: Any) -> Any:
        """The value to pass, or ApplicationError naming the parameter."""
        if raw is None or raw == "":
            if self.default is not None:
                return self.default
            if self.required:
                raise _param_error(self.name, "This parameter is required.")
            return None
        if self.type == "choice":
            value = str(raw)
            if value not in self.choices:
                raise _param_error(self.name, f"Choose one of {', '.join(self.choices)}.")
            return value
        if self.type in ("integer", "number"):
            return self._number(raw)
        value = str(raw)
        if len(value) > VALUE_MAX_CHARS or CONTROL.search(value):
            raise _param_error(self.name, "Too long, or holds a control character.")
        if value.startswith("-"):
            raise _param_error(self.name, "A value may not start with “-” (it reads as an option).")
        if not re.fullmatch(self.pattern, value):
            raise _param_error(self.name, f"Does not match the pattern {self.pattern}.")
        return value

    def _number(self, raw: Any) -> int | float:
        try:
            if isinstance(raw, bool):
                raise ValueError
            value = int(str(raw)) if self.type == "integer" else float(raw)
        except (TypeError, ValueError):
            raise _param_error(
                self.name, f"Enter {'a whole number' if self.type == 'integer' else 'a number'}."
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise _param_error(self.name, "Enter a finite number.")
        if self.min is not None and value < self.min:
            raise _param_error(self.name, f"At least {self.min:g}.")
        if self.max is not None and value > self.max:
            raise _param_error(self.name, f"At most {self.max:g}.")
        return value


@dataclass(frozen=True)
class CommandTemplate:
    name: str
    argv: tuple[str, ...]
    kind: str = "other"
    description: str = ""
    parameters: dict[str, Parameter] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()

    def clean_parameters(self, raw: Any) -> dict[str, Any]:
        """The declared parameters' values (defaults filled, None left out); an unknown
        name or a bad value is an ApplicationError naming it, nothing is passed on."""
        raw = raw if raw is not None else {}
        if not isinstance(raw, dict):
            raise _param_error("command_parameters", "The parameters are an object.")
        unknown = sorted(set(map(str, raw)) - set(self.parameters))
        if unknown:
            raise _param_error(
                "command_parameters",
                f"The template {self.name} takes no parameter {', '.join(unknown)}.",
            )
        values = {name: p.clean(raw.get(name)) for name, p in self.parameters.items()}
        return {name: value for name, value in values.items() if value is not None}


def _param_error(name: str, message: str) -> ApplicationError:
    key = name if name == "command_parameters" else f"command_parameters.{name}"
    text = message if name == "command_parameters" else f"{name}: {message}"
    return ApplicationError(text, {"fields": {key: [text]}})


def _bad(where: str, message: str) -> TemplateFileError:
    return TemplateFileError(
        f"The operator's command templates ({settings.TRAINING_COMMAND_TEMPLATES_FILE}): "
        f"{where}: {message}"
    )


def _fields(token: str, where: str) -> list[str]:
    try:
        parsed = list(string.Formatter().parse(token))
    except ValueError as exc:
        raise _bad(where, f"bad placeholder in {token!r}: {exc}") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name or spec or conversion:
            raise _bad(where, f"bad placeholder in {token!r}")
        names.append(name)
    return names


def _check_argv(name: str, argv: Any, parameters: dict[str, Parameter]) -> tuple[str, ...]:
    where = f"template {name}, argv"
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise _bad(where, "a non-empty list of strings")
    if _fields(argv[0], where):
        raise _bad(where, "the program (first element) is written out, not a placeholder")
    for token in argv:
        for placeholder in _fields(token, where):
            if placeholder in parameters:
                if token != "{" + placeholder + "}":
                    raise _bad(where, f'a parameter is a whole element: write "{{{placeholder}}}"')
            elif placeholder not in PLACEHOLDERS:
                raise _bad(where, f"unknown placeholder {{{placeholder}}}")
    return tuple(argv)


def _parameter(template: str, name: str, spec: Any) -> Parameter:
    where = f"template {template}, parameter {name}"
    if not PARAMETER_NAME.match(name) or name in PLACEHOLDERS:
        raise _bad(where, "a name of lowercase letters, digits and _ (not a job placeholder)")
    if not isinstance(spec, dict) or spec.get("type") not in TYPES:
        raise _bad(where, f"type is one of {', '.join(TYPES)}")
    allowed = {"type", "label", "help", "required", "default", "pattern", "choices", "min", "max"}
    if set(spec) - allowed:
        raise _bad(where, f"unknown keys {', '.join(sorted(set(spec) - allowed))}")
    choices = tuple(str(c) for c in spec.get("choices") or ())
    if spec["type"] == "choice" and not choices:
        raise _bad(where, "a choice parameter lists its choices")
    pattern = spec.get("pattern") or DEFAULT_PATTERN
    try:
        re.compile(pattern)
    except re.error as exc:
        raise _bad(where, f"bad pattern: {exc}") from None
    parameter = Parameter(
        name=name,
        type=spec["type"],
        label=str(spec.get("label") or name),
        help=str(spec.get("help") or ""),
        required=bool(spec.get("required")),
        pattern=pattern,
        choices=choices,
        min=spec.get("min"),
        max=spec.get("max"),
    )
    if spec.get("default") is not None:
        try:
            default = parameter.clean(spec["default"])
        except ApplicationError as exc:
            raise _bad(where, f"the default is not valid: {exc.message}") from None
        parameter = replace(parameter, default=default)
    return parameter


def _environment(name: str, spec: dict) -> tuple[dict[str, str], tuple[str, ...]]:
    where = f"template {name}"
    env = spec.get("env") or {}
    passed = spec.get("pass_env") or []
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _bad(where, "env maps names to strings")
    if not isinstance(passed, list):
        raise _bad(where, "pass_env is a list of variable names")
    for var in [*env, *passed]:
        if not ENV_NAME.match(str(var)):
            raise _bad(where, f"{var!r} is not a variable name (A-Z, 0-9, _)")
        if var in SERVER_SET:
            raise _bad(where, f"{var} is set by the server")
    for var in passed:
        if var in SERVER_SECRET_NAMES or SECRET_NAME.search(var):
            raise _bad(where, f"pass_env may not hand the server's secret {var} to a job")
    for value in env.values():
        for placeholder in _fields(value, f"{where}, env"):
            if placeholder not in PLACEHOLDERS or placeholder == "callback_secret":
                raise _bad(where, f"env takes only job placeholders, not {{{placeholder}}}")
    return dict(env), tuple(passed)


def _template(name: str, spec: Any) -> CommandTemplate:
    if not NAME.match(name):
        raise _bad(f"template {name!r}", "a name of lowercase letters, digits, - and _")
    if not isinstance(spec, dict):
        raise _bad(f"template {name}", "an object")
    allowed = {"kind", "description", "argv", "parameters", "env", "pass_env"}
    if set(spec) - allowed:
        raise _bad(f"template {name}", f"unknown keys {', '.join(sorted(set(spec) - allowed))}")
    if spec.get("kind", "other") not in KINDS:
        raise _bad(f"template {name}", f"kind is one of {', '.join(KINDS)}")
    raw_parameters = spec.get("parameters") or {}
    if not isinstance(raw_parameters, dict):
        raise _bad(f"template {name}", "parameters is an object")
    parameters = {p: _parameter(name, p, s) for p, s in raw_parameters.items()}
    env, passed = _environment(name, spec)
    return CommandTemplate(
        name=name,
        argv=_check_argv(name, spec.get("argv"), parameters),
        kind=spec.get("kind", "other"),
        description=str(spec.get("description") or ""),
        parameters=parameters,
        env=env,
        pass_env=passed,
    )


_cache: dict[tuple, dict[str, CommandTemplate]] = {}


def command_templates() -> dict[str, CommandTemplate]:
    """The operator's templates by name (none when no file is configured). Read again when
    the file changes; a broken file is a TemplateFileError, never a half-read set."""
    path_setting = settings.TRAINING_COMMAND_TEMPLATES_FILE
    if not path_setting:
        return {}
    path = Path(path_setting)
    try:
        stat = path.stat()
    except OSError as exc:
        raise _bad("the file", f"cannot be read ({exc.strerror})") from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _cache:
        _cache.clear()
        _cache[key] = _parse(path)
    return _cache[key]


def _parse(path: Path) -> dict[str, CommandTemplate]:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # json.JSONDecodeError, yaml.YAMLError
        raise _bad("the file", f"does not parse: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("templates"), dict):
        raise _bad("the file", 'an object {"templates": {name: template, …}}')
    return {name: _template(str(name), spec) for name, spec in data["templates"].items()}


def command_template_get(name: str) -> CommandTemplate | None:
    return command_templates().get(name or "")
