"""The community job's state between runs: in the child process's memory, and in its database.

The state lives in one SQLite database (``state.sqlite``, ``core.state_store``): the large
keyed maps (the graph view's rows and text-unit maps, the reports, their bases, the summaries,
the token counts of report rows) are tables whose rows are read when a run asks for them and
written when they change; the rest of the state (offsets, hierarchy, communities, ids, indexes) is
pickled beside them, with the maps by reference. A save after every run writes, in one
transaction, the rows changed since the last save and that blob, so its cost follows the
change, and a crash leaves the previous save whole. A restarted job resumes from the last
run's offsets with the same hierarchy, ids, report bases and refused items, and regenerates
nothing that did not change. A data directory written by an earlier version (a whole-state
``checkpoint.pickle``) is moved into the database on first load and brought up to date
(:func:`upgrade_state`). A child retired for its memory hands its in-memory caches to the
next through the database too (``hand_over``, ``graph.job.warm``).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from core.settings import Settings
from core.state_pickle import read_meta, to_disk
from core.state_store import CommitStats, DiskMap, StateStore
from graph.job.state import JobState, SummaryRecord
from graph.job.summaries import description_sets
from graph.job.warm import Stamp, WarmCaches, handed_over, stamp, take_over
from graph.moved import moved
from graph.versions.rows import TABLES

STATE_DB = "state.sqlite"
CHECKPOINT = "checkpoint.pickle"  # an earlier version's whole state, moved into the database
STATE_BLOB = "state"  # the pickled rest of the state, maps by reference
CACHES_BLOB = "caches"  # a retiring child's in-memory caches, for the next (graph.job.warm)
OFFSETS_BLOB = "offsets"  # the consumed offsets alone, for readers that load nothing else
# the maps kept as tables: (table, the object holding it: "view", "state", "evidence",
# "cluster_input", or "alias_" and an attribute of the state's ``aliases``; its attribute)
DISK_MAPS: tuple[tuple[str, str, str], ...] = (
    *(
        (f"view_{name}", "view", name)
        for name in (
            "entities",
            "relationships",
            "claims",
            "text_units",
            "documents",
            "entity_units",
            "relationship_units",
            "unit_entities",
            "unit_relationships",
            "document_units",
            "claim_units",
            "unit_claims",
            "unit_tokens",
        )
    ),
    *((f"state_{name}", "state", name) for name in ("reports", "bases", "summaries", "row_costs")),
    # the evidence index's fingerprints by entity, by relationship, by entity and neighbour,
    # and its relationship keys by pair (the index itself may not exist yet)
    ("evidence_entity_facts", "evidence", "entity_facts"),
    ("evidence_relationships", "evidence", "_relationships"),
    ("evidence_edge_facts", "evidence", "edge_facts"),
    ("evidence_by_pair", "evidence", "_by_pair"),
    # the clustering graph's relationships by key and by pair, and its entities' relationship
    # keys (graph.communities.cluster_input; read for what a refresh names)
    ("cluster_counted", "cluster_input", "counted"),
    ("cluster_pairs", "cluster_input", "pairs"),
    ("cluster_ends", "cluster_input", "ends"),
    # alias resolution's (graph.aliases.indexes): each entity's indexed type and spelling,
    # and each entity's neighbours
    ("alias_indexed", "alias_indexes", "indexed"),
    ("alias_near", "alias_related", "near"),
)
# the maps whose values never change in place (frozen dataclasses, tuples): a read holds no
# digest and a commit pickles only what was written (``DiskMap.values_frozen``)
FROZEN_MAPS = frozenset(
    {
        "view_entities",
        "view_relationships",
        "view_claims",
        "view_text_units",
        "view_unit_tokens",
        "state_reports",
        "state_bases",
        "state_summaries",
        "state_row_costs",
        "evidence_entity_facts",
        "evidence_relationships",
        "cluster_counted",
        "alias_indexed",
    }
)
# The whole passes made over these maps (graph.job and agents.community: degrees, newest
# time, description sets, evidence facts, alias neighbours, headlines' titles) only read, so
# ``items()``/``values()`` hold nothing and a run's commit writes only what it changed by key.
# the row digests, by table, of the graph version the job wrote last (``KnownRows``): a table
# each, ``_KNOWN`` + the graph table's name, updated in place by each commit
_KNOWN = "known_"
# the human-readable ids given so far (``HumanIds``), a table per kind: ``_IDS`` + the kind
_IDS = "ids_"
ID_KINDS = ("entity", "relationship", "text_unit", "document", "claim", "community")
log = logging.getLogger(__name__)
# by the job's directory (namespace and data directory): the state this process holds, and
# its open database
_STATE: dict[Path, JobState] = {}
_STORES: dict[Path, StateStore] = {}
_SAVED: dict[Path, Stamp] = {}  # the stamp of the state as last saved or loaded


def job_dir(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / "community-job"


def _store(settings: Settings) -> StateStore:
    directory = job_dir(settings)
    store = _STORES.get(directory)
    if store is None:
        directory.mkdir(parents=True, exist_ok=True)
        store = _STORES[directory] = StateStore(directory / STATE_DB)
        for table, _, _ in DISK_MAPS:  # every whole pass over them reads (see the note above)
            store.map(table).passes_hold = False
            store.map(table).values_frozen = table in FROZEN_MAPS
        for table in [*(_KNOWN + name for name in TABLES), *(_IDS + k for k in ID_KINDS)]:
            store.map(table).passes_hold = False  # digests (bytes) or ids by row id
            store.map(table).values_frozen = True
    return store


def load_state(settings: Settings) -> JobState:
    """This process's state, else the database's, else an earlier version's checkpoint moved
    in, else an empty state."""
    if job_dir(settings) in _STATE:
        return _STATE[job_dir(settings)]
    store = _store(settings)
    blob = store.open_meta(STATE_BLOB)  # read piece by piece, never whole in memory
    if blob is None:
        state = _moved_in(settings, store)
    else:
        with blob:
            state = _from_blob(blob, store)
        _take_caches(state, store)
    _STATE[job_dir(settings)] = state
    _SAVED[job_dir(settings)] = stamp(state)
    return state


def _take_caches(state: JobState, store: StateStore) -> None:
    """The caches a retiring child handed over with this very save, if it did; the blob is
    emptied by the next save either way (it is read once)."""
    blob = store.open_meta(CACHES_BLOB)
    if blob is None:
        return
    with blob:
        try:
            caches = _Unpickler(blob).load()
        except EOFError:  # emptied by the load that took them
            caches = None
        except Exception as e:  # derived data: a blob that does not load costs a cold run
            log.warning("community job: the handed-over caches did not load (%s)", e)
            caches = None
    if isinstance(caches, WarmCaches) and take_over(state, caches):
        log.info("community job: took over the caches of the child that saved this state")
    store.put_meta(CACHES_BLOB, b"")


def hand_over(settings_json: str) -> bool:
    """Write this process's caches beside its last save for the child that will load it
    (``graph.job.warm``), called by a child about to be retired; False when there is nothing
    to hand over or the state moved on since that save."""
    settings = Settings.model_validate_json(settings_json)
    state = _STATE.get(job_dir(settings))
    if state is None or _SAVED.get(job_dir(settings)) != stamp(state):
        return False
    store = _store(settings)
    with store.meta_file(CACHES_BLOB) as fh:
        pickle.dump(handed_over(state), fh, protocol=pickle.HIGHEST_PROTOCOL)
    store.commit()
    return True


def _moved_in(settings: Settings, store: StateStore) -> JobState:
    """An earlier version's checkpoint (upgraded) or an empty state, its maps made tables and
    saved; the old file is removed once the database holds it."""
    old = job_dir(settings) / CHECKPOINT
    state = JobState()
    if old.exists():
        with open(old, "rb") as fh:
            state = upgrade_state(_Unpickler(fh).load())  # our file, written by save_state
        log.info("community job: moving %s into %s", old, STATE_DB)
    save_state(settings, state)
    old.unlink(missing_ok=True)
    return state


class _Unpickler(pickle.Unpickler):
    """Reads checkpoints written before a class they hold moved to another module."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(moved(module, name), name)


@dataclass(frozen=True, slots=True)
class _MapRef:
    """A map's place in the pickled state: the name of its table."""

    table: str


def _owner(state: JobState, holder: str) -> Any:
    """The object holding a map of ``DISK_MAPS``; None when it does not exist (yet)."""
    if holder in ("evidence", "cluster_input"):
        return getattr(state, holder, None)
    if holder.startswith("alias_"):
        kept = getattr(state, "aliases", None)
        return None if kept is None else getattr(kept, holder.removeprefix("alias_"))
    return state.view if holder == "view" else state


def _held_maps(state: JobState) -> list[tuple[str, Any, str]]:
    """(table, holder, attribute) of every map of ``DISK_MAPS`` the state has, and of the row
    digests of the graph version it last wrote (tables ``_KNOWN`` + a graph table's name: the
    holder is the digests' dict, the attribute the graph table's name), and of the
    human-readable ids (``_IDS`` + a kind: the holder is ``human_ids.assigned``)."""
    held = [
        (table, owner, attribute)
        for table, holder, attribute in DISK_MAPS
        if (owner := _owner(state, holder)) is not None
    ]
    known = getattr(state, "tables_known", None)
    if known is not None:
        held += [(_KNOWN + name, known.digests, name) for name in known.digests if name in TABLES]
    assigned = state.human_ids.assigned
    if isinstance(assigned, dict):
        held += [(_IDS + kind, assigned, kind) for kind in assigned if kind in ID_KINDS]
    return held


def _get(owner: Any, attribute: str) -> Any:
    return owner[attribute] if isinstance(owner, dict) else getattr(owner, attribute)


def _put(owner: Any, attribute: str, value: Any) -> None:
    if isinstance(owner, dict):
        owner[attribute] = value
    else:
        setattr(owner, attribute, value)


@contextlib.contextmanager
def _maps_named(state: JobState) -> Iterator[JobState]:
    """The state with each of its maps swapped for the name of its table, to pickle it. The
    maps are swapped out around a plain pickle rather than named by a persistent-id hook,
    which pickle would call for every object of the state (twice as slow at 100,000
    articles); a map held anywhere else refuses to pickle, loudly."""
    held = []
    for table, owner, attribute in _held_maps(state):
        held.append((owner, attribute, _get(owner, attribute)))
        _put(owner, attribute, _MapRef(table))
    try:
        yield state
    finally:
        for owner, attribute, value in held:
            _put(owner, attribute, value)


def _from_blob(blob: BinaryIO, store: StateStore) -> JobState:
    state: JobState = _Unpickler(blob).load()
    for table, owner, attribute in _held_maps(state):
        value = _get(owner, attribute)
        if isinstance(value, _MapRef):
            _put(owner, attribute, store.map(table))
        else:  # a map an earlier version kept in the blob: it moves in at the next save
            _put(owner, attribute, to_disk(store, table, value))
    return state


def upgrade_state(state: JobState) -> JobState:
    """Bring a checkpoint written by an earlier version to today's fields: summaries were
        ``(fingerprint, text)`` pairs (their basis is the current description set when the
        fingerprint still matches it, else unknown, which makes them due), there was no failure
        record, the view kept sets of changed keys that nothing read (dropped) and no reverse maps
    of text units (rebuilt)."""
    if not hasattr(state, "failures"):
        state.failures = {}
    if not hasattr(state, "summaries_pending"):
        state.summaries_pending = None  # not known: the next run looks at every description set
    if not hasattr(state, "row_costs") or any(not isinstance(k, str) for k in state.row_costs):
        state.row_costs = {}  # a cache of token counts, keyed by (kind, key) pairs before
    if not hasattr(state, "tables_known"):
        state.tables_known = None  # the next commit reads the latest graph version back
    if not hasattr(state, "evidence"):
        state.evidence = None  # built from the whole view by the next run
    if not hasattr(state, "cluster_input"):
        state.cluster_input = None  # built from the whole view by the next run
    if not hasattr(state, "labelled"):
        state.labelled = None  # the next run matches every community
    if not hasattr(state, "resolution"):
        state.resolution = None  # the next run resolves the whole graph
    if not hasattr(state, "aliases"):
        state.aliases = None
    if not hasattr(state, "alias_verdicts"):
        state.alias_verdicts = {}
    if not hasattr(state, "headlined"):
        state.headlined = {}
    if "touched" not in vars(state.view):
        state.view.touched = None  # not known: the next run plans every community
    if "unit_entities" not in vars(state.view):
        state.view.rebuild_reverse_maps()  # the checkpoint's rows were all committed
    if "claim_units" not in vars(state.view):
        # which unit states which claim was not kept: known again as claims are re-stated
        state.view.claim_units, state.view.unit_claims = {}, {}
    if "unit_tokens" not in vars(state.view):
        state.view.unit_tokens = {}  # what units folded before were extracted for is not known
        state.view.ingest_total = None  # summed from the units when first asked
    if "ingest_total" not in vars(state.view):
        state.view.ingest_total = None
    if "removed" not in vars(state.view):
        state.view.removed = None  # not known: the next run compares every row
    elif state.view.removed is not None and "documents" not in vars(state.view.removed):
        state.view.removed.documents = set()  # no document was ever deleted before
    for stale in ("dirty_entities", "dirty_relationships"):
        vars(state.view).pop(stale, None)
    current = description_sets(state.view)
    for slot, value in list(state.summaries.items()):
        if isinstance(value, tuple):
            fp, text = value
            known = current.get(slot)
            basis = frozenset(known[1]) if known is not None and known[0] == fp else frozenset()
            state.summaries[slot] = SummaryRecord(fp, text, basis, 0.0)
    return state


def forget_state(settings: Settings) -> None:
    """Drop this process's copy (half-applied after a failed run) and every change not saved:
    the next load reads the last save."""
    _STATE.pop(job_dir(settings), None)
    _SAVED.pop(job_dir(settings), None)
    store = _STORES.get(job_dir(settings))
    if store is not None:
        store.discard()


def close_state(settings: Settings) -> None:
    """Forget the state and close its database (a test, or a process done with it)."""
    _STATE.pop(job_dir(settings), None)
    _SAVED.pop(job_dir(settings), None)
    store = _STORES.pop(job_dir(settings), None)
    if store is not None:
        store.close()


def save_state(settings: Settings, state: JobState) -> CommitStats:
    """Write the rows changed since the last save and the rest of the state, in one
    transaction."""
    store = _store(settings)
    for table, owner, attribute in _held_maps(state):  # maps built in memory move in
        if not isinstance(value := _get(owner, attribute), DiskMap):
            _put(owner, attribute, to_disk(store, table, value))
    with _maps_named(state), store.meta_file(STATE_BLOB) as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
    store.put_meta(OFFSETS_BLOB, orjson.dumps({str(p): o for p, o in state.offsets.items()}))
    stats = store.commit()
    _SAVED[job_dir(settings)] = stamp(state)
    return stats


def read_offsets(settings: Settings) -> dict[int, int] | None:
    """The offsets of the last save, read without loading the state (another process may
    hold it); None before the first save."""
    path = job_dir(settings) / STATE_DB
    if not path.exists():
        return None
    blob = read_meta(path, OFFSETS_BLOB)
    return None if blob is None else {int(p): o for p, o in orjson.loads(blob).items()}


@dataclass(frozen=True, slots=True)
class LeadStart:
    """Where a new leadership term starts: the graph-changes offsets the state has consumed,
    and whether it holds changes no run has taken in yet (light commits folded them, during a
    run or between runs, and advanced the offsets past them), so a run is due without a new
    change arriving."""

    offsets: dict[int, int]
    run_due: bool


def lead_start(settings_json: str) -> LeadStart:
    """The state's offsets and whether a run is due (called in the child process)."""
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    touched = state.view.touched_so_far()
    if touched is None:  # not known: owed if anything was ever folded
        return LeadStart(dict(state.offsets), bool(state.offsets))
    return LeadStart(dict(state.offsets), bool(touched.entities or touched.slots))
