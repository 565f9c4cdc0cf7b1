"""The snapshot directories of earlier releases: versioned directories behind an atomic pointer.

Kept only so ``core.tables.migration`` can convert them into graph tables, and for the tests
and benchmarks that compare against them.

Layout under ``root``::

    v000000012/         one complete snapshot (graph.versions.legacy_format' files), never modified
    v000000013/
    LATEST              the pointer: the version number as text, replaced atomically
    .lock               flock'ed around the pointer's compare-and-swap and pruning
    .tmp-…/ .trash-…/   staging and deletion areas, never read

Why a reader never sees a half-written snapshot: a writer stages every file in a hidden
directory on the same filesystem, fsyncs them, renames the directory to ``v<version>``
(atomic), and only then replaces ``LATEST`` (write a temp file, fsync, ``os.replace``). A
directory named ``v…`` is therefore complete, and the pointer only ever names such a directory.

Why versions only go up: the pointer is moved under an exclusive ``fcntl.flock`` after
re-reading it; a write whose version is at or below the pointer's raises
``StaleSnapshotError`` and leaves the pointer alone. A community-job leader that lost its role
mid-run thus cannot publish an older graph over a newer one, whichever process it runs in.

Pruning rule: keep the ``keep`` newest versions at or below the pointer (the pointer's target
is always among them); versions above the pointer are leftovers of a writer that crashed
between its rename and its pointer update, replaced by the next write of that version. A
directory is deleted by first renaming it to ``.trash-…``, so a ``v…`` name never shows a
partly deleted directory. Loading reads every file into memory and closes it before decoding,
so the only window a reader has is while it reads the files; if the directory it was pointed
at disappears in that window (``keep`` newer snapshots were published meanwhile), ``load()``
re-reads the pointer and retries. Explicitly asking for a pruned version is
``SnapshotNotFoundError``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from core.errors import ConfigError
from core.tables.errors import (
    SnapshotCorruptError,
    SnapshotNotFoundError,
    SnapshotStoreError,
    reject_stale,
)
from core.tables.versions import PointerStamp
from graph.protocols import SnapshotStore as SnapshotStoreProtocol
from graph.versions.legacy_format import (
    LATER_TABLES,
    SnapshotFormatError,
    snapshot_files,
    snapshot_from_tables,
    snapshot_to_tables,
    table_file,
)
from graph.versions.model import Snapshot

log = logging.getLogger(__name__)

POINTER = "LATEST"
LOCK = ".lock"
_VERSION_DIR = re.compile(r"^v(\d+)$")
_LOAD_ATTEMPTS = 5


def version_dir_name(version: int) -> str:
    return f"v{version:09d}"


class SnapshotStore:
    """Implements ``graph.protocols.SnapshotStore`` on a local directory."""

    def __init__(self, root: Path, keep: int = 5, *, stale_tmp_s: float = 3600.0) -> None:
        if keep < 1:
            raise ConfigError(
                f"keep must be >= 1 (the pointer's target is always kept); got {keep}"
            )
        self.root = Path(root)
        self.keep = keep
        self._stale_tmp_s = stale_tmp_s
        self.root.mkdir(parents=True, exist_ok=True)

    # -- reading -----------------------------------------------------------------------------

    @property
    def pointer_path(self) -> Path:
        return self.root / POINTER

    def path_of(self, version: int) -> Path:
        return self.root / version_dir_name(version)

    def latest_version(self) -> int | None:
        """The version the pointer names, or None before the first write."""
        try:
            text = self.pointer_path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        try:
            return int(text.strip())
        except ValueError as err:
            raise SnapshotCorruptError(self.pointer_path, f"not a version: {text!r}") from err

    def pointer_stamp(self) -> PointerStamp | None:
        """A cheap change detector: the pointer's inode changes on every publish."""
        try:
            st = os.stat(self.pointer_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def versions(self) -> list[int]:
        """Versions with a complete directory on disk, ascending."""
        found = []
        for entry in os.scandir(self.root):
            m = _VERSION_DIR.match(entry.name)
            if m and entry.is_dir():
                found.append(int(m.group(1)))
        return sorted(found)

    def next_version(self) -> int:
        """One above anything published or left on disk."""
        return max([self.latest_version() or 0, *self.versions()]) + 1

    def load(self, version: int | None = None) -> Snapshot:
        """The given version, or the one the pointer names (re-reading it if pruned meanwhile)."""
        if version is not None:
            return self._load_dir(version)
        for _ in range(_LOAD_ATTEMPTS):
            latest = self.latest_version()
            if latest is None:
                raise SnapshotNotFoundError(f"no snapshot has been published in {self.root}")
            try:
                return self._load_dir(latest)
            except SnapshotNotFoundError:
                continue  # pruned between reading the pointer and opening it: look again
        raise SnapshotNotFoundError(
            f"the latest snapshot in {self.root} kept being pruned while loading; "
            f"raise keep (now {self.keep})"
        )

    def _load_dir(self, version: int) -> Snapshot:
        path = self.path_of(version)
        tables: dict[str, bytes] = {}
        for name in snapshot_files():
            try:
                tables[name] = (path / name).read_bytes()
            except FileNotFoundError:
                if path.is_dir():
                    raise SnapshotCorruptError(path, f"{name} is missing") from None
                raise SnapshotNotFoundError(f"snapshot {version} is not in {self.root}") from None
        for table in LATER_TABLES:  # there when it has rows
            with suppress(FileNotFoundError):
                tables[table_file(table)] = (path / table_file(table)).read_bytes()
        try:
            snapshot = snapshot_from_tables(tables)
        except SnapshotFormatError as err:
            raise SnapshotCorruptError(path, str(err), table=err.table) from err
        if snapshot.meta.version != version:
            raise SnapshotCorruptError(path, f"meta.json says version {snapshot.meta.version}")
        return snapshot

    # -- writing -----------------------------------------------------------------------------

    def write(self, snapshot: Snapshot) -> Path:
        """Publish ``snapshot`` under its ``meta.version``; raise ``StaleSnapshotError`` when
        the pointer is already at or above it. Prunes afterwards."""
        version = snapshot.meta.version
        if version < 1:
            raise SnapshotStoreError(f"snapshot versions start at 1; got {version}")
        reject_stale(version, self.latest_version())  # fail before the expensive part
        staged = self._stage(version, snapshot_to_tables(snapshot))
        try:
            with self._locked():
                reject_stale(version, self.latest_version())
                final = self._move_into_place(staged, version)
                self._replace_pointer(version)
        finally:
            if staged.exists():
                shutil.rmtree(staged, ignore_errors=True)
        self.prune()
        return final

    def _stage(self, version: int, files: dict[str, bytes]) -> Path:
        staged = self.root / f".tmp-{version_dir_name(version)}-{uuid.uuid4().hex}"
        staged.mkdir()
        for name, payload in files.items():
            _write_durably(staged / name, payload)
        _fsync_dir(staged)
        return staged

    def _move_into_place(self, staged: Path, version: int) -> Path:
        final = self.path_of(version)
        if final.exists():  # above the pointer, under the lock: a crashed writer's leftover
            self._discard(final)
        os.rename(staged, final)
        _fsync_dir(self.root)
        return final

    def _replace_pointer(self, version: int) -> None:
        tmp = self.root / f".tmp-{POINTER}-{uuid.uuid4().hex}"
        _write_durably(tmp, f"{version}\n".encode("ascii"))
        os.replace(tmp, self.pointer_path)
        _fsync_dir(self.root)

    # -- pruning -----------------------------------------------------------------------------

    def prune(self) -> list[int]:
        """Delete all but the ``keep`` newest versions at or below the pointer; return them."""
        with self._locked():
            latest = self.latest_version()
            if latest is None:
                return []
            published = [v for v in self.versions() if v <= latest]
            doomed = published[: max(0, len(published) - self.keep)]
            for v in doomed:
                self._discard(self.path_of(v))
        self._sweep_leftovers()
        return doomed

    def _discard(self, path: Path) -> None:
        trash = self.root / f".trash-{path.name}-{uuid.uuid4().hex}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def _sweep_leftovers(self) -> None:
        """Staging and trash left by crashed processes, once old enough to be surely dead."""
        cutoff = time.time() - self._stale_tmp_s
        for entry in os.scandir(self.root):
            if entry.name.startswith((".tmp-", ".trash-")):
                try:
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        _remove(Path(entry.path))
                except FileNotFoundError:
                    continue

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


class SnapshotWatcher:
    """Hands the query service the latest snapshot, reloading only when the pointer moved.

    ``current()`` costs one ``stat`` when nothing changed. It is thread-safe: one thread
    reloads while the others keep getting the previous snapshot object until the new one is
    complete. A snapshot that fails to load is logged and kept in ``last_error``; the previous
    snapshot stays in service. Loading blocks, so async callers use
    ``await asyncio.to_thread(watcher.current)``.
    """

    def __init__(self, store: SnapshotStoreProtocol) -> None:
        self._store = store
        self._lock = threading.Lock()
        # (pointer stamp, snapshot) in one attribute, so readers never see a torn pair
        self._state: tuple[PointerStamp | None, Snapshot | None] = (None, None)
        self.last_error: Exception | None = None

    @property
    def version(self) -> int | None:
        snapshot = self._state[1]
        return None if snapshot is None else snapshot.meta.version

    def current(self) -> Snapshot | None:
        stamp = self._store.pointer_stamp()
        seen, snapshot = self._state
        if stamp == seen:
            return snapshot
        with self._lock:
            if self._state[0] != stamp:
                self._reload()
            return self._state[1]

    def _reload(self) -> None:
        stamp = self._store.pointer_stamp()  # read before loading: a later move is seen next call
        held = self._state[1]
        try:
            latest = self._store.latest_version()
            if latest is None:
                return
            if held is not None and held.meta.version == latest:
                self._state = (stamp, held)
                return
            self._state = (stamp, self._store.load())
            self.last_error = None
        except SnapshotNotFoundError as err:
            self.last_error = err  # a race with pruning: leave the stamp, retry next call
        except SnapshotStoreError as err:
            log.warning("keeping snapshot %s: %s", None if held is None else held.meta.version, err)
            self.last_error = err
            self._state = (stamp, held)  # do not retry a broken snapshot on every call


def _write_durably(path: Path, payload: bytes) -> None:
    with open(path, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _conforms(store: SnapshotStore) -> SnapshotStoreProtocol:
    """Lets mypy check that the store implements ``graph.protocols.SnapshotStore``."""
    return store
