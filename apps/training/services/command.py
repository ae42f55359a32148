"""The ``command`` backend: the project's command template hands the job to a scheduler.

The template is one command line, split like a shell would (``shlex``) and run without a
shell; each argument's ``{placeholders}`` are filled per job:

    {job_id} {name} {method} {base_model} {output_dir} {config_path} {config_url}
    {train_file} {eval_file} {train_url} {eval_url} {train_bundle_url} {eval_bundle_url}
    {callback_url} {callback_secret} {hyperparameters}  (the JSON object)

``config_path``/``train_file``/``eval_file`` are files written under the job's output folder
(for a cluster that shares the filesystem); ``config_url``/``train_url``/``eval_url`` are
served by the callback API to whoever presents the job's secret (for one that does not).
A version whose demonstrations show images also gets each such split as a TRL imagefolder
bundle (``data/<split>.zip``: ``metadata.jsonl`` with a ``file_names`` column and the
``images/`` the rows name, the layout of the dataset's ``trl`` bundle export, built from the
job's own rows), served at ``{train_bundle_url}``/``{eval_bundle_url}`` to the same secret
(also in the command's environment as ``COWORKENV_TRAIN_BUNDLE_URL`` /
``COWORKENV_EVAL_BUNDLE_URL``; empty for a split without images); the downloaded config
then names the bundle URLs as its data files, and the entry point reads a bundle as is.
The config carries the callback URL and secret, so the launched script needs only
``python -m apps.training.sft --config …`` (examples in ``deploy/``). The script's
reports move the job: first event → running, ``finished`` → succeeded/failed/cancelled.
Only the secret's sha256 is stored; the recorded command shows it as ``***``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import string
import subprocess
import zipfile
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext
from apps.training.models import TrainingJob
from apps.training.services.jobs import (
    callback_secret_new,
    callback_url,
    training_log_append,
)
from apps.training.services.local import job_config, prepare_files

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
SUBMIT_TIMEOUT_S = 120
REDACTED = "***"


def check_template(template: str) -> list[str]:
    """The template's arguments, or ApplicationError naming what is wrong."""

    def bad(message: str) -> ApplicationError:
        return ApplicationError(message, {"fields": {"template": [message]}})

    try:
        tokens = shlex.split(template or "")
    except ValueError as exc:
        raise bad(f"The command line does not parse: {exc}.") from None
    if not tokens:
        raise bad("Enter the command line to run.")
    for token in tokens:
        try:
            parsed = list(string.Formatter().parse(token))
        except ValueError as exc:
            raise bad(f"Bad placeholder in “{token}”: {exc}.") from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in PLACEHOLDERS or spec or conversion:
                raise bad(f"Unknown placeholder {{{name}}}; use {', '.join(PLACEHOLDERS)}.")
    return tokens


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


def command_training_submit(context: JobContext, training_job: TrainingJob) -> str:
    """Fill the template and run it once (a redelivered message finds it submitted)."""
    if training_job.command_template is None:
        raise ApplicationError("This job's command template was deleted.")
    if not TrainingJob.objects.filter(pk=training_job.pk, command="").update(
        command="(submitting)"
    ):
        return "Already submitted."
    tokens = check_template(training_job.command_template.template)
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
    secret = callback_secret_new(training_job)
    config = job_config(
        training_job,
        prepared["files"],
        {"callback_url": callback_url(training_job), "callback_secret": secret},
    )
    config_path = out / "job.json"
    config_path.write_text(json.dumps(config, indent=2))
    config_path.chmod(0o600)
    values = {
        "job_id": str(training_job.pk),
        "name": training_job.name,
        "method": training_job.method,
        "base_model": training_job.base_model,
        "output_dir": training_job.output_dir,
        "config_path": str(config_path),
        "config_url": callback_url(training_job, "config"),
        "train_file": prepared["files"]["train"],
        "eval_file": prepared["files"].get("eval", ""),
        "train_url": callback_url(training_job, "data-train"),
        "eval_url": callback_url(training_job, "data-eval") if training_job.eval_split else "",
        "train_bundle_url": bundle_urls["train"],
        "eval_bundle_url": bundle_urls["eval"],
        "callback_url": callback_url(training_job),
        "callback_secret": secret,
        "hyperparameters": json.dumps(training_job.hyperparameters, sort_keys=True),
    }
    argv = [token.format_map(values) for token in tokens]
    shown = " ".join(shlex.quote(arg.replace(secret, REDACTED)) for arg in argv)
    artifacts = dict(training_job.artifacts or {})
    artifacts.update(
        output_dir=str(out),
        config_path=str(config_path),
        config={**config, "report": {**config["report"], "callback_secret": REDACTED}},
        data_sha256=prepared["data_sha256"],
    )
    if any(bundles.values()):
        artifacts["bundle_sha256"] = {split: sha for split, sha in bundles.items() if sha}
    TrainingJob.objects.filter(pk=training_job.pk).update(command=shown, artifacts=artifacts)
    training_job.artifacts = artifacts
    try:
        result = subprocess.run(
            argv,
            cwd=settings.BASE_DIR,
            env={
                **os.environ,
                "COWORKENV_CALLBACK_SECRET": secret,
                "COWORKENV_TRAIN_BUNDLE_URL": bundle_urls["train"],
                "COWORKENV_EVAL_BUNDLE_URL": bundle_urls["eval"],
            },
            capture_output=True,
            text=True,
            timeout=SUBMIT_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise ApplicationError(f"The command “{argv[0]}” is not installed on the worker.") from None
    except subprocess.TimeoutExpired:
        raise ApplicationError(f"The command did not return within {SUBMIT_TIMEOUT_S} s.") from None
    output = (result.stdout + result.stderr).replace(secret, REDACTED)
    training_log_append(training_job=training_job, text=f"$ {shown}\n{output}")
    if result.returncode != 0:
        last = output.strip().splitlines()[-1] if output.strip() else "no output"
        raise ApplicationError(f"The command exited with status {result.returncode}: {last}")
    match = re.search(r"Submitted batch job (\d+)", output)
    external = match.group(1) if match else (output.strip().splitlines() or [""])[0][:200]
    TrainingJob.objects.filter(pk=training_job.pk).update(external_id=external)
    message = f"Submitted{f' as {external}' if external else ''}; waiting for its reports."
    Job.objects.filter(pk=context.job.pk).update(message=message, heartbeat_at=timezone.now())
    return message
