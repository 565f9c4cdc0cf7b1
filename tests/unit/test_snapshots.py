"""Snapshot codec: exact round trip, tolerant of additive schema change, loud on corruption."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from graph.errors import GraphError
from graph.versions.legacy_format import (
    META_FILE,
    SnapshotFormatError,
    snapshot_files,
    snapshot_from_tables,
    snapshot_to_tables,
)
from graph.versions.model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)


def make_snapshot(version: int = 7) -> Snapshot:
    """Two entities, one edge, a two-level hierarchy, one claim: every field type in use."""
    meta = SnapshotMeta(
        version=version,
        created_at="2024-05-01T12:00:00Z",
        newest_document_time="1987-03-02T00:00:00Z",
        counts={"entities": 2, "relationships": 1},
        consumed_offsets={"graph-changes:0": 41, "graph-changes:1": 7},
        mode="llm",
        reports_regenerated=2,
        unreflected_max=0.125,
        unreflected_mean=0.0625,
    )
    entities = (
        SnapshotEntity(
            id="bank of japan",
            human_readable_id=0,
            title="BANK OF JAPAN",
            type="organization",
            description="Japan's central bank.",
            text_unit_ids=("chunk-a", "chunk-b"),
            frequency=2,
            degree=1,
            document_count=2,
            first_seen="1987-03-01",
            last_seen="1987-03-02",
            mentions_per_day=(("1987-03-01", 1), ("1987-03-02", 1)),
        ),
        SnapshotEntity(
            id="yen",
            human_readable_id=1,
            title="YEN",
            type="currency",
            description='Ünïcode — "quoted"\nnewline',
            text_unit_ids=("chunk-a",),
            frequency=1,
            degree=1,
        ),
    )
    rel = SnapshotRelationship(
        id="bank of japan\u241eyen",
        human_readable_id=0,
        source="BANK OF JAPAN",
        target="YEN",
        description="intervened to support the yen",
        weight=2.0,
        combined_degree=2,
        text_unit_ids=("chunk-a",),
        source_id="bank of japan",
        target_id="yen",
        strength=7.5,
    )
    parent = SnapshotCommunity(
        id="c-top",
        human_readable_id=0,
        community=0,
        level=0,
        parent=-1,
        children=(1,),
        title="Currency markets",
        entity_ids=("bank of japan", "yen"),
        relationship_ids=(rel.id,),
        text_unit_ids=("chunk-a", "chunk-b"),
        period="1987-03-02",
        size=2,
        mentions_per_day=(("1987-03-01", 2),),
        emerging_score=1.5,
    )
    child = dataclasses.replace(
        parent, id="c-sub", human_readable_id=1, community=1, level=1, parent=0, children=()
    )
    report = SnapshotReport(
        id="c-top",
        human_readable_id=0,
        community=0,
        level=0,
        parent=-1,
        children=(1,),
        title="Yen support",
        summary="The BoJ bought yen.",
        full_content="# Yen support\n...",
        rank=6.5,
        rating_explanation="market moving",
        findings=({"summary": "BoJ intervened", "explanation": "It bought yen [Data: ...]"},),
        full_content_json='{"title": "Yen support"}',
        period="1987-03-02",
        size=2,
        mode="llm",
        unreflected=0.1,
        generated_in=5,
    )
    unit = SnapshotTextUnit(
        id="chunk-a",
        human_readable_id=0,
        text="The Bank of Japan bought yen.",
        n_tokens=8,
        document_id="doc-1",
        entity_ids=("bank of japan", "yen"),
        relationship_ids=(rel.id,),
        covariate_ids=("claim-1",),
        published_at="1987-03-01T00:00:00Z",
        title="Yen",
    )
    doc = SnapshotDocument(
        id="doc-1",
        human_readable_id=0,
        title="Yen",
        text="The Bank of Japan bought yen.",
        text_unit_ids=("chunk-a",),
        creation_date="1987-03-01T00:00:00Z",
        raw_data={"topics": ["money-fx"], "places": ["japan"], "n": 3},
    )
    claim = SnapshotClaim(
        id="claim-1",
        human_readable_id=0,
        covariate_type="claim",
        type="INTERVENTION",
        description="BoJ bought yen",
        subject_id="BANK OF JAPAN",
        object_id=None,
        status="TRUE",
        start_date="1987-03-01",
        end_date=None,
        source_text="bought yen",
        text_unit_id="chunk-a",
    )
    return Snapshot(
        meta=meta,
        entities=entities,
        relationships=(rel,),
        communities=(parent, child),
        community_reports=(report,),
        text_units=(unit,),
        documents=(doc,),
        claims=(claim,),
    )


def _roundtrip(s: Snapshot) -> Snapshot:
    return snapshot_from_tables(snapshot_to_tables(s))


def _rewrite_line(tables: dict[str, bytes], name: str, line: int, edit: dict) -> None:
    lines = tables[name].split(b"\n")
    row = orjson.loads(lines[line])
    row.update(edit)
    lines[line] = orjson.dumps(row)
    tables[name] = b"\n".join(lines)


class TestRoundTrip:
    def test_every_table_and_field_survives(self) -> None:
        s = make_snapshot()
        back = _roundtrip(s)
        assert back == s
        # fields excluded from dataclass equality are compared by hand
        assert back.meta.counts == s.meta.counts
        assert back.meta.consumed_offsets == s.meta.consumed_offsets
        assert back.documents[0].raw_data == s.documents[0].raw_data

    def test_nested_tuples_come_back_as_tuples(self) -> None:
        back = _roundtrip(make_snapshot())
        assert back.entities[0].mentions_per_day == (("1987-03-01", 1), ("1987-03-02", 1))
        assert isinstance(back.communities[0].children, tuple)
        assert isinstance(back.community_reports[0].findings, tuple)

    def test_empty_snapshot(self) -> None:
        s = Snapshot(
            meta=SnapshotMeta(version=1, created_at="", newest_document_time=""),
            entities=(),
            relationships=(),
            communities=(),
            community_reports=(),
            text_units=(),
            documents=(),
        )
        assert _roundtrip(s) == s

    def test_encoding_is_deterministic(self) -> None:
        assert snapshot_to_tables(make_snapshot()) == snapshot_to_tables(make_snapshot())

    def test_one_file_per_table_plus_meta(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        assert tuple(tables) == snapshot_files()
        assert tables["entities.jsonl"].count(b"\n") == 2
        assert orjson.loads(tables[META_FILE])["meta"]["version"] == 7


class TestSchemaEvolution:
    def test_missing_optional_field_takes_its_default(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        lines = tables["entities.jsonl"].split(b"\n")
        row = orjson.loads(lines[0])
        del row["mentions_per_day"], row["document_count"]
        lines[0] = orjson.dumps(row)
        tables["entities.jsonl"] = b"\n".join(lines)
        entity = snapshot_from_tables(tables).entities[0]
        assert entity.mentions_per_day == ()
        assert entity.document_count == 0

    def test_unknown_field_from_a_newer_writer_is_ignored(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        _rewrite_line(tables, "relationships.jsonl", 0, {"added_later": [1, 2]})
        assert snapshot_from_tables(tables) == make_snapshot()


class TestCorruption:
    def test_is_a_graph_error(self) -> None:
        assert issubclass(SnapshotFormatError, GraphError)

    def test_bad_json_names_table_and_line(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        lines = tables["communities.jsonl"].split(b"\n")
        lines[1] = lines[1][:20]
        tables["communities.jsonl"] = b"\n".join(lines)
        with pytest.raises(SnapshotFormatError) as info:
            snapshot_from_tables(tables)
        assert (info.value.table, info.value.line) == ("communities", 2)
        assert "communities line 2" in str(info.value)

    @pytest.mark.parametrize(
        ("edit", "needle"),
        [
            ({"frequency": "many"}, "frequency"),
            ({"degree": True}, "degree"),
            ({"text_unit_ids": "chunk-a"}, "text_unit_ids"),
            ({"mentions_per_day": [["1987-03-01"]]}, "mentions_per_day"),
        ],
    )
    def test_wrong_type_names_the_field(self, edit: dict, needle: str) -> None:
        tables = snapshot_to_tables(make_snapshot())
        _rewrite_line(tables, "entities.jsonl", 1, edit)
        with pytest.raises(SnapshotFormatError, match=needle) as info:
            snapshot_from_tables(tables)
        assert (info.value.table, info.value.line) == ("entities", 2)

    def test_missing_required_field(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        lines = tables["claims.jsonl"].split(b"\n")
        row = orjson.loads(lines[0])
        del row["status"]
        lines[0] = orjson.dumps(row)
        tables["claims.jsonl"] = b"\n".join(lines)
        with pytest.raises(SnapshotFormatError, match="status") as info:
            snapshot_from_tables(tables)
        assert info.value.table == "claims"

    def test_truncated_table_is_caught_by_the_row_count(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        tables["entities.jsonl"] = tables["entities.jsonl"].split(b"\n")[0] + b"\n"
        with pytest.raises(SnapshotFormatError, match="declares 2 rows") as info:
            snapshot_from_tables(tables)
        assert info.value.table == "entities"

    def test_missing_table_file(self) -> None:
        tables = snapshot_to_tables(make_snapshot())
        del tables["text_units.jsonl"]
        with pytest.raises(SnapshotFormatError, match="text_units"):
            snapshot_from_tables(tables)

    @pytest.mark.parametrize("meta", [b"", b"[]", b'{"format": 99, "meta": {}}'])
    def test_bad_meta(self, meta: bytes) -> None:
        tables = snapshot_to_tables(make_snapshot())
        tables[META_FILE] = meta
        with pytest.raises(SnapshotFormatError) as info:
            snapshot_from_tables(tables)
        assert info.value.table == "meta"

    def test_unencodable_raw_data_is_a_typed_error(self) -> None:
        s = make_snapshot()
        doc = dataclasses.replace(s.documents[0], raw_data={"bad": object()})
        with pytest.raises(SnapshotFormatError, match="documents"):
            snapshot_to_tables(dataclasses.replace(s, documents=(doc,)))


def test_a_report_read_without_its_markdown_builds_the_same_from_its_parts() -> None:
    """The query index leaves ``full_content`` unread (``QUERY_OMITS``); ``body`` must give
    back exactly what the writer stored."""
    from graph.communities.human_ids import HumanIds
    from graph.job.version_tables import report_record
    from graph.model import Community

    community = Community("c-1", 0, None, (), frozenset({"bank of japan", "yen"}))
    ids = HumanIds.empty().assign("community", ["c-1"])
    content = {
        "title": "Yen support",
        "summary": "The Bank of Japan bought yen.",
        "rating": 6.5,
        "findings": [{"summary": "BoJ intervened", "explanation": "It bought yen [Data: 1]"}],
    }
    stored = report_record(community, content, ids=ids, period="1987-03", mode="llm", version=3)
    assert stored.full_content.startswith("# Yen support")
    assert dataclasses.replace(stored, full_content="").body() == stored.full_content
