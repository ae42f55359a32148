"""Shared prefixes between episodes of one task: what was executed once is not executed again.

An episode is a pure function of what happened to it — the turns advanced and the tool
calls made, in order (faults are seeded by seed, sequence number and tool, the clock moves
per call). Validation runs many policies on one task that begin alike: the adversaries read
the same records before they part, a mutant is the oracle until its dropped call, the null
and echo agents only advance turns. ``Replays`` is a trie of those events; each node keeps a
checkpoint of the episode after it (the copy-on-write state makes that a dict copy, not a
copy of the records) and what the calls returned. A run given a ``Replays`` follows the
trie while its events match one recorded before, executing nothing, and restores the
checkpoint where it parts from every earlier run, then goes on live, recording.

Events match only when they are the same to the simulator: a call's tool name and its
arguments of the same JSON types (``1`` is not ``1.0`` nor ``True``; a tuple is not a list).
A node also keeps the state view of its checkpoint, one object for every run that passes
through it, so that a grader checking that state is evaluated once (``checks``' memo).

One ``Replays`` serves runs with the same seed, faults setting and limits (its key); a run
with other settings does not use it. Determinism checks must not share one: two replays
compared must each be executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .simulator import Episode, ToolResult, UserTurn
from .state import Collection

Key = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    cols: dict[tuple[str, str], Collection]
    size_bytes: int
    audit_log: tuple[Any, ...]
    exogenous_log: tuple[dict[str, Any], ...]
    turn_index: int
    clock: int
    ids: dict[tuple[str, str], int]
    executed: int


def checkpoint(episode: Episode) -> Checkpoint:
    """The episode as it is now. Its collections are shared, so the episode copies any it
    writes from here on (as after a state view)."""
    world = episode._world
    world._owned.clear()
    return Checkpoint(
        dict(world._cols),
        world.size_bytes,
        tuple(episode.audit_log),
        tuple(episode.exogenous_log),
        episode.turn_index,
        episode._clock,
        dict(episode._counters.ids),
        episode._executed,
    )


def restore(episode: Episode, cp: Checkpoint) -> None:
    """Put ``episode`` (of the same task, seed, faults and limits) back at ``cp``."""
    world = episode._world
    world._cols = dict(cp.cols)
    world._owned = set()
    world.size_bytes = cp.size_bytes
    episode.audit_log = list(cp.audit_log)
    episode.exogenous_log = list(cp.exogenous_log)
    episode.turn_index = cp.turn_index
    episode._clock = cp.clock
    episode._counters.ids = dict(cp.ids)
    episode._executed = cp.executed


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same value with the same Python types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


class _Node:
    __slots__ = ("arguments", "checkpoint", "children", "outcome", "view")

    def __init__(self, cp: Checkpoint | None, outcome: Any = None, arguments: Any = None):
        self.checkpoint = cp
        self.outcome = outcome
        self.arguments = arguments
        self.children: dict[Key, _Node] = {}
        self.view: dict[str, Any] | None = None


class Replays:
    """The trie of one task's episodes with one seed, faults setting and limits."""

    def __init__(self, max_nodes: int = 20_000) -> None:
        self.root = _Node(None)
        self.key: Key | None = None
        self.nodes = 0
        self.max_nodes = max_nodes
        self.executed = 0  # calls run live
        self.replayed = 0  # calls taken from the trie
        # one view object per distinct set of collections (the lists it holds kept alive)
        self.views: dict[tuple[int, ...], dict[str, Any]] = {}
        # state checks on those views (checks.CheckView.state_memo)
        self.state_memo: dict[tuple[int, int], tuple[Any, ...]] = {}

    def cursor(self, episode: Episode) -> Cursor | None:
        """A cursor for a fresh ``episode``; None when the trie holds another seed, faults
        setting or limits than the episode's (the run then goes on without it)."""
        key = (episode.task.key, episode.seed, episode.faults, episode.limits)
        if self.key is None:
            self.key = key
        if self.key != key or episode.turn_index != -1 or episode.audit_log:
            return None
        return Cursor(self, episode)


class Cursor:
    """Where one run stands in the trie. ``synced`` says whether the episode object is at
    the cursor's node (it lags behind while the run follows recorded events)."""

    def __init__(self, trie: Replays, episode: Episode):
        self.trie = trie
        self.episode = episode
        self.node: _Node | None = trie.root  # None: off the trie (it was full)
        self.synced = True

    def _sync(self) -> None:
        if not self.synced:
            restore(self.episode, self.node.checkpoint)
            self.synced = True

    def _record(self, key: Key, outcome: Any, arguments: Any = None) -> None:
        if self.node is None:
            return
        if self.trie.nodes >= self.trie.max_nodes:  # full: stop sharing, run on alone
            self.node = None
            return
        child = _Node(checkpoint(self.episode), outcome, arguments)
        self.node.children[key] = child
        self.trie.nodes += 1
        self.node = child

    def advance_turn(self) -> UserTurn | None:
        child = None if self.node is None else self.node.children.get(("turn",))
        if child is not None:
            self.node, self.synced = child, False
            return child.outcome
        self._sync()
        turn = self.episode.advance_turn()
        self._record(("turn",), turn)
        return turn

    def calls(self, batch: list[tuple[str, Any, str, str | None]]) -> list[ToolResult]:
        """Execute (tool name, arguments, their text, their JSON for the simulator or None)
        in order, or take what they returned before (as fresh ToolResults)."""
        key = ("calls", tuple((name, text) for name, _, text, _ in batch))
        arguments = [args for _, args, _, _ in batch]
        child = None if self.node is None else self.node.children.get(key)
        if child is not None and same_json(child.arguments, arguments):
            self.node, self.synced = child, False
            self.trie.replayed += len(batch)
            return [
                ToolResult(r.ok, r._text, r.error_code, r.error_message, r.images)
                for r in child.outcome
            ]
        self._sync()
        out = [self.episode.call(name, args, text=exact) for name, args, _, exact in batch]
        self.trie.executed += len(batch)
        if child is None:
            self._record(key, out, arguments)
        else:  # the same text, other types: on alone from here
            self.node = None
        return out

    def state(self) -> dict[str, Any]:
        """The state view at the cursor: one object per node, shared by its runs."""
        if self.node is None or self.node.checkpoint is None:  # the root, or off the trie
            self._sync()
            return self.episode.state
        if self.node.view is None:
            self._sync()
            view = self.episode.state
            key = tuple(id(records) for service in view.values() for records in service.values())
            self.node.view = self.trie.views.setdefault(key, view)
        return self.node.view

    def finish(self) -> Episode:
        """The episode, brought to where the run ended."""
        self._sync()
        return self.episode
