"""Export a snapshot as Microsoft GraphRAG output tables (parquet), so its tools can read it.

Columns, order and names are those of GraphRAG 3.x ``graphrag/data_model/schemas.py``
(``*_FINAL_COLUMNS``); nothing of our own is added, because GraphRAG's readers pass extra
columns through unchecked and a consumer should see exactly its familiar tables. Types are the
ones GraphRAG's own pipeline writes and its loaders (``graphrag.query.indexer_adapters``,
``graphrag.data_model.dfs``) expect:

- ids and titles are strings; ``human_readable_id``, ``community``, ``level``, ``parent``,
  ``size``, ``degree``, ``frequency``, ``combined_degree`` and ``n_tokens`` are int64;
  ``weight`` and ``rank`` float64;
- id lists are ``list<string>``; ``children`` is ``list<int64>``; ``findings`` is
  ``list<struct<summary: string, explanation: string>>``;
- community titles are made unique (see ``unique_titles``);
- ``period``, ``creation_date``, claim dates are ISO strings; ``raw_data`` is the document's
  metadata as a JSON string (null when empty): its keys differ between documents, which a
  parquet struct cannot hold.

Joins GraphRAG makes: ``communities.entity_ids`` against ``entities.id``; relationships'
``source``/``target`` against entity ``title``; ``text_units.document_id`` against
``documents.id``; ``covariates.text_unit_id`` and ``text_units.covariate_ids`` between claims
and the units stating them. The snapshot model already keys them that way.

**Vectors** (``write_vectors``) go where GraphRAG's default vector store reads them: LanceDB
tables under ``<out>/lancedb``, one per embedding GraphRAG's query path opens, named as its
``vector_store.index_schema`` defaults name them (``entity_description`` for local search,
``text_unit_text`` for basic search, ``community_full_content`` for DRIFT), with the columns
its ``LanceDBVectorStore`` writes (``id``, ``vector`` as fixed-size float32, ``create_date``,
``update_date``). The ids are the snapshot's own: GraphRAG looks entities up by ``id``
(``EntityVectorStoreKey.ID``), text units by ``id`` and reports by ``id``. The vectors are the
ones the pipeline wrote to Weaviate: entities embed their name and description, text units
their title and text, and reports their title and summary (the community job embeds no more of
a report; GraphRAG would embed its full content). GraphRAG must therefore embed its queries
with the same model (``embeddings.model``) for the vectors to mean anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import KgragError
from core.settings import Settings
from graph.versions.model import Snapshot

STR = pa.string()
INT = pa.int64()
FLOAT = pa.float64()
STR_LIST = pa.list_(STR)
INT_LIST = pa.list_(INT)
FINDINGS = pa.list_(pa.struct([("summary", STR), ("explanation", STR)]))


class ExportError(KgragError):
    """The snapshot could not be written as GraphRAG tables."""


VECTOR_DIR = "lancedb"
# GraphRAG embedding (= LanceDB table) -> (our vector kind in Weaviate, snapshot rows it covers)
VECTOR_TABLES: dict[str, tuple[str, str]] = {
    "entity_description": ("entity", "entities"),
    "text_unit_text": ("text_unit", "text_units"),
    "community_full_content": ("report", "community_reports"),
}
VECTOR_KINDS = tuple(kind for kind, _ in VECTOR_TABLES.values())


@dataclass(frozen=True, slots=True)
class VectorExport:
    """What ``write_vectors`` wrote: per table the rows with a vector and those without
    (not embedded yet, or a row of an older version whose vector was since replaced)."""

    db_uri: Path
    dimension: int
    written: dict[str, int]
    missing: dict[str, int]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    value: Callable[[Any], Any]  # record -> Python value for pyarrow


def _attr(name: str) -> Callable[[Any], Any]:
    return lambda r: getattr(r, name)


def _as_list(name: str) -> Callable[[Any], Any]:
    return lambda r: list(getattr(r, name))


def _col(name: str, kind: pa.DataType) -> Column:
    listy = pa.types.is_list(kind)
    return Column(name, kind, _as_list(name) if listy else _attr(name))


def _findings(r: Any) -> list[dict[str, str]]:
    return [
        {"summary": str(f.get("summary", "")), "explanation": str(f.get("explanation", ""))}
        for f in r.findings
    ]


def _raw_data(r: Any) -> str | None:
    return orjson.dumps(r.raw_data).decode("utf-8") if r.raw_data else None


_IDS = [_col("id", STR), _col("human_readable_id", INT)]
_HIERARCHY = [
    _col("community", INT),
    _col("level", INT),
    _col("parent", INT),
    _col("children", INT_LIST),
    _col("title", STR),
]

# GraphRAG table name -> (snapshot attribute, columns in GraphRAG's order)
TABLES: dict[str, tuple[str, list[Column]]] = {
    "entities": ("entities", [
        *_IDS, _col("title", STR), _col("type", STR), _col("description", STR),
        _col("text_unit_ids", STR_LIST), _col("frequency", INT), _col("degree", INT),
    ]),
    "relationships": ("relationships", [
        *_IDS, _col("source", STR), _col("target", STR), _col("description", STR),
        _col("weight", FLOAT), _col("combined_degree", INT), _col("text_unit_ids", STR_LIST),
    ]),
    "communities": ("communities", [
        *_IDS, *_HIERARCHY, _col("entity_ids", STR_LIST), _col("relationship_ids", STR_LIST),
        _col("text_unit_ids", STR_LIST), _col("period", STR), _col("size", INT),
    ]),
    "community_reports": ("community_reports", [
        *_IDS, *_HIERARCHY, _col("summary", STR), _col("full_content", STR),
        _col("rank", FLOAT), _col("rating_explanation", STR),
        Column("findings", FINDINGS, _findings), _col("full_content_json", STR),
        _col("period", STR), _col("size", INT),
    ]),
    "text_units": ("text_units", [
        *_IDS, _col("text", STR), _col("n_tokens", INT), _col("document_id", STR),
        _col("entity_ids", STR_LIST), _col("relationship_ids", STR_LIST),
        _col("covariate_ids", STR_LIST),
    ]),
    "documents": ("documents", [
        *_IDS, _col("title", STR), _col("text", STR), _col("text_unit_ids", STR_LIST),
        _col("creation_date", STR), Column("raw_data", STR, _raw_data),
    ]),
    "covariates": ("claims", [
        *_IDS, _col("covariate_type", STR), _col("type", STR), _col("description", STR),
        _col("subject_id", STR), _col("object_id", STR), _col("status", STR),
        _col("start_date", STR), _col("end_date", STR), _col("source_text", STR),
        _col("text_unit_id", STR),
    ]),
}  # fmt: skip


def table_schema(name: str) -> pa.Schema:
    """The arrow schema of one exported GraphRAG table."""
    return pa.schema([pa.field(c.name, c.type) for c in TABLES[name][1]])


def unique_titles(communities: Sequence[Any]) -> dict[int, str]:
    """Community number -> title, numbered where titles repeat.

    GraphRAG's ``read_indexer_reports`` rolls communities up by their title (its own titles
    are ``Community <n>``), so two communities sharing a title would hide one's report.
    """
    seen: dict[str, int] = {}
    for c in communities:
        seen[c.title] = seen.get(c.title, 0) + 1
    return {
        c.community: c.title if seen[c.title] == 1 else f"{c.title} (community {c.community})"
        for c in communities
    }


def to_arrow(name: str, records: Sequence[Any]) -> pa.Table:
    """One GraphRAG table from snapshot records."""
    columns = TABLES[name][1]
    try:
        arrays = [pa.array([c.value(r) for r in records], type=c.type) for c in columns]
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise ExportError(f"{name}: cannot convert to GraphRAG's columns: {err}") from err
    return pa.Table.from_arrays(arrays, schema=table_schema(name))


def export_graphrag(snapshot: Snapshot, out_dir: Path) -> list[Path]:
    """Write ``<table>.parquet`` files as GraphRAG's output directory holds them.

    ``covariates.parquet`` is written only when the snapshot has claims; a stale one left in
    ``out_dir`` by an earlier export is removed, so the directory always describes one
    snapshot. Each file is written to a temporary name and renamed into place.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, (attr, _) in TABLES.items():
        records = getattr(snapshot, attr)
        if name == "communities":
            titles = unique_titles(records)
            records = [replace(c, title=titles[c.community]) for c in records]
        path = out_dir / f"{name}.parquet"
        if name == "covariates" and not records:
            path.unlink(missing_ok=True)
            continue
        _write(to_arrow(name, records), path)
        written.append(path)
    return written


def write_vectors(
    snapshot: Snapshot, vectors: Mapping[str, Mapping[str, Sequence[float]]], out_dir: Path
) -> VectorExport:
    """Write ``vectors`` (kind -> key -> vector, as ``WeaviateStore.vectors`` reads them) for
    the snapshot's rows as GraphRAG's LanceDB tables under ``out_dir/lancedb``, replacing
    tables an earlier export left there. Rows without a vector are counted, not written."""
    # lance logs a warning for every table it creates rather than replaces: not news here
    os.environ.setdefault("LANCEDB_LOG", "error")
    try:
        import lancedb  # optional (160 MB): only an export with vectors needs it
    except ImportError as err:
        raise ExportError(
            "writing vectors needs lancedb: pip install 'kafka-graphrag[export]' "
            "(or pass --no-vectors for the tables alone)"
        ) from err
    picked: dict[str, list[tuple[str, Sequence[float]]]] = {}
    missing: dict[str, int] = {}
    for name, (kind, attr) in VECTOR_TABLES.items():
        have = vectors.get(kind, {})
        ids = [r.id for r in getattr(snapshot, attr)]
        picked[name] = [(i, have[i]) for i in ids if i in have]
        missing[name] = len(ids) - len(picked[name])
    dims = {len(v) for rows in picked.values() for _, v in rows}
    if len(dims) > 1:
        raise ExportError(
            f"the vectors have different dimensions {sorted(dims)}: the embedding model "
            "changed while indexing; re-embed (kgrag reset and publish again) before exporting"
        )
    dimension = dims.pop() if dims else 0
    db_uri = Path(out_dir) / VECTOR_DIR
    try:
        db = lancedb.connect(str(db_uri))
        for name, rows in picked.items():
            db.create_table(name, data=_vector_table(rows, dimension), mode="overwrite")
    except (OSError, ValueError, RuntimeError) as err:
        raise ExportError(f"cannot write the vectors to {db_uri}: {err}") from err
    return VectorExport(db_uri, dimension, {n: len(r) for n, r in picked.items()}, missing)


async def read_vectors(settings: Settings) -> dict[str, dict[str, list[float]]]:
    """The namespace's vectors in Weaviate, kind -> key -> vector, for ``write_vectors``."""
    from core.vector_store import VectorStoreError, WeaviateStore

    try:
        async with WeaviateStore(settings) as store:
            return {kind: await store.vectors(kind) for kind in VECTOR_KINDS}
    except VectorStoreError as err:
        raise ExportError(
            f"{err}; start Weaviate (kgrag services up) or export without vectors (--no-vectors)"
        ) from err


def _vector_table(rows: Sequence[tuple[str, Sequence[float]]], dimension: int) -> pa.Table:
    """The columns GraphRAG's ``LanceDBVectorStore`` writes (no extra fields)."""
    flat = pa.array([x for _, v in rows for x in v], type=pa.float32())
    dates = pa.nulls(len(rows), type=STR)
    return pa.table(
        {
            "id": pa.array([i for i, _ in rows], type=STR),
            "vector": pa.FixedSizeListArray.from_arrays(flat, max(dimension, 1)),
            "create_date": dates,
            "update_date": dates,
        }
    )


def _write(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {err}") from err
