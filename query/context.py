"""GraphRAG local-search context: the question's nearest entities and what surrounds them.

The context is a set of tables (Reports, Entities, Relationships, Claims, Sources) within a
total token budget split by proportions: ``community_prop`` for the reports of the selected
entities' communities, ``text_unit_prop`` for the text units that mention them, the rest for
entities, relationships and claims. A section never borrows what another leaves unused, so
the proportions hold whatever the data. Conversation history has a budget of its own.

The entity/relationship/claim section grows one entity at a time, as GraphRAG's does: each
entity brings its relationships (``top_k_relationships`` per entity) and claims, and the
section stops at the last entity whose tables still fit, so the first entities arrive with
their relationships rather than ten entities with none.

The Sources section takes the selected entities' text units in ``query.ranking``'s order:
by entity rank, as in GraphRAG, and within one entity's units those that best match what the
question asks *beyond the names it matched* first (``question_beyond_names``). The first
entity's text units include those of its resolved aliases (``QueryIndex.entity_units``), and
its other spellings that the question also names and the resolution left apart ("lyng"
beside "richard lyng" when no evidence ties them; ``spellings``) rank with it, so a question
about Lyng does not read every "Lyng" article before any "Richard Lyng" one.

"Best match" is Weaviate's hybrid search over the candidate units: the remainder's embedding
on the vector side, and on the keyword (BM25) side the remainder plus the lead entity's most
specific name word. Why not the whole question: every candidate unit already mentions a
selected entity, so its name does not tell them apart by topic, and a name of several words
outweighs the topic ("What happened involving European Community in sugar?" would come back
with whichever of the EC's 178 units repeats "European Community" most). Why one name word
all the same: how often a unit repeats the name says how central the entity is there ("what
did Keating say" is best answered where Keating speaks throughout). The words dropped are
those of the question's proper-noun phrases (``query.entity_names.phrases``) that belong to
the name of an entity the question names (and that is mentioned in the window), or are its
acronym; lower-case topic words are kept even when they are an entity's name ("crude oil").
When nothing is left ("Tell me about OPEC"), the whole question orders the units.

Measured on the 247 person/organisation x topic questions of the Reuters gold labels
(bench/retrieval.py, nDCG@10 of the first ten distinct documents): vector distance of the
remainder 0.559; hybrid on the remainder 0.571; the whole question's keywords 0.580; with
the spellings ranked together 0.624 (whole question) and 0.631 (remainder plus one name
word: persons 0.73, organisations 0.51); with resolved aliases 0.650 (persons 0.74,
organisations 0.54), and 0.641 with aliases but without ranking the spellings together.
Plain BM25 over whole articles scores 0.42.

``local_context`` embeds the question and that remainder in one call (the question selects
the entities), and asks the vector store once for the scores of the candidate text units
(one hybrid search filtered to their ids, at most ``question_ranked_units`` of them in
entity-rank order, not one call per unit); ``build_local_context`` stays pure and takes those
distances as an argument.

``LocalContext.ids`` records exactly which record ids of each dataset the tables hold: the
citation check accepts those and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from graph.protocols import Embedder, VectorStore
from graph.versions.model import SnapshotClaim, SnapshotEntity, SnapshotRelationship
from query.activity import active_communities, entity_mentions
from query.citations import DATASETS
from query.entity_names import content_words, keyword_query, named_entities, phrases
from query.errors import EmptyQuestionError
from query.history import HistoryTurn, history_table
from query.index import QueryIndex
from query.ranking import (
    claims_of,
    rank_relationships,
    rank_reports,
    rank_text_units,
    text_unit_candidates,
)
from query.tables import RowCache, Table, TokenCounter, join_tables
from query.time_window import TimeWindow

ENTITY_HEADER = ("id", "entity", "description", "number of relationships")
RELATIONSHIP_HEADER = ("id", "source", "target", "description", "weight")
CLAIM_HEADER = ("id", "entity", "object", "type", "status", "description")
REPORT_HEADER = ("id", "title", "content")
SOURCE_HEADER = ("id", "date", "title", "text")
SLACK_TOKENS = 8  # a text tokenized inside its row may take a few tokens fewer than alone


@dataclass(frozen=True, slots=True)
class LocalContextConfig:
    max_tokens: int = 12_000
    text_unit_prop: float = 0.5
    community_prop: float = 0.15
    top_k_entities: int = 10
    top_k_relationships: int = 10  # per selected entity
    oversample: int = 2  # vector hits fetched per wanted entity (some may be skipped)
    named_entities: int = 5  # entities the question names, taken before the vector hits
    community_level: int = 2
    use_report_summary: bool = True  # the summary, else the full report, as report content
    include_claims: bool = True
    history_max_tokens: int = 2_000
    history_max_turns: int = 5
    question_ranked_units: int = 1_000  # candidate text units given a distance (0: none)

    def __post_init__(self) -> None:
        props = (self.text_unit_prop, self.community_prop)
        if any(p < 0 for p in props) or sum(props) > 1:
            raise ValueError("text_unit_prop and community_prop must be >= 0 and sum to <= 1")
        if self.max_tokens < 1 or self.top_k_entities < 1:
            raise ValueError("max_tokens and top_k_entities must be positive")

    def budgets(self) -> tuple[int, int, int]:
        """(reports, entities+relationships+claims, sources) token budgets."""
        reports = int(self.max_tokens * self.community_prop)
        sources = int(self.max_tokens * self.text_unit_prop)
        return reports, self.max_tokens - reports - sources, sources


@dataclass(frozen=True, slots=True)
class LocalContext:
    text: str  # the data tables
    history: str  # the conversation table ("" without history)
    ids: dict[str, tuple[int, ...]]  # dataset -> record ids in the tables, in table order
    entity_keys: tuple[str, ...]  # the selected entities, nearest first
    tokens: dict[str, int] = field(default_factory=dict)  # per section
    skipped_hits: int = 0  # vector hits for entities this snapshot does not hold

    def id_sets(self) -> dict[str, set[int]]:
        return {name: set(ids) for name, ids in self.ids.items()}


async def select_entities(
    question: str,
    *,
    index: QueryIndex,
    embedder: Embedder,
    store: VectorStore,
    config: LocalContextConfig,
    window: TimeWindow,
    vector: list[float] | None = None,
    named: Sequence[str] | None = None,
) -> tuple[list[str], int]:
    """The entities the question names (``query.entity_names``), then those nearest to it,
    and how many vector hits were skipped because the snapshot does not hold them (Weaviate
    may run ahead of the latest snapshot). ``vector`` is the question's embedding and
    ``named`` its ``named_in_window`` when the caller already has them."""
    if not question.strip():
        raise EmptyQuestionError("the question is empty")
    if vector is None:
        [vector] = await embedder.embed([question])
    keywords = keyword_query(question)
    hits = await store.search(
        "entity", vector, config.top_k_entities * config.oversample, text=keywords or None
    )
    if named is None:
        named = named_in_window(question, index=index, config=config, window=window)
    chosen = list(named)
    skipped = 0
    for hit in sorted(hits, key=lambda h: h.distance):
        key = index.aliases.resolve(hit.key)
        if hit.key not in index.entities or key not in index.entities:
            skipped += 1
        elif key not in chosen and _in_window(index, key, window):
            chosen.append(key)
    return chosen[: config.top_k_entities], skipped


def named_in_window(
    question: str, *, index: QueryIndex, config: LocalContextConfig, window: TimeWindow
) -> list[str]:
    """The entities the question names (``query.entity_names``, best first) that are
    mentioned in the window."""
    named = named_entities(
        question,
        index.names,
        lambda k: index.entities[k].frequency,
        limit=config.named_entities,
        is_person=lambda k: index.entities[k].type == "person",
        units=lambda k: index.entities[k].text_unit_ids,
    )
    # a name resolved to another ("IMF") stands for the entity it names
    resolved = dict.fromkeys(index.aliases.resolve(k) for k in named if k in index.entities)
    return [k for k in resolved if k in index.entities and _in_window(index, k, window)]


def _in_window(index: QueryIndex, key: str, window: TimeWindow) -> bool:
    """Whether the entity is mentioned in the window under any of its names."""
    if not window.bounded:
        return True
    names = [key, *(r.alias for r in index.aliases.whole(key))]
    return any(entity_mentions(index, k, window) > 0 for k in names)


def question_beyond_names(question: str, named: Sequence[str], index: QueryIndex) -> str:
    """The content words of the question's phrases, less those of its proper-noun phrases
    that name one of ``named`` (a word of the entity's name, or the acronym naming it either
    way: "IMF" for "international monetary fund", "European Community" for "ec"); "" when
    nothing is left. See the module docstring for why."""
    names = [(k, set(k.split())) for k in dict.fromkeys(named)]
    kept: list[str] = []
    for phrase in phrases(question):
        content = content_words(phrase.words)
        if not phrase.proper or not names:
            kept += content
            continue
        initials = "".join(w[0] for w in content) if len(content) >= 2 else ""
        if any(k == initials for k, _ in names):
            continue  # the phrase is spelled out by an acronym entity ("ec")
        for word in content:
            acronym = index.names.by_initials.get(word, ()) if phrase.acronym else ()
            if not any(word in words or k in acronym for k, words in names):
                kept.append(word)
    return " ".join(kept)


def _ranking_keywords(rest: str, keys: Sequence[str], index: QueryIndex) -> str:
    """The keyword side of the Sources' order: the lead entity's most specific name word
    (its rarest over all names) and the question's remainder (see the module docstring)."""
    if not keys:
        return rest
    word = max(keys[0].split(), key=lambda w: (index.names.idf(w), w))
    return f"{word} {rest}".strip()


def spellings(keys: Sequence[str], named: Collection[str]) -> frozenset[str]:
    """The first selected entity and the other entities the question names that are
    spellings of it, one name's words holding the other's ("lyng" and "richard lyng",
    "james baker" and "baker", not "charles baker"). Where alias resolution found no
    evidence to merge them they are separate entities, each with some of the articles;
    ranking them together keeps a question about Lyng from reading every "Lyng" article
    before any "Richard Lyng" one."""
    if not keys:
        return frozenset()
    first = set(keys[0].split())
    return frozenset(
        k
        for k in keys
        if k == keys[0] or (k in named and (set(k.split()) <= first or first <= set(k.split())))
    )


async def text_unit_distances(
    vector: list[float],
    selected: Sequence[str],
    *,
    index: QueryIndex,
    store: VectorStore,
    window: TimeWindow,
    limit: int = 1_000,
    text: str | None = None,
    alike: Collection[str] = (),
) -> dict[str, float]:
    """Distance from the question to the text units of the selected entities in the window
    (the first ``limit`` in entity-rank order, ``alike`` ranking with the first), by one
    search filtered to those units' ids: hybrid when ``text`` gives its keywords, else by
    vector alone. Units the store does not hold (it may lag the snapshot) are absent; hits
    outside the candidates (a store that ignores the filter) are dropped."""
    keys = [k for k in dict.fromkeys(selected) if k in index.entities]
    candidates = list(text_unit_candidates(index, keys, window, alike))[: max(0, limit)]
    if not candidates:
        return {}
    hits = await store.search(
        "text_unit", vector, len(candidates), {"key": candidates}, text=text or None
    )
    wanted = set(candidates)
    return {h.key: h.distance for h in hits if h.key in wanted}


Row = tuple[int, str, int]  # (record id, rendered line, token cost)
Section = list[tuple[Table, list[Row]]]


# a row's cells are made only when its line is not cached yet: the description is read then
def _entity_cells(index: QueryIndex, e: SnapshotEntity) -> tuple[object, ...]:
    return (e.title, index.full(e).description, e.degree)


def _relationship_cells(index: QueryIndex, r: SnapshotRelationship) -> tuple[object, ...]:
    weight = int(r.weight) if float(r.weight).is_integer() else round(r.weight, 2)
    return (r.source, r.target, index.full(r).description, weight)


def _claim_cells(index: QueryIndex, c: SnapshotClaim) -> tuple[object, ...]:
    return (c.subject_id, c.object_id or "", c.type, c.status, index.full(c).description)


class _Builder:
    """Builds one context; rows are rendered and counted once however often they are tried."""

    def __init__(
        self,
        index: QueryIndex,
        config: LocalContextConfig,
        count: TokenCounter,
        window: TimeWindow,
    ) -> None:
        self.index, self.config, self.count, self.window = index, config, count, window
        self.rows = RowCache(count)

    def local_rows(self, prefix: Sequence[str]) -> Section:
        ix, rows = self.index, self.rows
        limit = self.config.top_k_relationships * len(prefix)
        rels = rank_relationships(ix, prefix, limit, self.window)
        claims = claims_of(ix, prefix, self.window) if self.config.include_claims else []
        ents = [ix.entities[k] for k in prefix]
        return [
            (
                Table("Entities", ENTITY_HEADER, self.count),
                [_row(rows, "e", e.human_readable_id, partial(_entity_cells, ix, e)) for e in ents],
            ),
            (
                Table("Relationships", RELATIONSHIP_HEADER, self.count),
                [
                    _row(rows, "r", r.human_readable_id, partial(_relationship_cells, ix, r))
                    for r in rels
                ],
            ),
            (
                Table("Claims", CLAIM_HEADER, self.count),
                [
                    _row(rows, "c", c.human_readable_id, partial(_claim_cells, ix, c))
                    for c in claims
                ],
            ),
        ]

    def local_section(self, selected: Sequence[str], budget: int) -> list[Table]:
        """The longest prefix of ``selected`` whose tables fit; the first entity alone is
        squeezed in row by row when even it does not fit whole."""
        best: Section = []
        for k in range(1, len(selected) + 1):
            section = self.local_rows(selected[:k])
            if _section_cost(section) > budget:
                if k == 1:
                    best = section
                break
            best = section
        tables: list[Table] = []
        used = 0
        for table, rows in best:
            for record_id, line, cost in rows:
                table.try_add_line(record_id, line, cost, budget - used + table.tokens)
            used += table.tokens
            tables.append(table)
        return tables

    def reports(self, selected: Sequence[str], budget: int) -> Table:
        active = active_communities(self.index, self.window)
        table = Table("Reports", REPORT_HEADER, self.count)
        for ranked in rank_reports(self.index, selected, self.config.community_level, active):
            r = self.index.full(ranked)
            content = r.summary if self.config.use_report_summary else r.body()
            table.try_add(r.community, (r.title, content or r.summary), budget)
        return table

    def sources(
        self,
        selected: Sequence[str],
        rel_ids: Sequence[int],
        budget: int,
        distances: Mapping[str, float] | None = None,
        alike: Collection[str] = (),
    ) -> Table:
        ix = self.index
        rels = [ix.relationship_by_hrid[i] for i in rel_ids]
        table = Table("Sources", SOURCE_HEADER, self.count)
        for key in rank_text_units(ix, selected, rels, self.window, distances, alike):
            u = ix.text_units[key]
            # The text's own token count bounds the row's from below (give or take the tokens
            # a join merges): a unit that cannot fit is skipped without being tokenized, which
            # kept a hub entity's thousand units from dominating the context's build time.
            if u.n_tokens - SLACK_TOKENS > budget - table.tokens:
                continue
            u = ix.full(u)
            table.try_add(u.human_readable_id, (u.published_at[:10], u.title, u.text), budget)
        return table


def _row(rows: RowCache, kind: str, record_id: int, cells: Callable[[], Sequence[object]]) -> Row:
    line, cost = rows.row(kind, record_id, cells)
    return record_id, line, cost


def _section_cost(section: Section) -> int:
    return sum(
        table.header_cost() + sum(cost for _, _, cost in rows) for table, rows in section if rows
    )


def build_local_context(
    index: QueryIndex,
    selected: Sequence[str],
    *,
    config: LocalContextConfig,
    count_tokens: TokenCounter,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
    skipped_hits: int = 0,
    unit_distances: Mapping[str, float] | None = None,
    alike: Collection[str] = (),
) -> LocalContext:
    """The context tables for already selected entities (pure: no I/O). ``unit_distances``
    (text unit id -> distance to the question, see ``text_unit_distances``) orders each
    selected entity's text units in the Sources; without it they keep GraphRAG's order.
    ``alike``: spellings of the first entity whose units rank with its own (``spellings``)."""
    window = window or TimeWindow()
    keys = [k for k in dict.fromkeys(selected) if k in index.entities]
    builder = _Builder(index, config, count_tokens, window)
    report_budget, local_budget, source_budget = config.budgets()
    reports = builder.reports(keys, report_budget)
    local = builder.local_section(keys, local_budget)
    rel_ids = next((t.ids for t in local if t.name == "Relationships"), [])
    sources = builder.sources(keys, rel_ids, source_budget, unit_distances, alike)
    tables = [reports, *local, sources]
    ids = {name: () for name in DATASETS} | {t.name: tuple(t.ids) for t in tables}
    conversation = history_table(
        history,
        budget=config.history_max_tokens,
        count=count_tokens,
        max_turns=config.history_max_turns,
    )
    return LocalContext(
        text=join_tables(tables),
        history=conversation,
        ids=ids,
        entity_keys=tuple(keys),
        tokens={
            "reports": reports.tokens,
            "local": sum(t.tokens for t in local),
            "sources": sources.tokens,
        },
        skipped_hits=skipped_hits,
    )


async def local_context(
    question: str,
    *,
    index: QueryIndex,
    embedder: Embedder,
    store: VectorStore,
    config: LocalContextConfig,
    count_tokens: TokenCounter,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
) -> LocalContext:
    """Select the question's entities, then build their context, each entity's text units
    nearest to what the question asks beyond the names it matched first (one embedding call
    for the question and that remainder, two vector searches)."""
    window = window or TimeWindow()
    if not question.strip():
        raise EmptyQuestionError("the question is empty")
    named = named_in_window(question, index=index, config=config, window=window)
    rest = question_beyond_names(question, named[: config.top_k_entities], index)
    vectors = await embedder.embed([question, rest] if rest else [question])
    keys, skipped = await select_entities(
        question,
        index=index,
        embedder=embedder,
        store=store,
        config=config,
        window=window,
        vector=vectors[0],
        named=named,
    )
    alike = spellings(keys, named)
    distances = await text_unit_distances(
        vectors[-1],
        keys,
        index=index,
        store=store,
        window=window,
        limit=config.question_ranked_units,
        text=_ranking_keywords(rest, keys, index) or None,
        alike=alike,
    )
    return build_local_context(
        index,
        keys,
        config=config,
        count_tokens=count_tokens,
        window=window,
        history=history,
        skipped_hits=skipped,
        unit_distances=distances,
        alike=alike,
    )
