"""Near-duplicate detection by shingled text similarity (pure Python, no Django).

An environment's *text* is what a person would recognise as its content: the user requests
of every task and the string values of every record (environment-level and task-level).
It is lower-cased, split into words, and cut into overlapping word 5-grams (shingles). Each
shingle is hashed once (blake2b, 52 bits) and the ``SKETCH_SIZE`` smallest hashes are the
environment's *bottom-k MinHash sketch*. The Jaccard similarity of two shingle sets is
estimated from two sketches alone: among the k smallest hashes of their union, the share
present in both. Comparing a new environment with a project's N stored sketches is
O(N·k), and no spec is read again.
"""

import hashlib
import heapq
import re
from collections.abc import Iterable, Iterator

SHINGLE_WORDS = 5
SKETCH_SIZE = 128
HASH_BITS = 52  # exact in a JSON number anywhere (JavaScript included)
DUPLICATE_THRESHOLD = 0.7

_WORD = re.compile(r"\w+", re.UNICODE)


def spec_text(document: dict) -> Iterator[str]:
    """The text of an environment: task requests, then record strings, in document order."""
    for task in document.get("tasks") or []:
        if not isinstance(task, dict):
            continue
        for turn in task.get("turns") or []:
            if isinstance(turn, dict) and isinstance(turn.get("message"), str):
                yield turn["message"]
        yield from _record_strings(task.get("records") or {})
    yield from _record_strings(document.get("services") or {})


def _record_strings(services) -> Iterator[str]:
    if not isinstance(services, dict):
        return
    for collections in services.values():
        if not isinstance(collections, dict):
            continue
        for records in collections.values():
            for record in records if isinstance(records, list) else []:
                yield from _strings(record, skip_id=True)


def _strings(value, *, skip_id: bool = False) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if not (skip_id and key == "id"):
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def shingles(texts: Iterable[str], size: int = SHINGLE_WORDS) -> set[str]:
    """Word ``size``-grams of each text (a shorter text is one shingle of its own)."""
    result: set[str] = set()
    for text in texts:
        words = _WORD.findall(text.lower())
        if not words:
            continue
        if len(words) <= size:
            result.add(" ".join(words))
            continue
        for i in range(len(words) - size + 1):
            result.add(" ".join(words[i : i + size]))
    return result


def _hash(shingle: str) -> int:
    digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - HASH_BITS)


def sketch(shingle_set: Iterable[str], k: int = SKETCH_SIZE) -> list[int]:
    """The k smallest distinct shingle hashes, ascending."""
    return heapq.nsmallest(k, {_hash(s) for s in shingle_set})


def document_sketch(document: dict) -> tuple[list[int], int]:
    """(sketch, number of shingles) of a spec document."""
    shingle_set = shingles(spec_text(document))
    return sketch(shingle_set), len(shingle_set)


def similarity(a: list[int], b: list[int], k: int = SKETCH_SIZE) -> float:
    """Estimated Jaccard similarity of the two shingle sets behind two bottom-k sketches."""
    if not a or not b:
        return 0.0
    set_a, set_b = set(a), set(b)
    union = heapq.nsmallest(k, set_a | set_b)
    both = sum(1 for h in union if h in set_a and h in set_b)
    return both / len(union)


def most_similar(
    target: list[int], candidates: Iterable[tuple[int, list[int]]]
) -> tuple[int | None, float]:
    """(key, similarity) of the candidate most similar to ``target``; (None, 0.0) if none."""
    best_key, best = None, 0.0
    for key, other in candidates:
        value = similarity(target, other)
        if value > best:
            best_key, best = key, value
    return best_key, best
