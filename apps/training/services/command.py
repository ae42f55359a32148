"""The ``command`` backend: one of the operator's templates hands the job to a scheduler.

The template (``apps.training.command_templates``: deployment configuration, never project
data) is an argument vector run without a shell; the job's placeholders are filled in it,
and each parameter the launching member chose is one whole argument:

    {job_id} {name} {method} {base_model} {output_dir} {config_path} {config_url}
    {train_file} {eval_file} {train_url} {eval_url} {train_bundle_url} {eval_bundle_url}
    {callback_url} {callback_secret} {hyperparameters}  (the JSON object)

``config_path``/``train_file``/``eval_file`` are files written under the job's output folder
(for a cluster that shares the filesystem); ``config_url``/``train_url``/``eval_url`` are
served by the callback API to whoever presents the job's secret (for one that does not).
A version whose demonstrations show images also gets each such split as a TRL imagefolder
bundle (``data/<split>.zip``: ``metadata.jsonl`` with a ``file_names`` column and the
``images/`` the rows name, the layout of the dataset's ``trl`` bundle export, built from the
job's own rows), served at ``{train_bundle_url}``/``{eval_bundle_url}`` to the same secret.

The command's environment is only what the template declares (``env``, ``pass_env``), a
minimal ``PATH`` (TRAINING_COMMAND_PATH) and the job's own ``COWORKENV_*`` variables
(callback URL and secret, config path and URL, bundle URLs) — never the worker's. What it
prints passes through ``apps.training.redaction`` before it is stored. The script's reports
move the job: first event → running, ``finished`` → succeeded/failed/cancelled. Only the
secret's sha256 is stored; the recorded command shows it as ``***``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import zipfile
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext
from apps.training.command_templates import CommandTemplate, command_template_get
from apps.training.models import TrainingJob
from apps.training.redaction import scrub, scrub_json
from apps.training.services.local import job_config, prepare_files
from apps.training.services.reports import (
    callback_secret_new,
    callback_url,
    training_log_append,
)

SUBMIT_TIMEOUT_S = 120
REDACTED = "***"
EXTERNAL_ID = re.compile(r"Submitted batch job (\d+)|^([A-Za-z0-9][A-Za-z0-9._:/-]{0,199})$")


BUNDLE_DATE = (2026, 1, 1, 0, 0, 0)


def bundle_path(training_job: TrainingJob, split: str) -> Path:
    """Where a split's image bundle is written (``split`` is ``train`` or ``eval``)."""
    return Path(training_job.output_dir) / "data" / f"{split}.zip"


def write_bundle(rows_path: Path, target: Path) -> str | None:
    """A TRL imagefolder bundle of the rows in ``rows_path`` and the images written beside
    them (``metadata.jsonl``, ``file_names`` for ``images``), when a row names images; its
    sha256, or ``None`` (no image: no bundle). Fixed entry order and date: a rebuild gives
    the same bytes."""
    lines, names = [], []
    with open(rows_path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            row["file_names"] = row.pop("images", None) or []
            names += [n for n in row["file_names"] if n not in names]
            lines.append(json.dumps(row, ensure_ascii=False))
    target.unlink(missing_ok=True)
    if not names:
        return None
    temp = target.with_name(f".{target.name}.part")
    with zipfile.ZipFile(temp, "w") as archive:

        def add(name: str, data: bytes, method: int) -> None:
            info = zipfile.ZipInfo(name, date_time=BUNDLE_DATE)
            info.compress_type = method
            archive.writestr(info, data)

        add("metadata.jsonl", ("\n".join(lines) + "\n").encode(), zipfile.ZIP_DEFLATED)
        for name in sorted(names):
            image = rows_path.parent / name
            if not name.startswith("images/") or not image.is_file():
                raise ApplicationError(f"The image {name} the rows name was not written.")
            add(name, image.read_bytes(), zipfile.ZIP_STORED)
    temp.replace(target)
    digest = hashlib.sha256()
    with open(target, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_urls(training_job: TrainingJob) -> dict[str, str]:
    """Each split's URL for a node that does not share the disk: the image bundle when the
    split has one, else the rows."""
    urls = {}
    for split in ("train", "eval") if training_job.eval_split else ("train",):
        bundled = bundle_path(training_job, split).exists()
        urls[split] = callback_url(training_job, f"{'bundle' if bundled else 'data'}-{split}")
    return urls


def remote_config(training_job: TrainingJob, secret: str) -> dict:
    """The config a cluster node downloads: data as URLs (image bundles for splits with
    images), the secret as their header."""
    return job_config(
        training_job,
        data_urls(training_job),
        {"callback_url": callback_url(training_job), "callback_secret": secret},
        data_headers={"Authorization": f"Bearer {secret}"},
    ) | {"output_dir": f"coworkenv-training-{training_job.pk}"}


def _argv(template: CommandTemplate, values: dict, parameters: dict) -> list[str]:
    """The template's elements, filled: a parameter is one whole element; an element that
    begins with a placeholder may not begin with "-" once filled (an option smuggled in
    through a job's name or base model)."""
    argv = []
    for token in template.argv:
        name = token[1:-1]
        if token.startswith("{") and name in template.parameters:
            if name not in parameters:
                continue  # an optional parameter left blank: no element
            arg = str(parameters[name])
        else:
            arg = token.format_map(values)
        if token.startswith("{") and arg.startswith("-"):
            raise ApplicationError(f"The value of {token} may not start with “-”.")
        argv.append(arg)
    return argv


def _environment(template: CommandTemplate, values: dict, secret: str) -> dict[str, str]:
    """Only what the template declares, a minimal PATH and the job's own variables."""
    env = {"PATH": settings.TRAINING_COMMAND_PATH, "LANG": "C.UTF-8"}
    env.update({name: os.environ[name] for name in template.pass_env if name in os.environ})
    env.update({name: value.format_map(values) for name, value in template.env.items()})
    env.update(
        COWORKENV_CALLBACK_URL=values["callback_url"],
        COWORKENV_CALLBACK_SECRET=secret,
        COWORKENV_CONFIG=values["config_path"],
        COWORKENV_CONFIG_URL=values["config_url"],
        COWORKENV_TRAIN_BUNDLE_URL=values["train_bundle_url"],
        COWORKENV_EVAL_BUNDLE_URL=values["eval_bundle_url"],
    )
    return env


def _template_and_parameters(training_job: TrainingJob) -> tuple[CommandTemplate, dict]:
    """The operator's template the job names and its parameters checked again (the file
    may have changed since the launch)."""
    template = command_template_get(training_job.command_template)
    if template is None:
        raise ApplicationError(
            f"The operator no longer offers the command template “{training_job.command_template}”."
        )
    return template, template.clean_parameters(training_job.command_parameters)


def _prepare(training_job: TrainingJob) -> tuple[dict, dict, dict]:
    """Write the data, bundles and job.json; the placeholders' values, the config and the
    bundles' sha256."""
    out = Path(training_job.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    prepared = prepare_files(training_job, fmt="trl")
    bundles = {
        split: write_bundle(Path(path), bundle_path(training_job, split))
        for split, path in prepared["files"].items()
    }
    bundle_urls = {
        split: callback_url(training_job, f"bundle-{split}") if bundles.get(split) else ""
        for split in ("train", "eval")
    }
    values = {
        "job_id": str(training_job.pk),
        "name": training_job.name,
        "method": training_job.method,
        "base_model": training_job.base_model,
        "output_dir": training_job.output_dir,
        "config_path": str(out / "job.json"),
        "config_url": callback_url(training_job, "config"),
        "train_file": prepared["files"]["train"],
        "eval_file": prepared["files"].get("eval", ""),
        "train_url": callback_url(training_job, "data-train"),
        "eval_url": callback_url(training_job, "data-eval") if training_job.eval_split else "",
        "train_bundle_url": bundle_urls["train"],
        "eval_bundle_url": bundle_urls["eval"],
        "callback_url": callback_url(training_job),
        "hyperparameters": json.dumps(training_job.hyperparameters, sort_keys=True),
    }
    return values, prepared, bundles


def command_training_submit(context: JobContext, training_job: TrainingJob) -> str:
    """Fill the operator's template and run it once (a redelivered message finds it
    submitted)."""
    template, parameters = _template_and_parameters(training_job)
    if not TrainingJob.objects.filter(pk=training_job.pk, command="").update(
        command="(submitting)"
    ):
        return "Already submitted."
    values, prepared, bundles = _prepare(training_job)
    secret = callback_secret_new(training_job)
    values["callback_secret"] = secret
    config = job_config(
        training_job,
        prepared["files"],
        {"callback_url": values["callback_url"], "callback_secret": secret},
    )
    config_path = Path(values["config_path"])
    config_path.write_text(json.dumps(config, indent=2))
    config_path.chmod(0o600)
    argv = _argv(template, values, parameters)
    shown = scrub(" ".join(shlex.quote(arg) for arg in argv), (secret,))
    artifacts = dict(training_job.artifacts or {})
    artifacts.update(
        output_dir=training_job.output_dir,
        config_path=str(config_path),
        config={**config, "report": {**config["report"], "callback_secret": REDACTED}},
        data_sha256=prepared["data_sha256"],
        command_template=template.name,
        command_parameters=parameters,
    )
    if any(bundles.values()):
        artifacts["bundle_sha256"] = {split: sha for split, sha in bundles.items() if sha}
    artifacts = scrub_json(artifacts, (secret,))
    TrainingJob.objects.filter(pk=training_job.pk).update(command=shown, artifacts=artifacts)
    training_job.artifacts = artifacts
    output, returncode = _run(argv, _environment(template, values, secret), secret)
    training_log_append(training_job=training_job, text=f"$ {shown}\n{output}")
    if returncode != 0:
        raise ApplicationError(
            f"The command exited with status {returncode}; its output is in the job's log."
        )
    external = _external_id(output)
    TrainingJob.objects.filter(pk=training_job.pk).update(external_id=external)
    message = f"Submitted{f' as {external}' if external else ''}; waiting for its reports."
    Job.objects.filter(pk=context.job.pk).update(message=message, heartbeat_at=timezone.now())
    return message


def _run(argv: list[str], env: dict[str, str], secret: str) -> tuple[str, int]:
    """Run the command (no shell); its output, redacted, and its exit status."""
    try:
        result = subprocess.run(
            argv,
            cwd=settings.BASE_DIR,
            env=env,
            shell=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SUBMIT_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise ApplicationError(f"The command “{argv[0]}” is not installed on the worker.") from None
    except subprocess.TimeoutExpired:
        raise ApplicationError(f"The command did not return within {SUBMIT_TIMEOUT_S} s.") from None
    return scrub(result.stdout + result.stderr, (secret,)), result.returncode


def _external_id(output: str) -> str:
    """The scheduler's id: sbatch's number, or a first line that looks like an id (no
    free text: a job's id is shown to every member)."""
    lines = output.strip().splitlines()
    match = re.search(r"Submitted batch job (\d+)", output) or (
        EXTERNAL_ID.match(lines[0].strip()) if lines else None
    )
    if match is None:
        return ""
    return match.group(1) or match.group(2) or ""
