"""A benchmark's warm state: the folded graph (with the merge rules' state, to fold more) and
the community job's state after a first run. Its own module so a pickled one names a class
every benchmark can import, whichever script (or spawned process) wrote it."""

from __future__ import annotations

import pickle
from typing import Any

from bench.incremental import Folder
from graph.job.state import JobState


class Warm:
    """The folded graph (with the merge rules' state, to fold more) and the job's state."""

    def __init__(self, folder: Folder, state: JobState, base_run_s: float, fold_s: float):
        self.folder, self.state = folder, state
        self.base_run_s, self.fold_s = base_run_s, fold_s

    def __getstate__(self) -> dict[str, Any]:
        folder = dict(vars(self.folder))
        folder.pop("enc", None)  # a tiktoken encoding does not pickle; rebuilt on load
        return {**vars(self), "folder": folder}

    def __setstate__(self, data: dict[str, Any]) -> None:
        folder = Folder.__new__(Folder)
        vars(folder).update(data.pop("folder"))
        folder.enc = Folder(1).enc
        vars(self).update(data, folder=folder)

    def copy(self) -> Warm:
        return pickle.loads(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL))
