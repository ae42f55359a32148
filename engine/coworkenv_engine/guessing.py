"""How the greedy adversaries guess argument values: from the user's messages and the
records read, matched to a parameter by its name, type, format and enum, and by the shape of
the values the records hold (``adversary_greedy`` uses it; it knows nothing of the reference
solution or the graders)."""

from __future__ import annotations

import re
from collections import Counter
from functools import cached_property, lru_cache
from typing import Any

from .sightings import EMAIL_PATTERN, Seen, paste_text

SUBJECT_PARAMS = ("subject", "title", "summary", "name")
TEXT_PARAMS = ("body", "content", "text", "message", "comment", "note", "description", "reply")

_NUMBER = re.compile(r"(?<![\w.-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.-])\d+(?:\.\d+)?")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_TIME = re.compile(r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d)?Z$")
_TAG = re.compile(r"\[[^\[\]\n]{1,24}\]")
_QUOTED = re.compile(r"['\"\u2018\u201c]([^'\"\u2019\u201d\n]{2,80})['\"\u2019\u201d]")


# --------------------------------------------------------------------------- value guessing


# Not preceded by a word character, @, . or -: the check of the original shape's leading
# ``(?<![\w@.-])``, written after the first character it guards (two characters back: the
# one before the match, then the match's first) so that re can scan for that character
# instead of trying the look-behind at every position — the same matches, several times
# faster on a long pasted text.
_NOT_AFTER_WORD = r"(?<![\w@.-][\s\S])"


@lru_cache(maxsize=8192)
def _shape(value: str) -> re.Pattern[str] | None:
    r"""A regex for strings shaped like ``value``: letter case runs, digit runs, the rest;
    the same matches as ``(?<![\w@.-])`` + the runs' pattern + ``(?![\w@-])``."""
    if not value or len(value) > 40 or "\n" in value:
        return None
    body, parts = [], []  # each run's pattern, and it split as (first character, rest)
    for run in re.findall(r"[A-Z]+|[a-z]+|\d+|\s+|.", value):
        if run.isdigit():
            body.append(r"\d+")
            parts.append((r"\d", r"\d*"))
        elif run.isupper() and run.isalpha():
            body.append(re.escape(run) if len(run) > 1 else "[A-Z]")
            parts.append((re.escape(run[0]), re.escape(run[1:])) if len(run) > 1 else ("[A-Z]", ""))
        elif run.islower() and run.isalpha():
            body.append("[a-z]+")
            parts.append(("[a-z]", "[a-z]*"))
        elif run.isspace():
            body.append(r"\s")
            parts.append((r"\s", ""))
        else:
            body.append(re.escape(run))
            parts.append((re.escape(run[0]), re.escape(run[1:])))
    if "".join(body) in ("[a-z]+", r"\d+"):
        return None  # too loose: any word or number
    (first, rest), *others = parts
    tail = "".join(f + r for f, r in others)
    return re.compile(f"{first}{_NOT_AFTER_WORD}{rest}{tail}(?![\\w@-])")


def _number(text: str) -> int | float:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value


@lru_cache(maxsize=16384)
def _stems(text: str, pattern: str) -> frozenset[str]:
    """The five-letter stems of the words of ``text`` that ``pattern`` finds (casefolded)."""
    return frozenset(w[:5] for w in re.findall(pattern, text.casefold()))


@lru_cache(maxsize=64)
def _findall(pattern: re.Pattern[str], text: str) -> tuple[str, ...]:
    return tuple(pattern.findall(text))


@lru_cache(maxsize=16384)
def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text.casefold()))


class Guesser:
    """What one agent can guess, from one conversation. Everything it derives from the
    conversation is computed once per Guesser (the conversation does not change under it)."""

    def __init__(self, seen: Seen, *, paste: bool):
        self.seen = seen
        self.paste = paste
        self.latest = seen.user_text[-1] if seen.user_text else ""
        # the latest message first: on a multi-turn task it is the one being answered
        self.texts = [self.latest, *reversed(seen.user_text[:-1])]
        self.user = "\n".join(self.texts)
        self._matches: dict[re.Pattern[str], list[str]] = {}
        self._pointed_matches: dict[re.Pattern[str], list[str]] = {}

    @cached_property
    def read_text(self) -> str:
        return "\n".join(self.seen.record_scalars())

    @cached_property
    def pointed_text(self) -> str:
        stems = _stems(self.user, r"\w{4,}")
        return "\n".join(
            s for s in self.seen.record_scalars() if len(s) > 40 and stems & _stems(s, r"\w{4,}")
        )

    def _pointed(self, shape: re.Pattern[str]) -> list[str]:
        """``shape.findall(self.pointed_text)``, once per shape (and across guessers: the
        adversaries that read alike see the same text)."""
        found = self._pointed_matches.get(shape)
        if found is None:
            found = self._pointed_matches[shape] = list(_findall(shape, self.pointed_text))
        return found

    @cached_property
    def user_words(self) -> frozenset[str]:
        return _words(self.user)

    def _in_user(self, pattern: re.Pattern[str]) -> list[str]:
        """Matches in the user's messages, latest first; a match that opens a sentence
        (a capitalised verb, most likely) after the others."""
        found = self._matches.get(pattern)
        if found is None:
            inner, opening = [], []
            for text in self.texts:
                for m in pattern.finditer(text):
                    before = text[: m.start()].rstrip()
                    (opening if not before or before[-1] in ".!?:" else inner).append(m.group(0))
            found = self._matches[pattern] = list(dict.fromkeys(inner + opening))
        return list(found)

    def numbers(self, examples: list[Any]) -> list[int | float]:
        found = [_number(n) for n in self._in_user(_NUMBER)]
        found = [n for n in found if not 1900 <= n <= 2100 or not examples]
        if examples:
            ref = sorted(abs(e) for e in examples)[len(examples) // 2] or 1
            found.sort(key=lambda n: abs(len(str(int(abs(n) or 1))) - len(str(int(ref)))))
        return list(dict.fromkeys(found))

    def stamps(self, examples: list[Any]) -> list[str]:
        dates = self._in_user(_DATE)
        times = self._in_user(_TIME)
        out = [f"{d}T{t.zfill(5)}:00Z" for d in dates for t in times] + [
            f"{d}T09:00:00Z" for d in dates
        ]
        out += [e for e in examples if isinstance(e, str) and _STAMP.match(e)]
        return list(dict.fromkeys(out))

    def strings(self, name: str, examples: list[Any], limit: int | None = None) -> list[str]:
        """The candidates, best first. With ``limit``, only the first ``limit`` are exact
        (the caller keeps no more): the records the user points at are not searched when
        enough candidates come before them."""
        key = name.casefold()
        emails = self._in_user(EMAIL_PATTERN)
        if "@" in "".join(str(e) for e in examples) or key in ("to", "email", "recipient"):
            return emails + [e for e in examples if isinstance(e, str) and "@" in e][:1]
        if key in TEXT_PARAMS:
            return [self.free_text()]
        out: list[str] = []
        words = self.user_words
        strs = [e for e in examples if isinstance(e, str)]
        for e in strs:  # values the records hold that the user mentioned
            if e and _words(e) <= words:
                out.append(e)
        stems = {w[:5] for w in words}
        overlaps = {e: len(_stems(e, r"[a-z]{3,}") & stems) for e in dict.fromkeys(strs)}
        counts = Counter(strs)
        ranked = sorted(overlaps, key=lambda e: (-overlaps[e], -counts[e]))
        if len(counts) <= max(3, len(strs) // 3):  # a category: pick among its values
            return list(dict.fromkeys(out + ranked))
        shapes = {s.pattern: s for e in strs if (s := _shape(e))}
        for shape in shapes.values():
            out.extend(self._in_user(shape))
        out += [e for e in ranked if overlaps[e]]
        if limit is None or len(dict.fromkeys(out)) < limit:
            for shape in shapes.values():  # then what the records the user points at say
                out.extend(m for m in self._pointed(shape) if m not in counts)
        if key in SUBJECT_PARAMS:
            out.append(self.subject())
        dates = self._in_user(_DATE)
        if any(isinstance(e, str) and _DATE.fullmatch(e) for e in examples):
            out = dates + out
        if not out:
            out = [e for e in examples if isinstance(e, str)][:1] or [self.subject()]
        return list(dict.fromkeys(out))

    def tags(self) -> list[str]:
        return list(self._tags)

    @cached_property
    def _tags(self) -> list[str]:
        return list(dict.fromkeys(_TAG.findall(self.read_text) + _TAG.findall(self.user)))

    def subject(self) -> str:
        return self._subject

    @cached_property
    def _subject(self) -> str:
        tags = self._tags
        head = self.latest.split("\n")[0][:120]
        return f"{tags[0]} {head}" if tags else head

    def free_text(self) -> str:
        return self._free_text

    @cached_property
    def _free_text(self) -> str:
        quoted = " ".join(self._in_user(_QUOTED))
        text = " ".join(t for t in (self.subject(), self.latest, quoted) if t)
        return text + ("\n" + paste_text(self.seen) if self.paste else "")

    def values(
        self, name: str, schema: dict[str, Any], examples: list[Any], limit: int | None = None
    ) -> list[Any]:
        """The few values worth trying for one parameter or field, best first (with
        ``limit``, the first ``limit`` of them are exact: see ``strings``)."""
        kind = schema.get("type")
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            text = self.user.casefold()
            named = [o for o in schema["enum"] if isinstance(o, str) and o.casefold() in text]
            return (named or [e for e in examples if e in schema["enum"]] or schema["enum"])[:2]
        if kind == "boolean" or (examples and all(isinstance(e, bool) for e in examples)):
            return [True, False]
        if kind in ("integer", "number") or (
            examples and all(isinstance(e, int | float) for e in examples)
        ):
            found = self.numbers([e for e in examples if isinstance(e, int | float)]) or [1]
            lo, hi = schema.get("minimum"), schema.get("maximum")
            found = [n for n in found if (lo is None or n >= lo) and (hi is None or n <= hi)]
            return found or [lo if lo is not None else 1]
        if kind == "array":
            emails = self._in_user(EMAIL_PATTERN)
            return [emails[:5]] if emails else [[self.subject()]]
        if schema.get("format") == "date-time" or any(
            isinstance(e, str) and _STAMP.match(e) for e in examples
        ):
            return self.stamps(examples) or ["2026-03-02T09:00:00Z"]
        return self.strings(name, examples, limit)
