"""The ``human_readable_id`` allocator (``HumanIds``): every entity, relationship, text unit,
community and report gets a small int that never changes once given and is never given to
another key, even after its key disappears.

It is carried in the community job's state and pickled in its checkpoint
(``graph.job.state.JobState``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from graph.errors import GraphError


class HumanIdsError(GraphError):
    """A serialised ``HumanIds`` state that does not decode."""


@dataclass(frozen=True, slots=True)
class HumanIds:
    """Pure allocator of ``human_readable_id``: per kind a counter and the ids given so far.

    ``assign`` returns a new allocator; keys already known keep their id, new keys get the next
    ints in the order given (pass them in a deterministic order, e.g. first seen).
    """

    next_ids: Mapping[str, int]
    assigned: Mapping[str, Mapping[str, int]]

    @classmethod
    def empty(cls) -> HumanIds:
        return cls({}, {})

    def get(self, kind: str, key: str) -> int | None:
        return self.assigned.get(kind, {}).get(key)

    def next_id(self, kind: str) -> int:
        return self.next_ids.get(kind, 0)

    def assign(self, kind: str, keys: Iterable[str]) -> HumanIds:
        known = self.assigned.get(kind, {})
        fresh = [k for k in dict.fromkeys(keys) if k not in known]
        if not fresh:
            return self
        start = self.next_id(kind)
        table = {**known, **{k: start + i for i, k in enumerate(fresh)}}
        return HumanIds({**self.next_ids, kind: start + len(fresh)}, {**self.assigned, kind: table})

    def adopt(self, kind: str, given: Mapping[str, int], beyond: int | None) -> HumanIds:
        """Ids given elsewhere to keys this allocator has not numbered, kept for them, and
        the counter moved past ``beyond`` (the largest id ever given of the kind). Used when
        the graph tables are ahead of the state they were written from (a checkpoint older
        than the last commits): the ids those commits gave stay with their keys, and no
        number they used is given again. Keys numbered here already keep their numbers."""
        known = self.assigned.get(kind, {})
        fresh = {k: n for k, n in given.items() if k not in known}
        floor = max([self.next_id(kind), *((beyond + 1,) if beyond is not None else ())])
        floor = max([floor, *(n + 1 for n in fresh.values())])
        if not fresh and floor == self.next_id(kind):
            return self
        assigned = {**self.assigned, kind: {**known, **fresh}} if fresh else self.assigned
        return HumanIds({**self.next_ids, kind: floor}, assigned)

    def to_dict(self) -> dict[str, object]:
        """JSON-able form (orjson) for the job's state."""
        return {
            "next_ids": dict(sorted(self.next_ids.items())),
            "assigned": {k: dict(v) for k, v in sorted(self.assigned.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> HumanIds:
        try:
            next_ids = {str(k): int(v) for k, v in data["next_ids"].items()}  # type: ignore[attr-defined]
            assigned = {
                str(kind): {str(key): int(n) for key, n in table.items()}
                for kind, table in data["assigned"].items()  # type: ignore[attr-defined]
            }
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise HumanIdsError(f"malformed human-id state: {e!r}") from e
        for kind, table in assigned.items():
            if table and max(table.values()) >= next_ids.get(kind, 0):
                raise HumanIdsError(f"counter of {kind!r} is behind the ids it gave")
        return cls(next_ids, assigned)
