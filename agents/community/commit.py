"""The community job's commits to the graph tables: light commits, the run's version, restamps.

Two kinds of version reach the tables. A light commit (``kind: rows``) writes the rows that
changes upserted since the last commit, so new articles are searchable between runs; a run's
commit (``kind: run``) writes its communities and reports with whatever rows are left. Both
number their rows first (``adopt_committed_ids`` keeps the numbers of versions the state does
not know of), and both say what extracting their documents cost (``ingest_cost``). The store
is opened once per process (``writer_store``): it keeps the Delta tables it has read and counts
its commits towards the next maintenance across runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from core.settings import Settings
from core.settings.llm import ModelPrice, cost_usd
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.aliases.resolution import alias_rows
from graph.communities.leiden import Hierarchy
from graph.job.state import JobState
from graph.job.version_tables import (
    assemble,
    community_changes,
    fresh_ids,
    newest_time,
    row_tables,
)
from graph.merge.view import GraphView, Touched
from graph.versions.model import SnapshotCommunity, SnapshotMeta, SnapshotReport

log = logging.getLogger(__name__)

_STORES: dict[str, GraphTables] = {}  # tables uri -> the store this process writes

# the graph tables holding human-readable ids, by the ``HumanIds`` kind that numbers them
_ID_TABLES = (
    ("entity", "entities"),
    ("relationship", "relationships"),
    ("text_unit", "text_units"),
    ("document", "documents"),
    ("claim", "claims"),
    ("community", "communities"),
)


def writer_store(settings: Settings) -> GraphTables:
    """The graph tables this process writes, opened once: it keeps the Delta tables it has
    read and counts its commits towards the next maintenance across runs."""
    store = _STORES.get(settings.tables_uri)
    if store is None:
        store = _STORES[settings.tables_uri] = open_graph_store(settings, convert=True)
    return store


def forget_store(settings: Settings) -> None:
    """Drop the store after a failed run or commit: the next one opens the tables afresh."""
    _STORES.pop(settings.tables_uri, None)


def adopt_committed_ids(store: GraphTables, state: JobState) -> bool:
    """Keep the human-readable ids of versions the state does not know of; whether any.

    Light commits are not checkpointed (the next run is), and a crash can also fall between
    a run's commit and its checkpoint: a restarted job then holds counters behind the ids
    the tables already gave. Left so, it gave those numbers again to other rows, and until
    its replay had rewritten every row of the lost versions two rows shared an id (a query
    service resolving a context's relationship ids failed on them). So before it numbers
    anything, the job adopts the ids of rows the tables hold and it has not numbered, and
    moves each counter past every id the tables ever held. Community ids are matched by
    members each run, so only their counter moves."""
    latest = store.latest_listed()
    known = state.tables_known
    if latest is None or (known is not None and known.version == latest):
        return False
    ids = before = state.human_ids
    for kind, table in _ID_TABLES:
        top, given = store.human_ids(table, latest)
        ids = ids.adopt(kind, {} if kind == "community" else given, top)
    state.human_ids = ids
    if ids is not before:
        log.info("kept the ids of graph versions committed after the checkpoint (up to %d)", latest)
    return ids is not before


def ingest_cost(view: GraphView, price: ModelPrice | None) -> dict[str, Any]:
    """A version's ``ingest_tokens`` and ``ingest_cost_usd``: what extracting its documents
    spent (the sums of their rows, which the version holds), at ``price``.

    Why here, with the documents: the tables are written by the one community job and read
    by every process, outlive restarts of the workers and count each text unit once however
    many workers extracted, and however often a chunk was redelivered (``GraphView._spent``);
    a worker's own Prometheus counters say what that process spent since it started."""
    prompt, completion = view.ingest_tokens()
    return {
        "ingest_tokens": {"prompt": prompt, "completion": completion},
        "ingest_cost_usd": cost_usd(price, prompt, completion),
    }


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def light_commit(
    store: GraphTables, state: JobState, mode: str, price: ModelPrice | None = None
) -> int | None:
    """Commit the rows upserted since the last commit as a ``rows`` version; its number, or
    None when no row differs from what the tables hold. Rows deleted meanwhile stay until the
    run, so every id a kept community or row names still resolves. ``price``: the chat
    model's, for the version's ingest cost."""
    view = state.view
    keys = view.take_fresh()
    if not keys:
        return None
    adopt_committed_ids(store, state)
    infos = store.version_infos_all()
    state.human_ids = fresh_ids(view, state.human_ids, keys)
    rows = row_tables(view, state, keys)
    # before the first run there are no communities or reports yet: the version says so
    base = infos[-1].meta if infos else SnapshotMeta(0, "", "", mode=mode)
    reports_version, reports_at = base.reports_from if infos else (0, "")
    newest = max(
        [
            base.newest_document_time,
            *(view.text_units[u].published_at for u in keys.text_units if u in view.text_units),
        ]
    )
    meta = replace(
        base,
        version=max(state.version, infos[-1].version if infos else 0) + 1,
        created_at=_utc_now(),
        newest_document_time=newest,
        consumed_offsets={str(k): v for k, v in sorted(state.offsets.items())},
        reports_regenerated=0,
        kind="rows",
        reports_version=reports_version,
        reports_at=reports_at,
        **ingest_cost(view, price),
    )
    known = store.write_rows(meta, rows, state.tables_known)
    if known is None:
        return None
    state.tables_known = known
    return meta.version


def next_version(store: GraphTables, state: JobState) -> int:
    """The number the next version takes: past the state's and every version listed."""
    return max(state.version, store.latest_listed() or 0) + 1


def restamp(store: GraphTables, state: JobState, version: int) -> int:
    """The run's version once its reports are written: light commits made meanwhile took
    the numbers after the one the reports were stamped with, so they move up with it."""
    final = next_version(store, state)
    if final != version:
        for cid, report in list(state.reports.items()):
            if report.generated_in == version:
                state.reports[cid] = replace(report, generated_in=final)
    return final


def run_meta(
    state: JobState,
    version: int,
    hierarchy: Hierarchy,
    regenerated: set[str],
    *,
    mode: str,
    price: ModelPrice | None,
) -> SnapshotMeta:
    """The run's version: its counts, offsets, and how much its kept reports leave out."""
    view, communities = state.view, state.communities
    heads = state.committed.heads_of(state.reports)
    values = [
        heads[c.id].unreflected for c in communities if c.id in heads and c.id not in regenerated
    ] or [0.0]
    return SnapshotMeta(
        version=version,
        created_at=_utc_now(),
        newest_document_time=newest_time(view),
        counts={
            "entities": len(view.entities),
            "relationships": len(view.relationships),
            "communities": len(communities),
            "text_units": len(view.text_units),
            "documents": len(view.documents),
            "levels": len(hierarchy.levels),
        },
        consumed_offsets={str(k): v for k, v in sorted(state.offsets.items())},
        mode=mode,
        reports_regenerated=len(regenerated),
        unreflected_max=max(values),
        unreflected_mean=sum(values) / len(values),
        kind="run",
        **ingest_cost(view, price),
    )


def commit_run(
    store: GraphTables,
    state: JobState,
    touched: Touched | None,
    summarised: set[str],
    meta: SnapshotMeta,
    timings: dict[str, float],
) -> tuple[tuple[SnapshotCommunity, ...], tuple[SnapshotReport, ...]]:
    """Commit the run's version; returns its communities (every row) and the reports it
    wrote. The community and report rows that changed since the last commit (every one
    when not known: ``graph.job.committed``); of the other tables the rows that changes or
    this run's summaries reached since the last commit, and the deletions since the last run
    (light commits wrote the rest). When those are not known (a checkpoint from an earlier
    release, a crash after a commit), the whole graph is compared. ``timings`` gets the
    assembly's and the maintenance's seconds."""
    view, communities = state.view, state.communities
    fresh, removed, known = view.take_fresh(), view.take_removed(), state.tables_known
    cache = state.committed
    if (
        touched is None
        or removed is None
        or known is None
        or known.version != store.latest_listed()
    ):
        snapshot = assemble(view, state, communities, meta)
        state.tables_known = store.write(snapshot, known)
        cache.remember(communities, snapshot.communities)
        return snapshot.communities, snapshot.community_reports
    for slot in touched.slots | summarised:
        kind, _, key = slot.partition(":")
        (fresh.entities if kind == "e" else fresh.relationships).add(key)
    started = time.monotonic()
    rows: dict[str, tuple[Any, ...]] = dict(row_tables(view, state, fresh))
    # the entities light commits folded while the run went on count too: their communities'
    # mentions per day are in this version's rows
    meanwhile = view.touched_so_far()
    entities = None if meanwhile is None else touched.entities | meanwhile.entities
    changes = community_changes(view, state, communities, entities)
    rows["communities"], rows["community_reports"] = changes.upserts, changes.reports
    deletes: dict[str, Iterable[str]] = {
        "entities": removed.entities,
        "relationships": removed.relationships,
        "text_units": removed.text_units,
        "claims": removed.claims,
        "documents": removed.documents,
        "communities": changes.gone_communities,
        "community_reports": changes.gone_reports,
    }
    complete = ("communities",) if changes.whole else ()
    rows["aliases"] = alias_rows(view, state.names_resolved())
    timings["snapshot_assemble"] = round(time.monotonic() - started, 3)
    store.last_maintain_s = 0.0
    written = store.write_rows(
        meta, rows, known, deletes=deletes, complete=(*complete, "aliases"), always=True
    )
    assert written is not None  # always=True commits
    timings["snapshot_maintain"] = store.last_maintain_s
    state.tables_known = written
    cache.remember(communities, changes.rows)
    return changes.rows, changes.reports
