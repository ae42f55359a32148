"""Import and export of spec files: one ``.json`` document, a ``.zip`` of them, or pasted text.

Everything is checked before anything is written: a file with one bad document saves
nothing, and the error says which file, where (line and column for JSON syntax, a JSON
pointer for schema problems) and how to fix it. Limits keep an upload from exhausting
memory: the raw size, the number of zip members, and each member's uncompressed size are
checked before a member is read, and a member is never read past its limit.

A zip may also carry attachment files as ``attachments/<sha256>`` members (what the zip
export writes for multimodal environments): each document's listed attachments are then
imported with their bytes (``environment_import_with_files``), checked against their entry.
"""

import io
import json
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from apps.core.exceptions import ApplicationError
from apps.core.safeinput import UnsafeInput, json_loads
from apps.environments.attachments import attachment_bytes
from apps.environments.models import Environment
from apps.environments.services.attachment_owners import attachments_owned_check
from apps.environments.services.attachments import environment_import_with_files
from apps.environments.services.environments import environment_import, spec_canonical
from apps.environments.specs import environment_spec

MAX_ZIP_MEMBERS = 200
PASTED = "The pasted text"
MAX_EXPORT_ENVIRONMENTS = 1000
# Files that archivers add on their own; they are skipped, not refused.
_IGNORED_NAMES = {".DS_Store", "Thumbs.db"}
_ATTACHMENT_MEMBER = re.compile(r"(^|/)attachments/([0-9a-f]{64})$")


def max_upload_bytes() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def max_unpacked_bytes() -> int:
    """All members of a zip together, uncompressed: five times the upload limit."""
    return 5 * settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


@dataclass(frozen=True)
class _Document:
    source: str  # the file (or zip member) the document came from, for messages
    spec: dict
    files: dict | None = None  # sha256 -> bytes: attachment files that came with it


def _problem(code: str, message: str, *, source: str, pointer: str = "", hint: str = "", **kw):
    return {
        "code": code,
        "severity": "error",
        "pointer": pointer,
        "message": message,
        "hint": hint,
        "file": source,
        **kw,
    }


def _fail(message: str, problems: list[dict]) -> ApplicationError:
    return ApplicationError(message, {"problems": problems})


def spec_parse(text: str, *, source: str) -> dict:
    """Parse one JSON document and check it is a schema-valid spec; returns it canonical.

    Raises ApplicationError whose ``extra["problems"]`` locates each problem: a syntax error
    by line and column, a schema problem by JSON pointer (each tagged with ``file``).
    """
    try:
        value = json_loads(text)
    except UnsafeInput as exc:
        raise _fail(
            f"{source}: {exc.message}",
            [
                _problem(
                    exc.code,
                    exc.message,
                    source=source,
                    pointer=exc.pointer,
                    hint="Flatten the document."
                    if exc.code == "json_too_deep"
                    else "Remove the character: NUL and unpaired surrogates are not text.",
                )
            ],
        ) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise _fail(
            f"{source} is not valid JSON: {where}.",
            [
                _problem(
                    "json_syntax",
                    exc.msg,
                    source=source,
                    hint="Fix the JSON syntax at that position (a missing comma, quote or "
                    "bracket is the usual cause).",
                    line=exc.lineno,
                    column=exc.colno,
                )
            ],
        ) from None
    except ValueError as exc:  # NaN / Infinity, which JSON does not have; a duplicate key
        raise _fail(
            f"{source} is not valid JSON: {exc}.",
            [_problem("json_syntax", str(exc), source=source)],
        ) from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        raise _fail(
            f"{source} holds {kind}, not a spec: a spec is one JSON object.",
            [
                _problem(
                    "not_an_object",
                    f"The document is {kind}; a spec is one JSON object.",
                    source=source,
                    hint='Start the file with { "schema": "coworkenv.environment/v1", … }. '
                    "To import several specs at once, upload a .zip with one .json per spec.",
                )
            ],
        )
    try:
        return spec_canonical(value)
    except ApplicationError as exc:
        problems = [{**p, "file": source} for p in exc.extra.get("problems", [])]
        raise _fail(f"{source}: {exc.message}", problems) from None


def _decode(content: bytes, *, source: str) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(
            f"{source} is not UTF-8 text (byte {exc.start + 1}).",
            [
                _problem(
                    "not_utf8",
                    f"Byte {exc.start + 1} is not valid UTF-8.",
                    source=source,
                    hint="Save the file as UTF-8.",
                )
            ],
        ) from None


def _check_size(size: int, *, source: str) -> None:
    limit = max_upload_bytes()
    if size > limit:
        raise _fail(
            f"{source} is {human_size(size)}; the limit is {human_size(limit)}.",
            [
                _problem(
                    "too_large",
                    f"The file is larger than {human_size(limit)}.",
                    source=source,
                    hint="Split the specs into several smaller uploads.",
                )
            ],
        )


def _zip_documents(content: bytes, *, source: str) -> list[_Document]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError):
        raise _fail(
            f"{source} is not a readable zip archive.",
            [_problem("bad_zip", "Not a readable zip archive.", source=source)],
        ) from None
    with archive:
        members = [
            info
            for info in archive.infolist()
            if not info.is_dir()
            and not info.filename.startswith("__MACOSX/")
            and PurePosixPath(info.filename).name not in _IGNORED_NAMES
        ]
        if not members:
            raise _fail(
                f"{source} contains no .json files.",
                [_problem("empty_zip", "The archive has no .json files.", source=source)],
            )
        if len(members) > MAX_ZIP_MEMBERS:
            raise _fail(
                f"{source} has {len(members)} files; import at most {MAX_ZIP_MEMBERS} at once.",
                [
                    _problem(
                        "too_many_files",
                        f"More than {MAX_ZIP_MEMBERS} files in one archive.",
                        source=source,
                        hint="Split the archive into smaller ones.",
                    )
                ],
            )
        refused = [
            _problem(
                "not_json_file",
                f"{info.filename} is not a .json file.",
                source=f"{source}/{info.filename}",
                hint="An archive may contain only .json specs (folders are fine) and "
                "attachments/<sha256> files.",
            )
            for info in members
            if not info.filename.lower().endswith(".json")
            and not _ATTACHMENT_MEMBER.search(info.filename)
        ]
        if refused:
            names = ", ".join(p["file"].removeprefix(f"{source}/") for p in refused[:5])
            raise _fail(
                f"{source} contains files that are not .json specs: {names}"
                + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
                + ".",
                refused,
            )
        # Sizes from the archive's directory, checked before anything is decompressed.
        per_member, total_limit = max_upload_bytes(), max_unpacked_bytes()
        too_big = [info for info in members if info.file_size > per_member]
        if too_big:
            raise _fail(
                f"{source}/{too_big[0].filename} unpacks to {human_size(too_big[0].file_size)}; "
                f"each spec may be at most {human_size(per_member)}.",
                [
                    _problem("too_large", "The file is too large.", source=f"{source}/{i.filename}")
                    for i in too_big
                ],
            )
        if sum(info.file_size for info in members) > total_limit:
            raise _fail(
                f"{source} unpacks to more than {human_size(total_limit)}; split it into smaller "
                "archives.",
                [_problem("too_large", "The archive unpacks to too much data.", source=source)],
            )
        documents, problems, files = [], [], {}
        for info in members:
            name = f"{source}/{info.filename}"
            attachment = _ATTACHMENT_MEMBER.search(info.filename)
            try:
                data = _read_member(archive, info, limit=per_member, name=name)
                if attachment:
                    files[attachment.group(2)] = data
                    continue
                spec = spec_parse(_decode(data, source=name), source=name)
            except ApplicationError as exc:
                problems.extend(exc.extra.get("problems", []))
                continue
            documents.append(_Document(source=name, spec=spec, files=files))
        if not documents and not problems:
            raise _fail(
                f"{source} contains no .json files.",
                [_problem("empty_zip", "The archive has no .json files.", source=source)],
            )
    if problems:
        bad = sorted({p["file"] for p in problems})
        raise _fail(
            f"Nothing was imported: {len(bad)} of {len(members)} files in {source} "
            f"{'has' if len(bad) == 1 else 'have'} problems ({', '.join(bad[:5])}"
            + (", …" if len(bad) > 5 else "")
            + ").",
            problems,
        )
    return documents


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, limit: int, name: str):
    """Read a member, never more than ``limit`` bytes even if its header lies."""
    try:
        with archive.open(info) as member:
            data = member.read(limit + 1)
    except RuntimeError:  # encrypted
        raise _fail(
            f"{name} is encrypted.",
            [_problem("bad_zip", "The file is encrypted.", source=name)],
        ) from None
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
        raise _fail(
            f"{name} cannot be unpacked: {exc}.",
            [_problem("bad_zip", f"Cannot be unpacked: {exc}.", source=name)],
        ) from None
    if len(data) > limit:
        raise _fail(
            f"{name} unpacks to more than {human_size(limit)}.",
            [_problem("too_large", "The file is too large.", source=name)],
        )
    return data


@transaction.atomic
def _import_documents(*, project, user, documents: Iterable[_Document]) -> list[Environment]:
    """A document that came with files (a zip with ``attachments/``) is imported with them,
    checked; one without is imported as is (its files may be uploaded later, and validation
    reports any that are missing)."""
    return [
        environment_import_with_files(project=project, spec=d.spec, files=d.files, user=user)
        if d.files
        else _import_own(project=project, spec=d.spec, user=user)
        for d in documents
    ]


def _import_own(*, project, spec, user) -> Environment:
    attachments_owned_check(project=project, document=spec)
    return environment_import(project=project, spec=spec, user=user)


def environment_import_upload(*, project, user, filename: str, content: bytes) -> list[Environment]:
    """Import an uploaded ``.json`` spec or ``.zip`` of specs: all of them, or none.

    Raises ApplicationError (message + ``extra["problems"]``, each with ``file``) when any
    document is unreadable or not a schema-valid spec; nothing is saved then.
    """
    source = PurePosixPath(filename.replace("\\", "/")).name or "upload"
    _check_size(len(content), source=source)
    suffix = PurePosixPath(source).suffix.lower()
    if suffix == ".zip" or (suffix != ".json" and content[:4] == b"PK\x03\x04"):
        documents = _zip_documents(content, source=source)
    elif suffix == ".json":
        documents = [_Document(source, spec_parse(_decode(content, source=source), source=source))]
    else:
        raise _fail(
            f"{source}: upload a .json spec or a .zip of .json specs.",
            [_problem("unsupported_file", "Not a .json or .zip file.", source=source)],
        )
    return _import_documents(project=project, user=user, documents=documents)


def environment_import_text(*, project, user, text: str) -> Environment:
    """Import one spec pasted as JSON text; nothing is saved if it has a problem."""
    if not text.strip():
        raise _fail(
            "Paste a spec: the text is empty.",
            [_problem("empty", "The text is empty.", source=PASTED)],
        )
    _check_size(len(text.encode("utf-8")), source=PASTED)
    spec = spec_parse(text, source=PASTED)
    return _import_documents(project=project, user=user, documents=[_Document(PASTED, spec)])[0]


# --- export -----------------------------------------------------------------------------


def environment_spec_filename(environment: Environment) -> str:
    return f"{slugify(environment.name)[:80] or 'environment'}-{environment.pk}.json"


def environment_spec_json(environment: Environment) -> str:
    """The canonical document, indented for people: what ``Export`` downloads."""
    return json.dumps(environment_spec(environment), indent=2, ensure_ascii=False) + "\n"


def environments_export_zip(*, environments: Iterable[Environment]) -> bytes:
    """A zip of the environments' canonical specs, one ``<slug>-<id>.json`` each, and their
    stored attachment files as ``attachments/<sha256>`` (once each), so that the archive
    imports elsewhere with its images.

    Built in memory; callers cap the number of environments (MAX_EXPORT_ENVIRONMENTS).
    """
    buffer = io.BytesIO()
    written: set[str] = set()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for environment in environments:
            archive.writestr(
                environment_spec_filename(environment), environment_spec_json(environment)
            )
            for entry in environment.attachments:
                sha = entry.get("sha256")
                data = attachment_bytes(sha) if sha not in written else None
                if data is not None:
                    written.add(sha)
                    archive.writestr(f"attachments/{sha}", data, zipfile.ZIP_STORED)
    return buffer.getvalue()
