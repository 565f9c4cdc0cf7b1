"""tiktoken must work with the network unreachable, from the shipped BPE files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import socket
def refuse(*a, **k):
    raise OSError("network disabled for this test")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from core.tokenizer import get_encoding
for name in ("o200k_base", "cl100k_base"):
    enc = get_encoding(name)
    ids = enc.encode("OPEC ministers met in Vienna.")
    assert enc.decode(ids) == "OPEC ministers met in Vienna.", name
    print(name, len(ids))
"""


def test_tokenisation_works_without_network_in_a_fresh_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)  # an empty cache: files must come from the wheel
    result = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "o200k_base" in result.stdout and "cl100k_base" in result.stdout
    assert any((tmp_path / "kafka-graphrag" / "tiktoken").iterdir())


def test_a_filled_cache_is_used_without_importing_the_wheel(tmp_path: Path) -> None:
    """Importing ``bpe_openai`` builds its own tokenizers (half a second of every worker
    restart); with the files unpacked, only tiktoken is loaded."""
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    check = (
        "import sys\n"
        "from core.tokenizer import get_encoding\n"
        "assert get_encoding('o200k_base').encode('Vienna')\n"
        "print('bpe_openai' in sys.modules)\n"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=120
        ).stdout.strip()
        for _ in range(2)
    ]
    assert outputs == ["False", "False"]
