"""Default per-user directories (XDG) for the data and the downloaded service binaries."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kafka-graphrag`` (``~/.cache`` when unset): jars and binaries."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-graphrag"


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/kafka-graphrag`` (``~/.local/share`` when unset): state and tables."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kafka-graphrag"
