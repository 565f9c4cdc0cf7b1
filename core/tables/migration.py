"""Converting the JSON-lines snapshot directories of earlier releases into graph tables.

Only the latest old snapshot is converted: it becomes the first graph version, once; after
that the old directory is no longer read.
"""

from __future__ import annotations

import logging

from core.settings import Settings
from core.tables.legacy_snapshots import SnapshotStore
from core.tables.store import GraphTables

log = logging.getLogger(__name__)


def legacy_snapshot_version(settings: Settings) -> int | None:
    """The latest snapshot in the old format under the namespace, if any."""
    root = settings.snapshots_dir
    if not (root / "LATEST").is_file():
        return None
    return SnapshotStore(root).latest_version()


def legacy_hint(settings: Settings, store: GraphTables) -> str | None:
    """What to run when the data directory holds old snapshots and no graph version yet."""
    version = legacy_snapshot_version(settings)
    if version is None or store.latest_listed() is not None:
        return None
    return (
        f"{settings.snapshots_dir} holds graph snapshots in the format of an earlier release "
        f"(latest: version {version}) and there are no graph tables yet: run `kgrag migrate` "
        "(or start the worker, whose community job converts them) and ask again"
    )


def convert_legacy_snapshots(settings: Settings, store: GraphTables) -> int | None:
    """Convert the old snapshot directory's latest snapshot into the first graph version,
    once (nothing happens when graph tables exist). Returns the version converted."""
    if legacy_hint(settings, store) is None:
        return None
    old = SnapshotStore(settings.snapshots_dir)
    snapshot = old.load()
    store.write(snapshot)
    log.warning(
        "converted snapshot %d from %s into graph tables at %s; the old directory is no "
        "longer read and may be deleted",
        snapshot.meta.version,
        settings.snapshots_dir,
        store.root,
    )
    return snapshot.meta.version
