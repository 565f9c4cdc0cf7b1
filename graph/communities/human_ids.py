"""The ``human_readable_id`` allocator (``HumanIds``): every entity, relationship, text unit,
community and report gets a small int that never changes once given and is never given to
another key, even after its key disappears.

It is carried in the community job's state (``graph.job.state.JobState``), which keeps each
kind's table on disk (``agents.community.state``): at 100,000 articles the tables hold about
a million keys, so a table that is not a plain dict is updated in place, not copied for the
few keys a run numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass

from graph.errors import GraphError
from graph.protocols import values_at


class HumanIdsError(GraphError):
    """A serialised ``HumanIds`` state that does not decode."""


@dataclass(frozen=True, slots=True)
class HumanIds:
    """Pure allocator of ``human_readable_id``: per kind a counter and the ids given so far.

    ``assign`` returns a new allocator; keys already known keep their id, new keys get the next
    ints in the order given (pass them in a deterministic order, e.g. first seen). A kind's
    table that is not a dict (a table on disk) is shared with the allocator ``assign`` returns
    and takes the new keys in place: ids never change once given, so a reader of the old
    allocator only sees keys it did not know yet.
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
        wanted = list(dict.fromkeys(keys))
        held = values_at(self.assigned.get(kind, {}), wanted)
        fresh = [k for k in wanted if k not in held]
        if not fresh:
            return self
        start = self.next_id(kind)
        given = {k: start + i for i, k in enumerate(fresh)}
        return self.given(kind, given, start + len(fresh))

    def given(self, kind: str, given: Mapping[str, int], next_id: int) -> HumanIds:
        """This allocator with ``given`` ids added to ``kind``'s table (in place when it is on
        disk) and its counter at ``next_id``."""
        known = self.assigned.get(kind)
        if known is not None and not isinstance(known, dict) and isinstance(known, MutableMapping):
            known.update(given)
            table: Mapping[str, int] = known
        else:
            table = {**(known or {}), **given}
        return HumanIds({**self.next_ids, kind: next_id}, {**self.assigned, kind: table})

    def adopt(self, kind: str, given: Mapping[str, int], beyond: int | None) -> HumanIds:
        """Ids given elsewhere to keys this allocator has not numbered, kept for them, and
        the counter moved past ``beyond`` (the largest id ever given of the kind). Used when
        the graph tables are ahead of the state they were written from (a checkpoint older
        than the last commits): the ids those commits gave stay with their keys, and no
        number they used is given again. Keys numbered here already keep their numbers."""
        held = values_at(self.assigned.get(kind, {}), given)
        fresh = {k: n for k, n in given.items() if k not in held}
        floor = max([self.next_id(kind), *((beyond + 1,) if beyond is not None else ())])
        floor = max([floor, *(n + 1 for n in fresh.values())])
        if not fresh and floor == self.next_id(kind):
            return self
        return self.given(kind, fresh, floor)

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
