"""Builders and protocol fakes shared by the query unit tests (no tests of its own).

The world: two storylines in March 1987. OPEC (community 1, level 0) with children 3
(OPEC, Saudi Arabia) and 4 (oil prices, Kuwait); the Federal Reserve (community 2, level 0)
with one child 5 (Federal Reserve, Paul Volcker, interest rates). OPEC news is early in the
month, Fed news late; the newest document is 1987-03-31.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graph.keys import entity_key
from graph.protocols import ChatResult, VectorHit
from graph.versions.model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)
from offline.embedding import HashingEmbedder
from prompts import PromptLibrary
from query.deps import QueryDeps
from query.index import QueryIndex

# ---- fakes ----------------------------------------------------------------------------------


@dataclass
class Call:
    purpose: str
    messages: list[dict[str, str]]
    json_mode: bool

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "system"), "")

    @property
    def user(self) -> str:
        return [m["content"] for m in self.messages if m["role"] == "user"][-1]


@dataclass
class ScriptedLLM:
    """Answers each call with ``reply(call)``; records every call."""

    reply: Callable[[Call], str]
    calls: list[Call] = field(default_factory=list)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        call = Call(purpose, list(messages), json_mode)
        self.calls.append(call)
        return ChatResult(self.reply(call), prompt_tokens=10, completion_tokens=5)

    def purposes(self) -> list[str]:
        return [c.purpose for c in self.calls]

    async def forget(self, messages: Sequence[dict[str, str]], **kw: Any) -> bool:
        return False

    async def aclose(self) -> None:
        return None


def fixed(text: str) -> ScriptedLLM:
    return ScriptedLLM(lambda _call: text)


class DictVectorStore:
    """graph.protocols.VectorStore over dicts, exact cosine distance."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = {}

    async def upsert(
        self, kind: str, items: Sequence[tuple[str, list[float], dict[str, Any]]]
    ) -> None:
        for key, vector, props in items:
            self.items.setdefault(kind, {})[key] = (vector, props)

    async def delete(self, kind: str, keys: Sequence[str]) -> None:
        for key in keys:
            self.items.get(kind, {}).pop(key, None)

    async def search(
        self,
        kind: str,
        vector: list[float],
        limit: int,
        filters: dict[str, Any] | None = None,
        *,
        text: str | None = None,
    ) -> list[VectorHit]:
        hits = [
            VectorHit(key, 1.0 - _cosine(vector, v), dict(props))
            for key, (v, props) in self.items.get(kind, {}).items()
        ]
        return sorted(hits, key=lambda h: (h.distance, h.key))[:limit]


def _cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(sum(x * x for x in a)) or 1.0
    nb = math.sqrt(sum(x * x for x in b)) or 1.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def words(text: str) -> int:
    """Token counter for tests: whitespace-separated words."""
    return len(text.split())


# ---- builders -------------------------------------------------------------------------------


def ent(
    hrid: int, title: str, desc: str, units: Sequence[str], degree: int = 1, **kw: Any
) -> SnapshotEntity:
    return SnapshotEntity(
        id=entity_key(title),
        human_readable_id=hrid,
        title=title,
        type=kw.pop("type", "organization"),
        description=desc,
        text_unit_ids=tuple(units),
        frequency=len(units),
        degree=degree,
        **kw,
    )


def rel(
    hrid: int, a: SnapshotEntity, b: SnapshotEntity, desc: str, cdeg: int, units: Sequence[str]
) -> SnapshotRelationship:
    return SnapshotRelationship(
        id=f"{a.id}|{b.id}",
        human_readable_id=hrid,
        source=a.title,
        target=b.title,
        description=desc,
        weight=float(len(units)),
        combined_degree=cdeg,
        text_unit_ids=tuple(units),
        source_id=a.id,
        target_id=b.id,
    )


def unit(
    hrid: int, text: str, day: str, entities: Sequence[SnapshotEntity], doc: str = ""
) -> SnapshotTextUnit:
    return SnapshotTextUnit(
        id=f"chunk-{hrid}",
        human_readable_id=hrid,
        text=text,
        n_tokens=len(text.split()),
        document_id=doc or f"doc-{hrid}",
        entity_ids=tuple(e.id for e in entities),
        relationship_ids=(),
        covariate_ids=(),
        published_at=f"{day}T12:00:00Z",
        title=f"Article {hrid}",
    )


def comm(
    number: int,
    level: int,
    members: Sequence[SnapshotEntity],
    parent: int = -1,
    children: Sequence[int] = (),
) -> SnapshotCommunity:
    return SnapshotCommunity(
        id=f"c-{number}",
        human_readable_id=number,
        community=number,
        level=level,
        parent=parent,
        children=tuple(children),
        title=f"Community {number}",
        entity_ids=tuple(e.id for e in members),
        relationship_ids=(),
        text_unit_ids=(),
        period="1987-03-31",
        size=len(members),
    )


def report(c: SnapshotCommunity, title: str, summary: str, rank: float = 5.0) -> SnapshotReport:
    return SnapshotReport(
        id=c.id,
        human_readable_id=c.community,
        community=c.community,
        level=c.level,
        parent=c.parent,
        children=c.children,
        title=title,
        summary=summary,
        full_content=f"# {title}\n\n{summary}",
        rank=rank,
        rating_explanation="",
        findings=(),
        full_content_json="{}",
        period=c.period,
        size=c.size,
    )


def claim(hrid: int, subject: SnapshotEntity, desc: str, unit_id: str) -> SnapshotClaim:
    return SnapshotClaim(
        id=f"claim-{hrid}",
        human_readable_id=hrid,
        covariate_type="claim",
        type="price agreement",
        description=desc,
        subject_id=subject.title,
        object_id=None,
        status="TRUE",
        start_date=None,
        end_date=None,
        source_text=desc,
        text_unit_id=unit_id,
    )


def snapshot(
    entities: Sequence[SnapshotEntity],
    relationships: Sequence[SnapshotRelationship] = (),
    units: Sequence[SnapshotTextUnit] = (),
    communities: Sequence[SnapshotCommunity] = (),
    reports: Sequence[SnapshotReport] = (),
    claims: Sequence[SnapshotClaim] = (),
    newest: str = "",
    version: int = 1,
) -> Snapshot:
    return Snapshot(
        meta=SnapshotMeta(version=version, created_at="", newest_document_time=newest),
        entities=tuple(entities),
        relationships=tuple(relationships),
        communities=tuple(communities),
        community_reports=tuple(reports),
        text_units=tuple(units),
        documents=(),
        claims=tuple(claims),
    )


def world() -> Snapshot:
    opec = ent(
        1, "OPEC", "OPEC is the oil cartel that sets output quotas.", ["chunk-1", "chunk-2"], 3
    )
    saudi = ent(2, "Saudi Arabia", "Saudi Arabia is the largest OPEC producer.", ["chunk-1"], 2)
    prices = ent(
        3, "Oil Prices", "Oil prices rose after the OPEC accord.", ["chunk-2", "chunk-3"], 2
    )
    kuwait = ent(4, "Kuwait", "Kuwait exceeded its OPEC quota.", ["chunk-3"], 1)
    fed = ent(
        5,
        "Federal Reserve",
        "The Federal Reserve is the US central bank.",
        ["chunk-4", "chunk-5"],
        2,
    )
    volcker = ent(
        6,
        "Paul Volcker",
        "Paul Volcker is chairman of the Federal Reserve.",
        ["chunk-4"],
        1,
        type="person",
    )
    rates = ent(7, "Interest Rates", "Interest rates held steady in March.", ["chunk-5"], 1)
    units = [
        unit(
            1,
            "OPEC and Saudi Arabia agreed to hold output at the Geneva meeting.",
            "1987-03-02",
            [opec, saudi],
        ),
        unit(2, "Oil prices rose after OPEC kept its quota accord.", "1987-03-03", [opec, prices]),
        unit(
            3, "Kuwait pumped above its quota as oil prices firmed.", "1987-03-05", [prices, kuwait]
        ),
        unit(
            4,
            "Paul Volcker said the Federal Reserve would watch inflation.",
            "1987-03-28",
            [fed, volcker],
        ),
        unit(5, "The Federal Reserve left interest rates unchanged.", "1987-03-31", [fed, rates]),
    ]
    rels = [
        rel(1, opec, saudi, "Saudi Arabia leads OPEC.", 5, ["chunk-1"]),
        rel(2, opec, prices, "OPEC quotas drive oil prices.", 5, ["chunk-2"]),
        rel(3, prices, kuwait, "Kuwait's output weighs on oil prices.", 3, ["chunk-3"]),
        rel(4, fed, volcker, "Paul Volcker chairs the Federal Reserve.", 3, ["chunk-4"]),
        rel(5, fed, rates, "The Federal Reserve sets interest rates.", 3, ["chunk-5"]),
    ]
    c1 = comm(1, 0, [opec, saudi, prices, kuwait], children=(3, 4))
    c2 = comm(2, 0, [fed, volcker, rates], children=(5,))
    c3 = comm(3, 1, [opec, saudi], parent=1)
    c4 = comm(4, 1, [prices, kuwait], parent=1)
    c5 = comm(5, 1, [fed, volcker, rates], parent=2)
    reports = [
        report(c1, "OPEC and the oil market", "OPEC, Saudi Arabia and Kuwait shape oil prices.", 8),
        report(
            c2, "The Federal Reserve", "The Federal Reserve and Paul Volcker on interest rates.", 6
        ),
        report(c3, "OPEC quota accord", "OPEC and Saudi Arabia hold the quota accord.", 7),
        report(c4, "Oil prices and Kuwait", "Oil prices firm while Kuwait overproduces.", 5),
        report(c5, "Volcker and rates", "Paul Volcker keeps interest rates steady.", 6),
    ]
    claims = [claim(1, opec, "OPEC agreed to cap output at 15.8 million barrels.", "chunk-1")]
    return snapshot(
        [opec, saudi, prices, kuwait, fed, volcker, rates],
        rels,
        units,
        [c1, c2, c3, c4, c5],
        reports,
        claims,
        newest="1987-03-31T12:00:00Z",
    )


def dated(snapshot: Snapshot) -> Snapshot:
    """``snapshot``'s entities with their mentions per day (one per text unit's day), as the
    community job writes them."""
    day = {u.id: u.published_at[:10] for u in snapshot.text_units}
    entities = tuple(
        replace(
            e,
            mentions_per_day=tuple(
                sorted(Counter(day[u] for u in e.text_unit_ids if u in day).items())
            ),
        )
        for e in snapshot.entities
    )
    return replace(snapshot, entities=entities)


async def entity_store(index: QueryIndex, extra_keys: Sequence[str] = ()) -> DictVectorStore:
    """Entity and text-unit vectors of the index (plus vectors for keys it does not hold)."""
    embedder = HashingEmbedder(256)
    store = DictVectorStore()
    ents = [index.full(e) for e in index.entities.values()]
    vectors = await embedder.embed([f"{e.title} {e.description}" for e in ents])
    await store.upsert(
        "entity", [(e.id, v, {"title": e.title}) for e, v in zip(ents, vectors, strict=True)]
    )
    ghosts = await embedder.embed(list(extra_keys))
    await store.upsert(
        "entity", [(k, v, {"title": k}) for k, v in zip(extra_keys, ghosts, strict=True)]
    )
    units = [index.full(u) for u in index.text_units.values()]
    uvec = await embedder.embed([u.text for u in units])
    await store.upsert(
        "text_unit",
        [
            (
                u.id,
                v,
                {
                    "document_id": u.document_id,
                    "title": u.title,
                    "text": u.text,
                    "published_at": u.published_at,
                },
            )
            for u, v in zip(units, uvec, strict=True)
        ],
    )
    return store


def deps(store: DictVectorStore, llm: ScriptedLLM | None = None) -> QueryDeps:
    return QueryDeps(
        embedder=HashingEmbedder(256),
        store=store,
        prompts=PromptLibrary(),
        count_tokens=words,
        llm=llm,
    )
