"""tiktoken without the network.

tiktoken downloads its BPE files on first use. The ``bpe-openai`` wheel ships them; we
unpack them into a cache directory under the names tiktoken looks for (the SHA-1 of the
download URL) and point ``TIKTOKEN_CACHE_DIR`` at it before tiktoken is first used. Every
process we start calls :func:`ensure_offline_bpe` (workers inherit the environment variable).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

# tiktoken names its cache files after the SHA-1 of the blob URL it would download.
_CACHE_NAMES = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}


def _default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-graphrag" / "tiktoken"


def ensure_offline_bpe(cache_dir: Path | None = None) -> Path:
    """Unpack the shipped BPE files (once) and set ``TIKTOKEN_CACHE_DIR``; return the dir."""
    existing = os.environ.get("TIKTOKEN_CACHE_DIR")
    target = Path(existing) if existing and cache_dir is None else (cache_dir or _default_dir())
    target.mkdir(parents=True, exist_ok=True)
    for name, digest in _CACHE_NAMES.items():
        dest = target / digest
        if dest.exists() and dest.stat().st_size > 0:
            continue
        src = _shipped_data() / f"{name}.tiktoken.gz"
        tmp = dest.with_suffix(".tmp")
        with open(src, "rb") as raw, gzip.open(raw) as unzipped, open(tmp, "wb") as out:
            shutil.copyfileobj(unzipped, out)
        tmp.replace(dest)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(target)
    return target


def _shipped_data() -> Path:
    """The ``data`` folder of the installed ``bpe_openai`` package, found without importing
    it: its ``__init__`` builds Rust tokenizers (half a second), and a restarted worker only
    needs the files, and only the first time."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the bpe-openai package is not installed; run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@lru_cache(maxsize=4)
def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding loaded from the offline files."""
    if name not in _CACHE_NAMES:
        raise ConfigError(
            f"encoding {name!r} is not shipped offline; use one of {list(_CACHE_NAMES)}"
        )
    ensure_offline_bpe()
    import tiktoken

    return tiktoken.get_encoding(name)


@lru_cache(maxsize=8)
def _encoding(name: str) -> tiktoken.Encoding:
    return get_encoding(name)


@lru_cache(maxsize=1 << 18)
def count_tokens(encoding: str, text: str) -> int:
    """Tokens of ``text`` in ``encoding``, memoised (bounded): the community job counts the
    same context rows run after run, and a hub community's report has thousands of them."""
    return len(_encoding(encoding).encode_ordinary(text))
