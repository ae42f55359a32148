"""Reading a Claw-Eval upload: a zip, a (compressed) tarball or one task file, read into
memory within limits (members, sizes, depth; never extracted), into ``TaskDirectory``s.
YAML is parsed safely without aliases; ``claw_eval_import`` makes documents of them."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

from apps.core.safeinput import MAX_JSON_DEPTH

Reader = Callable[[object], bytes]


MAX_MEMBERS = 5000


MAX_TASKS = 50


MAX_GRADER_CHARS = 20_000


_WANTED = re.compile(r"(^|/)(task\.yaml|grader\.py|coworkenv_task\.json|fixtures/.+\.json)$")


class ImportProblem(Exception):
    """A task directory that cannot be imported: ``message`` says which file and why."""

    def __init__(self, message: str, file: str = ""):
        super().__init__(message)
        self.message = message
        self.file = file


@dataclass
class TaskDirectory:
    name: str  # the directory, for messages
    files: dict[str, bytes] = field(default_factory=dict)  # path inside the directory → bytes


def read_archive(
    content: bytes, *, source: str, member_limit: int, total_limit: int
) -> list[TaskDirectory]:
    """The task directories of a .zip or .tar(.gz) archive, read into memory within limits.

    Refuses (ImportProblem) absolute paths, ``..``, links and devices, and any member or total
    over its limit — before reading that member."""
    if content[:4] == b"PK\x03\x04":
        entries, read = _zip_entries(content, source=source, member_limit=member_limit)
    else:
        content = _decompressed(content, source=source, limit=total_limit)
        entries, read = _tar_entries(content, source=source, member_limit=member_limit)
    wanted = _wanted_members(
        entries, source=source, member_limit=member_limit, total_limit=total_limit
    )
    roots = sorted({p.rsplit("/", 1)[0] if "/" in p else "" for p, _ in wanted if _is_yaml(p)})
    directories: dict[str, TaskDirectory] = {}
    for path, handle in wanted:
        root = _root_of(path, roots)
        if root is None:
            continue
        data = read(handle)
        if len(data) > member_limit:
            raise ImportProblem(f"{source}: {path} is larger than {member_limit} bytes.", source)
        directory = directories.setdefault(root, TaskDirectory(root or source))
        directory.files[path[len(root) + 1 :] if root else path] = data
    if not directories:
        raise ImportProblem(f"{source} holds no task directory (no task.yaml).", source)
    if len(directories) > MAX_TASKS:
        raise ImportProblem(
            f"{source} holds {len(directories)} tasks; import at most {MAX_TASKS} at once.", source
        )
    return [directories[r] for r in sorted(directories)]


def _zip_entries(
    content: bytes, *, source: str, member_limit: int
) -> tuple[list[tuple[str, int, object]], Reader]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, ValueError):
        raise ImportProblem(f"{source} is not a readable archive.", source) from None
    infos = [i for i in archive.infolist() if not i.is_dir()]
    _check_count(len(infos), source)

    def read(handle):
        with archive.open(handle) as member:
            return member.read(member_limit + 1)

    return [(info.filename, info.file_size, info) for info in infos], read


def _tar_entries(
    content: bytes, *, source: str, member_limit: int
) -> tuple[list[tuple[str, int, object]], Reader]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(content), mode="r:")  # noqa: SIM115
        members = archive.getmembers()
    except (tarfile.TarError, EOFError, OSError):
        raise ImportProblem(
            f"{source} is not a readable archive (.zip, .tar or .tar.gz).", source
        ) from None
    _check_count(len(members), source)
    entries = []
    for member in members:
        if member.isdir():
            continue
        if not member.isfile():
            raise ImportProblem(
                f"{source}: {member.name} is a link or special file; the archive may hold "
                "only regular files.",
                source,
            )
        entries.append((member.name, member.size, member))

    def read(handle):
        extracted = archive.extractfile(handle)
        return extracted.read(member_limit + 1) if extracted else b""

    return entries, read


def _wanted_members(
    entries: list[tuple[str, int, object]], *, source: str, member_limit: int, total_limit: int
) -> list[tuple[str, object]]:
    """The members an import reads, their paths checked and their sizes within the limits."""
    total = 0
    wanted = []
    for name, size, handle in entries:
        path = _safe_path(name, source)
        if not _WANTED.search(path):
            continue
        if size > member_limit:
            raise ImportProblem(f"{source}: {path} is larger than {member_limit} bytes.", source)
        total += size
        if total > total_limit:
            raise ImportProblem(f"{source} unpacks to more than {total_limit} bytes.", source)
        wanted.append((path, handle))
    return wanted


_COMPRESSED = ((b"\x1f\x8b", gzip.GzipFile), (b"BZh", bz2.BZ2File), (b"\xfd7zXZ", lzma.LZMAFile))


def _decompressed(content: bytes, *, source: str, limit: int) -> bytes:
    """A compressed tarball's bytes, decompressed never past ``limit`` (a bomb stops there)."""
    for magic, opener in _COMPRESSED:
        if content.startswith(magic):
            try:
                with (
                    opener(fileobj=io.BytesIO(content))
                    if opener is gzip.GzipFile
                    else opener(io.BytesIO(content)) as stream
                ):
                    data = stream.read(limit + 1)
            except (OSError, EOFError, lzma.LZMAError, ValueError):
                raise ImportProblem(
                    f"{source} is not a readable archive (.zip, .tar or .tar.gz).", source
                ) from None
            if len(data) > limit:
                raise ImportProblem(f"{source} unpacks to more than {limit} bytes.", source)
            return data
    return content


def _is_yaml(path: str) -> bool:
    return path == "task.yaml" or path.endswith("/task.yaml")


def _root_of(path: str, roots: list[str]) -> str | None:
    best = None
    for root in roots:
        inside = root == "" or path.startswith(root + "/")
        if inside and (best is None or len(root) > len(best)):
            best = root
    return best


def _check_count(n: int, source: str) -> None:
    if n > MAX_MEMBERS:
        raise ImportProblem(f"{source} has {n} files; the limit is {MAX_MEMBERS}.", source)


def _safe_path(name: str, source: str) -> str:
    path = name.replace("\\", "/")
    parts = PurePosixPath(path).parts
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or ".." in parts:
        raise ImportProblem(
            f"{source}: the member {name!r} points outside the archive (absolute path or '..'); "
            "nothing was imported.",
            source,
        )
    return "/".join(p for p in parts if p not in ("", "."))


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors/aliases (an alias bomb expands without bound), nested no
    deeper than ``MAX_JSON_DEPTH`` (PyYAML composes and constructs recursively: a few thousand
    ``[`` would exhaust Python's stack, a RecursionError instead of a YAML error)."""

    _depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases are not accepted", event.start_mark
            )
        if self._depth >= MAX_JSON_DEPTH:
            mark = self.peek_event().start_mark
            problem = f"it nests deeper than {MAX_JSON_DEPTH} levels"
            raise yaml.composer.ComposerError(None, None, problem, mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_yaml(data: bytes, *, source: str) -> dict:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"{source} is not UTF-8 text (byte {exc.start + 1}).", source) from None
    try:
        value = yaml.load(text, Loader=_NoAliasLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ImportProblem(f"{source} is not valid YAML{where}: {problem}.", source) from None
    if not isinstance(value, dict):
        raise ImportProblem(f"{source} must be a YAML mapping (task_id, prompt, tools, …).", source)
    for required in ("task_id", "prompt"):
        if required not in value:
            raise ImportProblem(f"{source} has no {required!r}.", source)
    prompt = value["prompt"]
    if not isinstance(prompt, dict) or not isinstance(prompt.get("text"), str):
        raise ImportProblem(f"{source}: prompt.text must be text.", source)
    for key in ("tools", "tool_endpoints", "services", "scoring_components", "safety_checks"):
        if not isinstance(value.get(key) or [], list):
            raise ImportProblem(f"{source}: {key} must be a list.", source)
    return value
