"""The type-driven codec (``graph.codec``) against the hand-written one it replaced.

The oracles (``*_oracle.py`` here) are the replaced modules, verbatim. For randomly built
records these properties must hold, or rows in Kafka changelogs, messages on topics and
snapshots written before the change would stop decoding, or decode differently:

- encoding gives the same plain values (same keys, order and Python types) and the same bytes;
- decoding what was encoded gives the record back (``version``, outside equality, included);
- decoding a corrupted form has the same outcome: the same record, or the same error type.

Two outcomes differ on purpose, and the tests say exactly where: a wrongly typed chunk in a
``chunks`` message crashed the old decoder with a bare TypeError and is now a PayloadError (a
dead letter); an extraction body is now checked against the mention types (the old decoder
let any value through), and a snapshot ``dict[str, int]`` column checks its values. Fields
added since (``ADDED_FIELDS``) are encoded as null in records that do not set them.
"""

from __future__ import annotations

import copy
import os
from datetime import date
from functools import partial
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import graph.versions.legacy_format as new_snapshots
import streams.codecs as new_streams
from graph.merge import codec as new
from graph.merge.aggregates import ClaimAggregate, EntityAggregate, RelationshipAggregate
from graph.merge.changes import GraphChange
from graph.merge.contributions import (
    ChunkManifest,
    ClaimContribution,
    ClaimFact,
    EntityContribution,
    RelationshipContribution,
)
from graph.merge.errors import RecordDecodeError
from graph.merge.tally import DayWindow, Tally
from graph.model import (
    Chunk,
    ChunkExtraction,
    ClaimMention,
    Document,
    EntityMention,
    RelationshipMention,
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
from tests.unit import merge_codec_oracle as old
from tests.unit import snapshots_oracle as old_snapshots
from tests.unit import stream_codecs_oracle as old_streams

# KGRAG_CODEC_EXAMPLES=5000 for a long soak; 150 keeps the unit suite quick
SETTINGS = settings(
    max_examples=int(os.environ.get("KGRAG_CODEC_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# ---- random records ---------------------------------------------------------------------
TEXT = st.text(max_size=8)
INT = st.integers(-(2**40), 2**40)
COUNT = st.integers(0, 10**6)
ORDINAL = st.integers(1, date.max.toordinal())
FLOAT = st.floats(allow_nan=False, allow_infinity=False)
STATUS = st.sampled_from(["TRUE", "FALSE", "SUSPECTED"])
MODE = st.sampled_from(["llm", "offline"])
JSON = st.recursive(
    st.none() | st.booleans() | INT | FLOAT | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def tuples(elements: st.SearchStrategy[Any], n: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(elements, max_size=n).map(tuple)


tallies = st.builds(
    lambda counts, overflow: Tally(tuple(sorted(counts.items())), overflow),
    st.dictionaries(TEXT, st.integers(1, 10**6), max_size=4),
    COUNT,
)
windows = st.builds(
    lambda days, older, first, last: DayWindow(tuple(sorted(days.items())), older, first, last),
    st.dictionaries(ORDINAL, st.integers(1, 10**6), max_size=5),
    COUNT,
    st.none() | ORDINAL,
    st.none() | ORDINAL,
)
chunks = st.builds(Chunk, TEXT, TEXT, TEXT, TEXT, INT, TEXT, INT)
facts = st.builds(
    ClaimFact,
    *(TEXT, TEXT, st.none() | TEXT, st.none() | TEXT, TEXT, STATUS),
    *(st.none() | TEXT, st.none() | TEXT, TEXT, TEXT),
)
entity_contributions = st.builds(
    EntityContribution, TEXT, TEXT, TEXT, tuples(TEXT), TEXT, TEXT, st.dates()
)
relationship_contributions = st.builds(
    RelationshipContribution,
    *(TEXT, TEXT, TEXT, TEXT, TEXT, tuples(TEXT), INT, TEXT, TEXT, st.dates()),
)
claim_contributions = st.builds(ClaimContribution, TEXT, tuples(facts), TEXT, TEXT, st.dates())
manifests = st.builds(ChunkManifest, TEXT, TEXT, tuples(TEXT), tuples(TEXT), tuples(TEXT))
entity_aggregates = st.builds(
    EntityAggregate, TEXT, tallies, tallies, tallies, INT, INT, windows, COUNT
)
relationship_aggregates = st.builds(
    RelationshipAggregate,
    *(TEXT, TEXT, TEXT, tallies, tallies, tallies, INT, INT, windows, COUNT),
)


@st.composite
def claim_aggregates(draw: st.DrawFn) -> ClaimAggregate:
    kept = {f.id: f for f in draw(st.lists(facts, max_size=3))}
    ids = sorted(kept)
    support = Tally(tuple((i, draw(st.integers(1, 99))) for i in ids), draw(COUNT))
    return ClaimAggregate(draw(TEXT), tuple(kept[i] for i in ids), support, draw(INT), draw(COUNT))


graph_changes = st.builds(
    GraphChange,
    *(TEXT, TEXT, st.booleans(), st.none() | chunks, st.none() | MODE),
    *(tuples(entity_aggregates, 2), tuples(TEXT), tuples(relationship_aggregates, 2)),
    *(tuples(TEXT), tuples(claim_aggregates(), 2), tuples(TEXT)),
)

RECORDS = {
    "entity_contribution": (entity_contributions, EntityContribution),
    "relationship_contribution": (relationship_contributions, RelationshipContribution),
    "claim_contribution": (claim_contributions, ClaimContribution),
    "chunk_manifest": (manifests, ChunkManifest),
    "entity_aggregate": (entity_aggregates, EntityAggregate),
    "relationship_aggregate": (relationship_aggregates, RelationshipAggregate),
    "claim_aggregate": (claim_aggregates(), ClaimAggregate),
    "graph_change": (graph_changes, GraphChange),
}


# ---- corruption -------------------------------------------------------------------------
JUNK = (
    st.sampled_from(
        [None, True, False, 0, 1, -1, 2.5, "", "x", "TRUE", "llm", "1987-03-01", [], [1, 2], {}]
    )
    | JSON
).map(copy.deepcopy)  # edits change lists in place: never hand out a shared constant


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) pair inside a decoded JSON value, depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, inner in list(items):
        out.append((value, key))
        if isinstance(inner, dict | list):
            _slots(inner, out)
    return out


@st.composite
def corrupted(draw: st.DrawFn, value: Any) -> Any:
    """``value`` (a JSON object) with one to three random edits: a key or item removed, a
    value replaced by junk, an unknown key or an extra item added; or replaced whole."""
    value = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(value, [])
        if not slots or draw(st.integers(0, 30)) == 0:
            return draw(JUNK)
        container, key = draw(st.sampled_from(slots))
        edit = draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        if edit == "delete":
            del container[key]
        elif edit == "replace":
            container[key] = draw(JUNK)
        elif isinstance(container, dict):
            container[draw(TEXT)] = draw(JUNK)
        else:
            container.append(draw(JUNK))
    return value


def outcome(decode: Any, data: Any, errors: type[Exception] | tuple[type[Exception], ...]) -> Any:
    """The decoded record's full repr (every field, with types), or the error type's name."""
    try:
        return repr(decode(data))
    except errors as e:
        return type(e).__name__


def same_plain_values(a: Any, b: Any) -> None:
    """Equal as stored: same keys in the same order, same Python types, same bytes."""
    assert repr(a) == repr(b)
    assert orjson.dumps(a) == orjson.dumps(b)


# ---- merge records ----------------------------------------------------------------------
# fields added since the oracle, None in every record the strategies build (old forms lack
# them and decode to None): a graph change's ``llm_tokens`` and ``claim_ids``
ADDED_FIELDS = {"graph_change": ("llm_tokens", "claim_ids")}


def without_added_fields(name: str, encoded: dict[str, Any]) -> dict[str, Any]:
    for added in ADDED_FIELDS.get(name, ()):
        assert encoded.pop(added) is None
    return encoded


@pytest.mark.parametrize("name", RECORDS)
@SETTINGS
@given(data=st.data())
def test_merge_record_encodes_as_before_and_round_trips(name: str, data: st.DataObject) -> None:
    strategy, cls = RECORDS[name]
    record = data.draw(strategy)
    stored = getattr(old, f"{name}_to_dict")(record)
    same_plain_values(without_added_fields(name, new.to_dict(record)), stored)
    back = new.from_dict(cls, orjson.loads(orjson.dumps(stored)))
    assert type(back) is cls and back == record and repr(back) == repr(record)


@pytest.mark.parametrize("name", RECORDS)
@SETTINGS
@given(data=st.data())
def test_corrupt_merge_record_decodes_as_before(name: str, data: st.DataObject) -> None:
    strategy, cls = RECORDS[name]
    stored = orjson.loads(orjson.dumps(getattr(old, f"{name}_to_dict")(data.draw(strategy))))
    bad = data.draw(corrupted(stored))
    before = outcome(getattr(old, f"{name}_from_dict"), copy.deepcopy(bad), RecordDecodeError)
    after = outcome(partial(new.from_dict, cls), bad, RecordDecodeError)
    assert after == before
    event("refused by both" if after == "RecordDecodeError" else "decoded alike")


def test_record_decode_error_names_the_record_asked_for() -> None:
    with pytest.raises(RecordDecodeError) as info:
        new.from_dict(GraphChange, {"chunk_id": "c", "document_id": 1})
    assert info.value.kind == "GraphChange" and "document_id" in info.value.reason


# ---- topic payloads ---------------------------------------------------------------------
@st.composite
def extractions(draw: st.DrawFn) -> ChunkExtraction:
    chunk = draw(chunks)
    cid = st.just(chunk.id)
    return ChunkExtraction(
        chunk,
        draw(tuples(st.builds(EntityMention, TEXT, TEXT, TEXT, cid))),
        draw(tuples(st.builds(RelationshipMention, TEXT, TEXT, TEXT, FLOAT, cid))),
        draw(
            tuples(
                st.builds(
                    ClaimMention,
                    *(TEXT, st.none() | TEXT, TEXT, STATUS, st.none() | TEXT),
                    *(st.none() | TEXT, TEXT, TEXT, cid),
                )
            )
        ),
        draw(MODE),
        draw(COUNT),
    )


contributions = entity_contributions | relationship_contributions | claim_contributions
ITEM_KIND = {
    EntityContribution: "entity",
    RelationshipContribution: "relationship",
    ClaimContribution: "claim",
}
documents = st.builds(
    Document, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, st.dictionaries(TEXT, JSON, max_size=3)
)
# (what is encoded, how it is encoded by a codecs module, how it is decoded)
PAYLOADS: dict[str, tuple[st.SearchStrategy[Any], Any, Any]] = {
    "chunk": (chunks, lambda m, x: m.encode_chunk_add(x), lambda m, raw: m.decode_chunk_event(raw)),
    "chunk_retraction": (
        st.tuples(TEXT, TEXT),
        lambda m, x: m.encode_retraction(*x),
        lambda m, raw: m.decode_chunk_event(raw),
    ),
    "extraction": (
        extractions(),
        lambda m, x: m.encode_extraction(x),
        lambda m, raw: m.decode_extraction_event(raw),
    ),
    "item": (
        contributions,
        lambda m, x: m.encode_item(x),
        lambda m, raw, kind: m.decode_item(raw, kind),
    ),
    "item_retraction": (
        st.tuples(TEXT, TEXT, TEXT),
        lambda m, x: m.encode_item_retraction(*x),
        lambda m, raw: m.decode_item(raw, "claim"),
    ),
    "change": (
        graph_changes,
        lambda m, x: m.encode_change(x),
        lambda m, raw: m.decode_graph_change(raw),
    ),
    "document": (
        documents,
        lambda m, x: m.encode_document(x),
        lambda m, raw: m.decode_graph_change(raw),
    ),
}


def _decoder(name: str, module: Any, value: Any) -> Any:
    decode = PAYLOADS[name][2]
    if name == "item":
        return lambda raw: decode(module, raw, ITEM_KIND[type(value)])
    return lambda raw: decode(module, raw)


@pytest.mark.parametrize("name", PAYLOADS)
@SETTINGS
@given(data=st.data())
def test_payload_encodes_as_before_and_round_trips(name: str, data: st.DataObject) -> None:
    strategy, encode, _ = PAYLOADS[name]
    value = data.draw(strategy)
    raw = encode(old_streams, value)
    if name == "change":
        encoded = orjson.loads(encode(new_streams, value))
        encoded["change"] = without_added_fields("graph_change", encoded["change"])
        assert orjson.dumps(encoded) == raw
    else:
        assert encode(new_streams, value) == raw
    before = _decoder(name, old_streams, value)(raw)
    after = _decoder(name, new_streams, value)(raw)
    assert repr(after) == repr(before)
    if name in ("chunk", "extraction", "item", "change"):
        assert after == value and repr(after) == repr(value)


@pytest.mark.parametrize("name", PAYLOADS)
@SETTINGS
@given(data=st.data())
def test_corrupt_payload_decodes_as_before(name: str, data: st.DataObject) -> None:
    strategy, encode, _ = PAYLOADS[name]
    value = data.draw(strategy)
    bad = orjson.dumps(data.draw(corrupted(orjson.loads(encode(old_streams, value)))))
    try:
        before: Any = repr(_decoder(name, old_streams, value)(bad))
    except old_streams.PayloadError:
        before = "PayloadError"
    except (TypeError, ValueError, AttributeError) as e:
        before = e  # the old decoder crashed instead of routing the message
    after = outcome(_decoder(name, new_streams, value), bad, new_streams.PayloadError)
    if isinstance(before, Exception):
        # only a chunk could crash it; now a dead letter
        assert name in ("chunk", "chunk_retraction") and after == "PayloadError", before
        event("old crashed, now PayloadError")
    elif name == "extraction" and after == "PayloadError" and before != after:
        event("old let a wrong type through, now PayloadError")
    else:
        assert after == before
        event("refused by both" if after == "PayloadError" else "decoded alike")


def test_old_extraction_decoder_was_laxer_than_the_types() -> None:
    chunk = orjson.loads(new_streams.encode_chunk_add(Chunk("c", "d", "t", "p", 0, "x", 1)))
    body = {"chunk": chunk["chunk"], "entities": [[1, 2, 3]], "relationships": []}
    raw = orjson.dumps({"op": "add", "extraction": {**body, "claims": []}})
    assert old_streams.decode_extraction_event(raw).entities[0].name == 1  # type: ignore[union-attr]
    with pytest.raises(new_streams.PayloadError, match="name"):
        new_streams.decode_extraction_event(raw)


# ---- snapshots --------------------------------------------------------------------------
def ids(n: int = 3) -> st.SearchStrategy[tuple[str, ...]]:
    return tuples(TEXT, n)


per_day = tuples(st.tuples(TEXT, INT))
snapshot_rows: dict[str, st.SearchStrategy[Any]] = {
    "entities": st.builds(
        SnapshotEntity, TEXT, INT, TEXT, TEXT, TEXT, ids(), INT, INT, INT, TEXT, TEXT, per_day
    ),
    "relationships": st.builds(
        SnapshotRelationship,
        *(TEXT, INT, TEXT, TEXT, TEXT, FLOAT, INT, ids(), TEXT, TEXT, FLOAT, TEXT, TEXT),
    ),
    "communities": st.builds(
        SnapshotCommunity,
        *(TEXT, INT, INT, INT, INT, tuples(INT), TEXT, ids(), ids(), ids(), TEXT, INT),
        *(per_day, FLOAT, tuples(st.tuples(INT, INT))),
    ),
    "community_reports": st.builds(
        SnapshotReport,
        *(TEXT, INT, INT, INT, INT, tuples(INT), TEXT, TEXT, TEXT, FLOAT, TEXT),
        *(tuples(st.dictionaries(TEXT, TEXT, max_size=2)), TEXT, TEXT, INT, TEXT, FLOAT, INT),
    ),
    "text_units": st.builds(
        SnapshotTextUnit, TEXT, INT, TEXT, INT, TEXT, ids(), ids(), ids(), TEXT, TEXT
    ),
    "documents": st.builds(
        SnapshotDocument, TEXT, INT, TEXT, TEXT, ids(), TEXT, st.dictionaries(TEXT, JSON)
    ),
    "claims": st.builds(
        SnapshotClaim,
        *(TEXT, INT, TEXT, TEXT, TEXT, TEXT, st.none() | TEXT, TEXT, st.none() | TEXT),
        *(st.none() | TEXT, TEXT, TEXT),
    ),
}
metas = st.builds(
    SnapshotMeta,
    *(INT, TEXT, TEXT, st.dictionaries(TEXT, INT, max_size=3)),
    *(st.dictionaries(TEXT, INT, max_size=3), TEXT, INT, FLOAT, FLOAT),
)
snapshots = st.builds(Snapshot, metas, **{t: tuples(s, 2) for t, s in snapshot_rows.items()})


@SETTINGS
@given(snapshot=snapshots)
def test_snapshot_encodes_as_before_and_round_trips(snapshot: Snapshot) -> None:
    tables = old_snapshots.snapshot_to_tables(snapshot)
    assert new_snapshots.snapshot_to_tables(snapshot) == tables
    back = new_snapshots.snapshot_from_tables(tables)
    assert back == snapshot and repr(back) == repr(snapshot)
    assert repr(back) == repr(old_snapshots.snapshot_from_tables(tables))


def _snapshot_outcome(module: Any, tables: dict[str, bytes]) -> Any:
    try:
        return repr(module.snapshot_from_tables(tables))
    except module.SnapshotFormatError as e:
        return (e.table, e.line)


@SETTINGS
@given(data=st.data())
def test_corrupt_snapshot_row_decodes_as_before(data: st.DataObject) -> None:
    snapshot = data.draw(snapshots)
    tables = old_snapshots.snapshot_to_tables(snapshot)
    names = [f for f, payload in tables.items() if payload.strip()]
    name = data.draw(st.sampled_from(names))
    lines = tables[name].split(b"\n")
    line = data.draw(st.integers(0, max(0, len(lines) - 2)))
    row = orjson.loads(lines[line])
    bad = data.draw(corrupted(row["meta"] if name == "meta.json" else row))
    if name == "meta.json":
        row["meta"] = bad
        bad = row
    lines[line] = orjson.dumps(bad)
    tables[name] = b"\n".join(lines)
    before = _snapshot_outcome(old_snapshots, tables)
    after = _snapshot_outcome(new_snapshots, tables)
    if isinstance(after, tuple) and not isinstance(before, tuple):
        # only a dict[str, int] column, whose values the old decoder did not check
        with pytest.raises(
            new_snapshots.SnapshotFormatError, match=r"field '\w+': (item \d+: )?key "
        ):
            new_snapshots.snapshot_from_tables(tables)
        event("old let a wrong dict value through, now refused")
    else:
        assert after == before
        event("refused by both" if isinstance(after, tuple) else "decoded alike")


def test_old_snapshot_decoder_did_not_check_dict_values() -> None:
    meta = SnapshotMeta(1, "", "", counts={"entities": 0})
    tables = old_snapshots.snapshot_to_tables(Snapshot(meta, (), (), (), (), (), ()))
    tables["meta.json"] = tables["meta.json"].replace(b'{"entities":0}', b'{"entities":"0"}')
    assert old_snapshots.snapshot_from_tables(tables).meta.counts == {"entities": "0"}
    with pytest.raises(new_snapshots.SnapshotFormatError, match="field 'counts': key 'entities'"):
        new_snapshots.snapshot_from_tables(tables)
