"""Merge rules: contributions, bounded aggregates, redelivery, retraction and their codec.

``MiniMerger`` below is the pattern the merger agent follows, on plain dicts instead of faust
tables: point look-ups of the rows of one key, ``absorb_*``/``release_*``, write back.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import date, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph.keys import entity_key, relationship_key
from graph.merge.aggregates import (
    MAX_CLAIMS,
    MAX_DAYS,
    ClaimAggregate,
    EntityAggregate,
    RelationshipAggregate,
    apply_claims,
    apply_entity,
    apply_relationship,
    claims_fingerprint,
    description_fingerprint,
    resample_claims,
    resample_entity,
    resample_relationship,
    retract_claims,
    retract_entity,
    retract_relationship,
)
from graph.merge.changes import (
    GraphChange,
    claims_changed,
    entity_changed,
    relationship_changed,
    text_unit_added,
    text_unit_retracted,
)
from graph.merge.codec import from_dict, to_dict
from graph.merge.contributions import (
    MAX_TEXT_CHARS,
    ChunkManifest,
    ClaimContribution,
    ClaimFact,
    EntityContribution,
    RelationshipContribution,
    chunk_contributions,
    claim_contributions,
    entity_contributions,
    relationship_contributions,
    split_row_key,
    stale_keys,
)
from graph.merge.errors import InvalidContributionError, RecordDecodeError, RetractionError
from graph.merge.rules import (
    ClaimRows,
    EntityRows,
    RelationshipRows,
    absorb_claims,
    absorb_entity,
    absorb_relationship,
    contribution_key,
    document_chunk_added,
    document_chunk_removed,
    document_key,
    release_claims,
    release_entity,
    release_relationship,
)
from graph.merge.tally import (
    DayWindow,
    Tally,
    day_add,
    day_remove,
    rank,
    sample_of,
    tally_add,
    tally_remove,
)
from graph.model import (
    Chunk,
    ChunkExtraction,
    ClaimMention,
    EntityMention,
    RelationshipMention,
    content_id,
)

DAY0 = date(1987, 3, 1)
CAP = 12


# ---- builders ----------------------------------------------------------------------------
def make_chunk(doc: str = "d1", text: str = "text", day: int = 0, position: int = 0) -> Chunk:
    published = (DAY0 + timedelta(days=day)).isoformat() + "T09:30:00Z"
    return Chunk(
        id=content_id("chunk", doc, text),
        document_id=doc,
        title=f"Title {doc}",
        published_at=published,
        position=position,
        text=text,
        n_tokens=len(text.split()),
    )


def extraction(
    chunk: Chunk,
    entities: Sequence[tuple[str, str, str]] = (),
    relationships: Sequence[tuple[str, str, str, float]] = (),
    claims: Sequence[ClaimMention] = (),
) -> ChunkExtraction:
    return ChunkExtraction(
        chunk=chunk,
        entities=tuple(EntityMention(n, t, d, chunk.id) for n, t, d in entities),
        relationships=tuple(
            RelationshipMention(s, t, d, w, chunk.id) for s, t, d, w in relationships
        ),
        claims=tuple(claims),
    )


def claim(subject: str, description: str, chunk_id: str = "c") -> ClaimMention:
    return ClaimMention(
        subject, "Acme", "FRAUD", "SUSPECTED", "1987-01-01", None, description, "quote", chunk_id
    )


def ec(
    chunk: int,
    *,
    doc: str = "d1",
    day: int = 0,
    name: str = "Acme",
    type: str = "organization",
    descriptions: tuple[str, ...] = ("a company",),
) -> EntityContribution:
    return EntityContribution(
        key="acme",
        name=name,
        type=type,
        descriptions=tuple(sorted(set(descriptions))),
        chunk_id=f"chunk-{chunk}",
        document_id=doc,
        day=DAY0 + timedelta(days=day),
    )


def rc(
    chunk: int, *, strength: float = 5, day: int = 0, descriptions: tuple[str, ...] = ("deal",)
) -> RelationshipContribution:
    return RelationshipContribution(
        key=relationship_key("acme", "globex"),
        source_key="acme",
        target_key="globex",
        source_name="Acme",
        target_name="Globex",
        descriptions=descriptions,
        strength_milli=round(strength * 1000),
        chunk_id=f"chunk-{chunk}",
        document_id="d1",
        day=DAY0 + timedelta(days=day),
    )


def fact(description: str, subject: str = "acme") -> ClaimFact:
    return ClaimFact(
        subject, subject.title(), None, None, "FRAUD", "TRUE", None, None, description, "q"
    )


def cc(chunk: int, *descriptions: str) -> ClaimContribution:
    facts = sorted((fact(d) for d in descriptions), key=lambda f: f.id)
    return ClaimContribution("acme", tuple(facts), f"chunk-{chunk}", "d1", DAY0)


def fold_entity(contribs: list[EntityContribution], cap: int = CAP) -> EntityAggregate | None:
    """Absorb contributions in order with real rows (contribution rows + document counters)."""
    merger = MiniMerger(max_descriptions=cap)
    for c in contribs:
        merger.entity_item(c)
    return merger.entities.get("acme")


def observable(agg: Any) -> dict[str, Any]:
    """Every field and derived property a reader of the row can see, except ``version``."""
    out = {f.name: getattr(agg, f.name) for f in fields(agg) if f.name != "version"}
    for prop in ("name", "type", "first_seen", "last_seen", "source_name", "strength"):
        if hasattr(agg, prop):
            out[prop] = getattr(agg, prop)
    return out


# ---- the merger's pattern, on dicts ------------------------------------------------------
def _put(table: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _live(rows: dict[str, Any], key: str) -> list[Any]:
    """The key's live contribution rows (the merger's prefix scan of its partition)."""
    prefix = contribution_key(key, "")
    return [row for row_key, row in rows.items() if row_key.startswith(prefix)]


@dataclass
class MiniMerger:
    max_descriptions: int = CAP
    max_claims: int = MAX_CLAIMS
    entities: dict[str, EntityAggregate] = field(default_factory=dict)
    entity_rows: dict[str, EntityContribution] = field(default_factory=dict)
    doc_counters: dict[str, int] = field(default_factory=dict)
    relationships: dict[str, RelationshipAggregate] = field(default_factory=dict)
    relationship_rows: dict[str, RelationshipContribution] = field(default_factory=dict)
    claims: dict[str, ClaimAggregate] = field(default_factory=dict)
    claim_rows: dict[str, ClaimContribution] = field(default_factory=dict)
    manifests: dict[str, ChunkManifest] = field(default_factory=dict)
    changes: list[GraphChange] = field(default_factory=list)

    def _entity_rows(self, key: str, chunk_id: str, document_id: str) -> EntityRows:
        return EntityRows(
            self.entities.get(key),
            self.entity_rows.get(contribution_key(key, chunk_id)),
            self.doc_counters.get(document_key(key, document_id)),
        )

    def _write_entity(
        self, key: str, chunk_id: str, doc: str, rows: EntityRows, *, r: bool
    ) -> None:
        _put(self.entities, key, rows.aggregate)
        _put(self.entity_rows, contribution_key(key, chunk_id), rows.contribution)
        _put(self.doc_counters, document_key(key, doc), rows.document_chunks)
        self.changes.append(
            entity_changed(key, rows.aggregate, chunk_id=chunk_id, document_id=doc, retraction=r)
        )

    def _refold_entity(self, key: str, step: Any) -> None:
        """What the merger does when a step says its sample lost a place (after the rows)."""
        agg = self.entities.get(key)
        if step.resample and agg is not None:
            refolded = resample_entity(
                agg, _live(self.entity_rows, key), max_descriptions=self.max_descriptions
            )
            assert refolded is not None, "the live rows must account for the sample"
            self.entities[key] = refolded

    def entity_item(self, c: EntityContribution) -> bool:
        rows = self._entity_rows(c.key, c.chunk_id, c.document_id)
        step = absorb_entity(rows, c, max_descriptions=self.max_descriptions)
        if step.changed:
            self._write_entity(c.key, c.chunk_id, c.document_id, step.rows, r=False)
            self._refold_entity(c.key, step)
        return step.changed

    def entity_retraction(self, key: str, chunk_id: str, doc: str) -> None:
        step = release_entity(self._entity_rows(key, chunk_id, doc))
        if step.changed:
            self._write_entity(key, chunk_id, doc, step.rows, r=True)
            self._refold_entity(key, step)

    def relationship_item(self, c: RelationshipContribution, *, retract: bool = False) -> None:
        row_key = contribution_key(c.key, c.chunk_id)
        rows = RelationshipRows(self.relationships.get(c.key), self.relationship_rows.get(row_key))
        step = (
            release_relationship(rows)
            if retract
            else absorb_relationship(rows, c, max_descriptions=self.max_descriptions)
        )
        if step.changed:
            _put(self.relationships, c.key, step.rows.aggregate)
            _put(self.relationship_rows, row_key, step.rows.contribution)
            agg = step.rows.aggregate
            if step.resample and agg is not None:
                live = _live(self.relationship_rows, c.key)
                refolded = resample_relationship(agg, live, max_descriptions=self.max_descriptions)
                assert refolded is not None
                self.relationships[c.key] = refolded

    def claim_item(self, c: ClaimContribution, *, retract: bool = False) -> None:
        row_key = contribution_key(c.key, c.chunk_id)
        rows = ClaimRows(self.claims.get(c.key), self.claim_rows.get(row_key))
        step = (
            release_claims(rows) if retract else absorb_claims(rows, c, max_claims=self.max_claims)
        )
        if step.changed:
            _put(self.claims, c.key, step.rows.aggregate)
            _put(self.claim_rows, row_key, step.rows.contribution)
            agg = step.rows.aggregate
            if step.resample and agg is not None:
                refolded = resample_claims(
                    agg, _live(self.claim_rows, c.key), max_claims=self.max_claims
                )
                assert refolded is not None
                self.claims[c.key] = refolded

    def _retract_keys(self, m: ChunkManifest) -> None:
        for key in m.entity_keys:
            self.entity_retraction(key, m.chunk_id, m.document_id)
        for key in m.relationship_keys:
            row = self.relationship_rows.get(contribution_key(key, m.chunk_id))
            if row is not None:
                self.relationship_item(row, retract=True)
        for key in m.claim_keys:
            claim_row = self.claim_rows.get(contribution_key(key, m.chunk_id))
            if claim_row is not None:
                self.claim_item(claim_row, retract=True)

    def extraction(self, x: ChunkExtraction) -> None:
        bundle = chunk_contributions(x)
        old = self.manifests.get(x.chunk.id)
        if old is None:
            self.changes.append(text_unit_added(x))
        else:
            self._retract_keys(stale_keys(old, bundle.manifest))
        self.manifests[x.chunk.id] = bundle.manifest
        for e in bundle.entities:
            self.entity_item(e)
        for r in bundle.relationships:
            self.relationship_item(r)
        for c in bundle.claims:
            self.claim_item(c)

    def retract_chunk(self, chunk_id: str) -> None:
        manifest = self.manifests.pop(chunk_id)
        self._retract_keys(stale_keys(manifest, None))
        self.changes.append(text_unit_retracted(chunk_id, manifest.document_id))

    def graph(self) -> tuple[dict[str, Any], ...]:
        """Everything observable, without versions, for comparing two runs."""
        return (
            {k: observable(v) for k, v in self.entities.items()},
            {k: observable(v) for k, v in self.relationships.items()},
            {k: observable(v) for k, v in self.claims.items()},
        )


# ---- contributions -------------------------------------------------------------------------
class TestContributions:
    def test_one_entity_contribution_per_key_with_majority_name_and_type(self) -> None:
        x = extraction(
            make_chunk(),
            [
                ("FEDERAL RESERVE", "organization", "central bank"),
                ("The Federal Reserve", "organization", "sets rates"),
                ("Federal Reserve", "geo", "central bank"),
                ("FEDERAL RESERVE", "Organization", ""),
                ("!!!", "organization", "noise"),
            ],
        )
        [c] = entity_contributions(x)
        assert c.key == "federal reserve"
        assert (c.name, c.type) == ("FEDERAL RESERVE", "organization")
        assert c.descriptions == ("central bank", "sets rates")
        assert (c.chunk_id, c.document_id, c.day) == (x.chunk.id, "d1", DAY0)

    def test_name_tie_breaks_to_the_smallest_string(self) -> None:
        x = extraction(make_chunk(), [("Acme", "person", ""), ("ACME", "organization", "")])
        [c] = entity_contributions(x)
        assert (c.name, c.type) == ("ACME", "organization")

    def test_relationship_pair_merges_both_directions_with_mean_strength(self) -> None:
        x = extraction(
            make_chunk(),
            relationships=[
                ("Globex", "Acme", "sued", 8),
                ("ACME", "Globex", "settled with", 5),
                ("Acme", "acme", "self", 3),
            ],
        )
        [r] = relationship_contributions(x)
        assert (r.source_key, r.target_key) == ("acme", "globex")
        assert (r.source_name, r.target_name) == ("ACME", "Globex")
        assert r.strength_milli == 6500
        assert r.descriptions == ("settled with", "sued")

    def test_claims_grouped_by_subject(self) -> None:
        ch = make_chunk()
        x = extraction(
            ch, claims=[claim("Acme", "fraud"), claim("ACME", "fraud"), claim("Bob", "x")]
        )
        by_key = {c.key: c for c in claim_contributions(x)}
        assert set(by_key) == {"acme", "bob"}
        assert len(by_key["bob"].facts) == 1
        # the two Acme claims differ only in the subject's spelling: the fact keeps its key
        assert {f.subject_key for f in by_key["acme"].facts} == {"acme"}

    def test_long_description_is_cut(self) -> None:
        [c] = entity_contributions(extraction(make_chunk(), [("Acme", "org", "x" * 10_000)]))
        assert len(c.descriptions[0]) == MAX_TEXT_CHARS

    def test_bad_inputs_are_typed_errors(self) -> None:
        bad_day = extraction(Chunk("c", "d", "t", "not a date", 0, "x", 1), [("Acme", "org", "")])
        with pytest.raises(InvalidContributionError):
            entity_contributions(bad_day)
        nan = extraction(make_chunk(), relationships=[("A", "B", "x", float("nan"))])
        with pytest.raises(InvalidContributionError):
            relationship_contributions(nan)

    def test_manifest_lists_keys_and_stale_keys_are_the_difference(self) -> None:
        x1 = extraction(
            make_chunk(),
            [("Acme", "org", ""), ("Globex", "org", "")],
            [("Acme", "Globex", "deal", 5)],
            [claim("Acme", "fraud")],
        )
        m1 = chunk_contributions(x1).manifest
        assert m1.entity_keys == ("acme", "globex")
        assert m1.relationship_keys == (relationship_key("acme", "globex"),)
        assert m1.claim_keys == ("acme",)
        m2 = chunk_contributions(extraction(make_chunk(), [("Acme", "org", "")])).manifest
        stale = stale_keys(m1, m2)
        assert stale.entity_keys == ("globex",)
        assert stale.relationship_keys == m1.relationship_keys
        assert stale_keys(m1, None) == m1

    def test_row_keys_split_back_even_when_ids_contain_the_separator(self) -> None:
        assert "|" not in entity_key("A|B")
        assert split_row_key(contribution_key("acme", "doc|7")) == ("acme", "doc|7")
        assert split_row_key(document_key(relationship_key("a", "b"), "x")) == (
            relationship_key("a", "b"),
            "x",
        )


# ---- redelivery, correction, re-extraction ---------------------------------------------------
def _stream() -> list[ChunkExtraction]:
    xs = []
    for i in range(6):
        ch = make_chunk(doc=f"d{i % 3}", text=f"text {i}", day=i)
        xs.append(
            extraction(
                ch,
                [("Acme", "organization", f"acme fact {i % 2}"), (f"Person {i}", "person", "p")],
                [("Acme", f"Person {i}", "works at", 3 + i)],
                [claim("Acme", f"claim {i % 2}", ch.id)],
            )
        )
    return xs


class TestRedelivery:
    def test_absorbing_the_same_contribution_twice_changes_nothing(self) -> None:
        c = ec(1)
        first = absorb_entity(EntityRows(), c, max_descriptions=CAP)
        again = absorb_entity(first.rows, c, max_descriptions=CAP)
        assert first.changed and not again.changed
        assert again.rows is first.rows
        assert again.rows.aggregate is not None and again.rows.aggregate.mention_count == 1

    def test_replaying_the_whole_stream_leaves_the_graph_and_versions_unchanged(self) -> None:
        m = MiniMerger()
        for x in _stream():
            m.extraction(x)
        before, versions = m.graph(), {k: v.version for k, v in m.entities.items()}
        n_changes = len(m.changes)
        for x in _stream() + _stream()[::-1]:
            m.extraction(x)
        assert m.graph() == before
        assert {k: v.version for k, v in m.entities.items()} == versions
        assert len(m.changes) == n_changes  # nothing republished
        assert m.entities["acme"].mention_count == 6
        assert m.entities["acme"].document_count == 3

    def test_releasing_an_absent_contribution_changes_nothing(self) -> None:
        step = release_entity(EntityRows(None, None, None))
        assert not step.changed

    def test_a_stored_row_of_another_chunk_is_refused(self) -> None:
        rows = absorb_entity(EntityRows(), ec(1), max_descriptions=CAP).rows
        with pytest.raises(InvalidContributionError):
            absorb_entity(rows, ec(2), max_descriptions=CAP)


class TestCorrection:
    def test_republished_document_leaves_exactly_the_new_version(self) -> None:
        old = extraction(
            make_chunk("d1", "old text"),
            [("Acme", "organization", "old fact"), ("Initech", "organization", "gone")],
            [("Acme", "Initech", "old deal", 9)],
        )
        new = extraction(
            make_chunk("d1", "new text", day=2),
            [("Acme", "organization", "new fact"), ("Globex", "organization", "new")],
            [("Acme", "Globex", "new deal", 4)],
        )
        other = extraction(make_chunk("d2", "other"), [("Acme", "person", "other fact")])
        m = MiniMerger()
        for x in (other, old):
            m.extraction(x)
        m.retract_chunk(old.chunk.id)
        m.extraction(new)
        only_new = MiniMerger()
        for x in (other, new):
            only_new.extraction(x)
        assert "initech" not in m.entities
        assert m.graph() == only_new.graph()
        assert any("initech" in c.deleted_entities and c.retraction for c in m.changes)
        assert not m.entity_rows.keys() - only_new.entity_rows.keys()
        assert m.doc_counters == only_new.doc_counters

    def test_changed_reextraction_of_a_chunk_replaces_its_contribution(self) -> None:
        ch = make_chunk()
        m = MiniMerger()
        m.extraction(extraction(ch, [("Acme", "org", "first"), ("Globex", "org", "")]))
        m.extraction(extraction(ch, [("Acme", "org", "second")]))
        fresh = MiniMerger()
        fresh.extraction(extraction(ch, [("Acme", "org", "second")]))
        assert m.graph() == fresh.graph()
        assert m.entities["acme"].descriptions.values() == ("second",)
        assert m.entities["acme"].document_count == 1


# ---- exact retraction and order independence -----------------------------------------------
contribs_strategy = st.lists(
    st.builds(
        lambda doc, day, name, type_, descs: (doc, day, name, type_, descs),
        st.sampled_from(["d1", "d2", "d3"]),
        st.integers(0, 40),
        st.sampled_from(["Acme", "ACME", "the Acme"]),
        st.sampled_from(["organization", "person", "geo"]),
        st.frozensets(st.sampled_from(list("abcdef")), max_size=3),
    ),
    max_size=12,
)


def _entity_list(raw: list[tuple[Any, ...]]) -> list[EntityContribution]:
    return [
        ec(i, doc=d, day=day, name=n, type=t, descriptions=tuple(ds))
        for i, (d, day, n, t, ds) in enumerate(raw)
    ]


class TestExactRetraction:
    @settings(max_examples=60, deadline=None)
    @given(contribs_strategy, st.data())
    def test_retract_after_apply_restores_every_field(self, raw: Any, data: Any) -> None:
        contribs = _entity_list(raw)
        extra = ec(
            99,
            doc=data.draw(st.sampled_from(["d1", "d9"])),
            day=data.draw(st.integers(0, 60)),
            descriptions=("z", "a"),
        )
        m = MiniMerger()
        for c in contribs:
            m.entity_item(c)
        before = m.entities.get("acme")
        counters = dict(m.doc_counters)
        m.entity_item(extra)
        m.entity_retraction(extra.key, extra.chunk_id, extra.document_id)
        after = m.entities.get("acme")
        assert (before is None) == (after is None)
        if before is not None and after is not None:
            assert observable(after) == observable(before)
            assert after.version == before.version + 2
        assert m.doc_counters == counters

    def test_relationship_retract_restores_strength_exactly(self) -> None:
        agg = None
        for i, s in enumerate([1.1, 2.2, 7.3]):
            agg = apply_relationship(agg, rc(i, strength=s, day=i), max_descriptions=CAP)
        assert agg is not None
        extra = rc(9, strength=9.9, day=30, descriptions=("war",))
        again = retract_relationship(apply_relationship(agg, extra, max_descriptions=CAP), extra)
        assert again is not None and observable(again) == observable(agg)
        assert agg.strength == pytest.approx((1.1 + 2.2 + 7.3) / 3)
        assert agg.weight == 3

    def test_claims_retract_restores_facts(self) -> None:
        agg = apply_claims(apply_claims(None, cc(1, "x", "y")), cc(2, "y"))
        extra = cc(3, "w", "y")
        assert retract_claims(apply_claims(agg, extra), extra) == agg
        assert agg.support_of(fact("y")) == 2
        assert retract_claims(retract_claims(agg, cc(2, "y")), cc(1, "x", "y")) is None

    def test_last_retraction_deletes_the_row(self) -> None:
        agg = apply_entity(None, ec(1), max_descriptions=CAP, opens_document=True)
        assert retract_entity(agg, ec(1), closes_document=True) is None
        with pytest.raises(RetractionError):
            retract_entity(None, ec(1), closes_document=True)
        with pytest.raises(RetractionError):
            document_chunk_removed(None)

    @settings(max_examples=40, deadline=None)
    @given(contribs_strategy, st.randoms(use_true_random=False))
    def test_retracting_a_subset_equals_never_applying_it(
        self, raw: Any, rnd: random.Random
    ) -> None:
        contribs = _entity_list(raw)
        gone = [c for c in contribs if rnd.random() < 0.5]
        m = MiniMerger()
        for c in contribs:
            m.entity_item(c)
        for c in gone:
            m.entity_retraction(c.key, c.chunk_id, c.document_id)
        expected = fold_entity([c for c in contribs if c not in gone])
        got = m.entities.get("acme")
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert observable(got) == observable(expected)


class TestRetractionsBeyondTheCap:
    """A retraction that takes a kept description or claim out of a full sample: the merger
    refolds the sample from the live rows, so the row equals one that never saw the retracted
    chunks, whatever the order of the adds and retractions (a replay after a crash)."""

    picks = st.lists(st.integers(0, 11), min_size=1, max_size=30)

    @settings(max_examples=60, deadline=None)
    @given(picks, st.randoms(use_true_random=False))
    def test_entity_descriptions(self, picks: list[int], rnd: random.Random) -> None:
        contribs = [ec(i, descriptions=(f"description {p}",)) for i, p in enumerate(picks)]
        gone = [c for c in contribs if rnd.random() < 0.4]
        m = MiniMerger(max_descriptions=4)
        for c in rnd.sample(contribs, len(contribs)):
            m.entity_item(c)
        for c in rnd.sample(gone, len(gone)):
            m.entity_retraction(c.key, c.chunk_id, c.document_id)
        live = [c for c in contribs if c not in gone]
        got, expected = m.entities.get("acme"), fold_entity(live, cap=4)
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert observable(got) == observable(expected)
            values = [d for c in live for d in c.descriptions]
            assert got.descriptions == sample_of(values, cap=4)

    @staticmethod
    def _shuffled_against_fresh(
        contribs: list[Any], item: str, rnd: random.Random, **caps: int
    ) -> None:
        """Adds in random order, then retractions of a random subset in random order, give
        the rows of a merger that only ever saw the rest."""
        gone = [c for c in contribs if rnd.random() < 0.4]
        m, fresh = MiniMerger(**caps), MiniMerger(**caps)
        for c in rnd.sample(contribs, len(contribs)):
            getattr(m, item)(c)
        for c in rnd.sample(gone, len(gone)):
            getattr(m, item)(c, retract=True)
        for c in contribs:
            if c not in gone:
                getattr(fresh, item)(c)
        assert m.graph() == fresh.graph()

    @settings(max_examples=40, deadline=None)
    @given(picks, st.randoms(use_true_random=False))
    def test_relationship_descriptions(self, picks: list[int], rnd: random.Random) -> None:
        contribs = [rc(i, descriptions=(f"d{p}",)) for i, p in enumerate(picks)]
        self._shuffled_against_fresh(contribs, "relationship_item", rnd, max_descriptions=3)

    @settings(max_examples=40, deadline=None)
    @given(picks, st.randoms(use_true_random=False))
    def test_claims(self, picks: list[int], rnd: random.Random) -> None:
        contribs = [cc(i, f"claim {p}", f"claim {(p * 7) % 12}") for i, p in enumerate(picks)]
        self._shuffled_against_fresh(contribs, "claim_item", rnd, max_claims=3)

    def test_a_re_extraction_that_drops_a_kept_description_refolds_too(self) -> None:
        contribs = [ec(i, descriptions=(f"description {i}",)) for i in range(10)]
        kept = fold_entity(contribs, cap=3)
        assert kept is not None and kept.descriptions.overflow == 7
        first_kept = kept.descriptions.values()[0]
        chunk = next(c for c in contribs if c.descriptions == (first_kept,))
        redone = replace(chunk, descriptions=("a later reading",))
        m = MiniMerger(max_descriptions=3)
        for c in contribs:
            m.entity_item(c)
        m.entity_item(redone)  # the same chunk extracted again, differently
        expected = fold_entity([redone if c is chunk else c for c in contribs], cap=3)
        got = m.entities["acme"]
        assert expected is not None and observable(got) == observable(expected)
        assert first_kept not in got.descriptions.values()

    def test_without_the_refold_a_freed_place_goes_to_whatever_comes_next(self) -> None:
        """The case the refold exists for: the step says so exactly when a kept value leaves
        a sample that left values out."""
        contribs = [ec(i, descriptions=(f"description {i}",)) for i in range(6)]
        rows = {c.chunk_id: c for c in contribs}
        agg = fold_entity(contribs, cap=3)
        assert agg is not None
        kept, dropped = (
            agg.descriptions.values(),
            [c for c in contribs if c.descriptions[0] not in agg.descriptions.values()],
        )
        for c in contribs:
            step = release_entity(EntityRows(agg, rows[c.chunk_id], 1))
            assert step.resample == (c.descriptions[0] in kept), c
        step = release_entity(EntityRows(agg, dropped[0], 1))
        assert not step.resample and step.rows.aggregate is not None
        assert step.rows.aggregate.descriptions.overflow == 2


class TestOrderIndependence:
    @settings(max_examples=60, deadline=None)
    @given(contribs_strategy, st.randoms(use_true_random=False))
    def test_any_order_gives_the_same_entity(self, raw: Any, rnd: random.Random) -> None:
        contribs = _entity_list(raw)
        shuffled = contribs[:]
        rnd.shuffle(shuffled)
        a, b = fold_entity(contribs), fold_entity(shuffled)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert observable(a) == observable(b)
            assert description_fingerprint(a) == description_fingerprint(b)

    @settings(max_examples=30, deadline=None)
    @given(st.permutations(range(40)))
    def test_distinct_descriptions_beyond_the_cap_keep_the_same_sample(
        self, order: list[int]
    ) -> None:
        contribs = [ec(i, descriptions=(f"description {i}",)) for i in range(40)]
        a = fold_entity(contribs, cap=5)
        b = fold_entity([contribs[i] for i in order], cap=5)
        assert a is not None and b is not None
        assert a.descriptions == b.descriptions
        assert a.descriptions.overflow == 35

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(0, 11), min_size=1, max_size=40), st.randoms(use_true_random=False))
    def test_repeated_descriptions_beyond_the_cap_keep_the_same_sample(
        self, picks: list[int], rnd: random.Random
    ) -> None:
        """A description confirmed by several chunks beyond the cap: the kept set and its
        counts are those of the evidence, whatever order the chunks arrive in (a replay
        after a crash interleaves the chunk partitions differently)."""
        contribs = [ec(i, descriptions=(f"description {p}",)) for i, p in enumerate(picks)]
        shuffled = contribs[:]
        rnd.shuffle(shuffled)
        a, b = fold_entity(contribs, cap=4), fold_entity(shuffled, cap=4)
        assert a is not None and b is not None
        assert a.descriptions == b.descriptions
        assert a.descriptions.total == len(picks)
        live = Counter(f"description {p}" for p in picks)
        kept = sorted(live, key=rank)[:4]  # the bottom-k of the distinct values, exact counts
        assert dict(a.descriptions.items) == {v: live[v] for v in kept}

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(0, 11), min_size=1, max_size=40), st.randoms(use_true_random=False))
    def test_repeated_claims_beyond_the_cap_keep_the_same_facts(
        self, picks: list[int], rnd: random.Random
    ) -> None:
        contribs = [cc(i, f"claim {p}") for i, p in enumerate(picks)]
        shuffled = contribs[:]
        rnd.shuffle(shuffled)
        a = b = None
        for c in contribs:
            a = apply_claims(a, c, max_claims=3)
        for c in shuffled:
            b = apply_claims(b, c, max_claims=3)
        assert a == b

    @settings(max_examples=30, deadline=None)
    @given(st.permutations(range(30)))
    def test_day_window_beyond_its_cap_is_order_independent(self, order: list[int]) -> None:
        w1, w2 = DayWindow(), DayWindow()
        for i in range(30):
            w1 = day_add(w1, 1000 + i, cap=10)
        for i in order:
            w2 = day_add(w2, 1000 + i, cap=10)
        assert w1 == w2
        assert [d for d, _ in w1.days] == list(range(1020, 1030))
        assert (w1.older, w1.older_first, w1.older_last) == (20, 1000, 1019)

    def test_relationship_order_independent(self) -> None:
        cs = [rc(i, strength=1 + i % 10, day=i % 7, descriptions=(f"d{i % 4}",)) for i in range(20)]
        fwd = rev = None
        for c in cs:
            fwd = apply_relationship(fwd, c, max_descriptions=CAP)
        for c in reversed(cs):
            rev = apply_relationship(rev, c, max_descriptions=CAP)
        assert fwd == rev


# ---- aggregate rules ------------------------------------------------------------------------
class TestAggregateRules:
    def test_type_is_the_majority_with_alphabetical_tie_break(self) -> None:
        agg = fold_entity([ec(1, type="person"), ec(2, type="organization")])
        assert agg is not None and agg.type == "organization"
        agg = fold_entity([ec(1, type="person"), ec(2, type="organization"), ec(3, type="person")])
        assert agg is not None and agg.type == "person"

    def test_name_is_the_most_frequent_display_name(self) -> None:
        agg = fold_entity([ec(1, name="ACME"), ec(2, name="Acme"), ec(3, name="Acme")])
        assert agg is not None and agg.name == "Acme"

    def test_description_cap_keeps_the_smallest_ranks_with_exact_counts(self) -> None:
        confirmed = [ec(i, descriptions=(f"confirmed {i % 3}",)) for i in range(6)]
        newcomers = [ec(10 + i, descriptions=(f"once {i}",)) for i in range(20)]
        full = fold_entity(confirmed + newcomers, cap=3)
        assert full is not None
        live = Counter(d for c in confirmed + newcomers for d in c.descriptions)
        kept = sorted(live, key=rank)[:3]
        assert dict(full.descriptions.items) == {v: live[v] for v in kept}
        assert full.descriptions.total == 26  # what is not kept is still counted
        assert fold_entity(newcomers + confirmed, cap=3) == full

    def test_display_names_beyond_the_cap_keep_the_most_supported(self) -> None:
        confirmed = [ec(i, name=f"Acme {i % 2}") for i in range(4)]
        variants = [ec(10 + i, name=f"Acme variant {i}") for i in range(12)]
        agg = fold_entity(confirmed + variants)
        assert agg is not None
        assert {"Acme 0", "Acme 1"} <= set(agg.names.values())
        assert agg.name == "Acme 0" and agg.names.total == 16

    def test_document_count_exact_through_retractions(self) -> None:
        m = MiniMerger()
        for c in (ec(1, doc="A"), ec(2, doc="A"), ec(3, doc="B")):
            m.entity_item(c)
        assert m.entities["acme"].document_count == 2
        m.entity_retraction("acme", "chunk-1", "A")
        assert m.entities["acme"].document_count == 2
        m.entity_retraction("acme", "chunk-2", "A")
        assert m.entities["acme"].document_count == 1
        assert document_key("acme", "A") not in m.doc_counters
        assert document_chunk_added(None) == (1, True)
        assert document_chunk_removed(2) == (1, False)

    def test_first_and_last_seen_move_back_on_retraction(self) -> None:
        m = MiniMerger()
        for c in (ec(1, day=0), ec(2, day=5), ec(3, day=9), ec(4, day=9)):
            m.entity_item(c)
        agg = m.entities["acme"]
        assert (agg.first_seen, agg.last_seen) == (DAY0, DAY0 + timedelta(days=9))
        m.entity_retraction("acme", "chunk-1", "d1")
        m.entity_retraction("acme", "chunk-4", "d1")
        assert m.entities["acme"].first_seen == DAY0 + timedelta(days=5)
        assert m.entities["acme"].last_seen == DAY0 + timedelta(days=9)
        m.entity_retraction("acme", "chunk-3", "d1")
        assert m.entities["acme"].last_seen == DAY0 + timedelta(days=5)
        assert m.entities["acme"].days.per_day() == {DAY0 + timedelta(days=5): 1}

    def test_strength_mean_is_exact_through_retraction(self) -> None:
        cs = [rc(1, strength=1), rc(2, strength=2), rc(3, strength=2)]
        agg = None
        for c in cs:
            agg = apply_relationship(agg, c, max_descriptions=CAP)
        assert agg is not None and agg.strength == pytest.approx(5 / 3)
        agg = retract_relationship(agg, cs[0])
        assert agg is not None and agg.strength == 2.0 and agg.weight == 2

    def test_fingerprint_changes_with_the_description_set_only(self) -> None:
        one = fold_entity([ec(1, descriptions=("x",))])
        repeated = fold_entity([ec(1, descriptions=("x",)), ec(2, descriptions=("x",))])
        other = fold_entity([ec(1, descriptions=("x",)), ec(2, descriptions=("y",))])
        assert one and repeated and other
        assert description_fingerprint(one) == description_fingerprint(repeated)
        assert description_fingerprint(one) != description_fingerprint(other)
        c1 = apply_claims(None, cc(1, "x"))
        assert claims_fingerprint(c1) != claims_fingerprint(apply_claims(c1, cc(2, "y")))

    def test_contribution_for_another_key_is_refused(self) -> None:
        agg = apply_entity(None, ec(1), max_descriptions=CAP, opens_document=True)
        stranger = EntityContribution("globex", "Globex", "org", (), "c", "d", DAY0)
        with pytest.raises(InvalidContributionError):
            apply_entity(agg, stranger, max_descriptions=CAP, opens_document=True)


class TestBounds:
    def test_hub_entity_row_stays_a_few_kilobytes(self) -> None:
        rnd = random.Random(7)
        agg: EntityAggregate | None = None
        for i in range(10_000):
            c = EntityContribution(
                key="federal reserve",
                name=rnd.choice(["Federal Reserve", "FEDERAL RESERVE", "the Federal Reserve"]),
                type=rnd.choice(["organization", "organization", "geo"]),
                descriptions=(
                    f"The Federal Reserve, the U.S. central bank, said in report {i} "
                    "that it would keep rates unchanged.",
                ),
                chunk_id=f"chunk-{i:032x}",
                document_id=f"reuters-{i % 3000}",
                day=DAY0 + timedelta(days=i % 730),
            )
            agg = apply_entity(agg, c, max_descriptions=CAP, opens_document=i < 3000)
        assert agg is not None
        size = len(orjson.dumps(to_dict(agg)))
        assert agg.mention_count == 10_000 and agg.document_count == 3000
        assert len(agg.days.days) == MAX_DAYS and agg.days.older > 0
        assert agg.descriptions.total == 10_000
        assert size < 4096, size

    def test_tally_at_cap_keeps_totals_exact_and_loses_only_detail(self) -> None:
        t = Tally()
        for v in ["a", "b", "c"]:
            t = tally_add(t, v, cap=2)
        assert len(t.items) == 2 and t.total == 3
        for v in ["a", "b", "c"]:
            t = tally_remove(t, v)
        assert t == Tally()
        with pytest.raises(RetractionError):
            tally_remove(t, "a")

    def test_day_window_folds_old_days_and_first_seen_stays_a_lower_bound(self) -> None:
        w = DayWindow()
        for d in (10, 20, 30, 40):
            w = day_add(w, DAY0.toordinal() + d, cap=2)
        assert w.first_seen == DAY0 + timedelta(days=10)
        assert w.per_day() == {DAY0 + timedelta(days=30): 1, DAY0 + timedelta(days=40): 1}
        w = day_remove(w, DAY0.toordinal() + 10)
        # the day-10 mention left the window; the bucket still spans days 10-20 until empty
        assert (w.older, w.first_seen) == (1, DAY0 + timedelta(days=10))
        w = day_remove(w, DAY0.toordinal() + 20)
        assert w.first_seen == DAY0 + timedelta(days=30) and w.older_first is None


# ---- graph changes and serialisation --------------------------------------------------------
def _samples() -> dict[str, Any]:
    m = MiniMerger()
    for x in _stream():
        m.extraction(x)
    bundle = chunk_contributions(_stream()[0])
    return {
        "entity_contribution": bundle.entities[0],
        "relationship_contribution": bundle.relationships[0],
        "claim_contribution": bundle.claims[0],
        "manifest": bundle.manifest,
        "entity": m.entities["acme"],
        "relationship": next(iter(m.relationships.values())),
        "claims": m.claims["acme"],
        "changes": m.changes,
    }


CODECS = [  # (sample, record type)
    ("entity_contribution", EntityContribution),
    ("relationship_contribution", RelationshipContribution),
    ("claim_contribution", ClaimContribution),
    ("manifest", ChunkManifest),
    ("entity", EntityAggregate),
    ("relationship", RelationshipAggregate),
    ("claims", ClaimAggregate),
]


class TestGraphChangesAndCodec:
    @pytest.mark.parametrize(("name", "cls"), CODECS, ids=[c[0] for c in CODECS])
    def test_round_trip_through_orjson(self, name: str, cls: type) -> None:
        record = _samples()[name]
        back = from_dict(cls, orjson.loads(orjson.dumps(to_dict(record))))
        assert back == record
        assert getattr(back, "version", 0) == getattr(record, "version", 0)

    def test_every_published_change_round_trips(self) -> None:
        changes = _samples()["changes"]
        assert any(c.text_unit is not None for c in changes)
        for c in changes:
            assert from_dict(GraphChange, orjson.loads(orjson.dumps(to_dict(c)))) == c

    def test_day_window_beyond_cap_round_trips(self) -> None:
        agg = None
        for i in range(MAX_DAYS + 5):
            agg = apply_entity(agg, ec(i, day=i * 3), max_descriptions=CAP, opens_document=i == 0)
        assert agg is not None and agg.days.older == 5
        assert from_dict(EntityAggregate, to_dict(agg)) == agg

    @pytest.mark.parametrize(
        "mutate",
        [
            lambda d: d.pop("key"),
            lambda d: d.update(mention_count="3"),
            lambda d: d.update(mention_count=True),
            lambda d: d["descriptions"].update(counts={"x": 0}),
            lambda d: d["days"].update(deltas_counts=[1]),
            lambda d: d["days"].update({"from": "yesterday"}),
        ],
    )
    def test_corrupt_rows_raise_a_decode_error(self, mutate: Any) -> None:
        data = to_dict(_samples()["entity"])
        mutate(data)
        with pytest.raises(RecordDecodeError) as info:
            from_dict(EntityAggregate, data)
        assert info.value.kind == "EntityAggregate"

    def test_non_object_and_bad_enum_are_refused(self) -> None:
        with pytest.raises(RecordDecodeError):
            from_dict(GraphChange, [1, 2])
        bad = to_dict(text_unit_retracted("c", "d"))
        bad["mode"] = "magic"
        with pytest.raises(RecordDecodeError):
            from_dict(GraphChange, bad)

    def test_change_builders_mark_deletions(self) -> None:
        agg = apply_entity(None, ec(1), max_descriptions=CAP, opens_document=True)
        up = entity_changed("acme", agg, chunk_id="c", document_id="d", retraction=False)
        gone = entity_changed("acme", None, chunk_id="c", document_id="d", retraction=True)
        assert up.entities == (agg,) and not up.deleted_entities
        assert gone.deleted_entities == ("acme",) and gone.retraction
        rel = relationship_changed("k", None, chunk_id="c", document_id="d", retraction=True)
        assert rel.deleted_relationships == ("k",)
        cl = claims_changed("acme", None, chunk_id="c", document_id="d", retraction=True)
        assert cl.deleted_claims == ("acme",)
        x = _stream()[0]
        added = text_unit_added(x)
        assert added.text_unit == x.chunk and added.mode == "offline"


class TestTallyOracle:
    """The bounded structures against a plain Counter of the live supports."""

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(st.booleans(), st.integers(0, 15)), max_size=80), st.integers(1, 20))
    def test_windows_and_tallies_track_live_supports(
        self, ops: list[tuple[bool, int]], cap: int
    ) -> None:
        live: list[int] = []
        w, t = DayWindow(), Tally()
        for add, value in ops:
            if add or not live:
                live.append(value)
                w, t = day_add(w, value + 1000, cap=cap), tally_add(t, str(value), cap=cap)
            else:
                gone = live.pop(value % len(live))
                w, t = day_remove(w, gone + 1000), tally_remove(t, str(gone))
            assert w.total == t.total == len(live)
        if len(set(live)) <= cap and w.older == 0 and t.overflow == 0:
            assert {d - 1000: c for d, c in w.days} == Counter(live)
            assert dict(t.items) == {str(k): c for k, c in Counter(live).items()}
