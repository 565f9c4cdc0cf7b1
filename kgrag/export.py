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
``documents.id``. The snapshot model already keys them that way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import KgragError
from graph.snapshot_model import Snapshot

STR = pa.string()
INT = pa.int64()
FLOAT = pa.float64()
STR_LIST = pa.list_(STR)
INT_LIST = pa.list_(INT)
FINDINGS = pa.list_(pa.struct([("summary", STR), ("explanation", STR)]))


class ExportError(KgragError):
    """The snapshot could not be written as GraphRAG tables."""


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


def _write(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {err}") from err
