"""The launcher's children outlive the command that started them, quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import sys, weaviate  # weaviate turns every warning on when imported
from pathlib import Path
from kgrag.services import process
pid = process.spawn(["sleep", "5"], log_path=Path(sys.argv[1]), env={"PATH": "/usr/bin:/bin"},
                    cwd=Path(sys.argv[2]))
print(pid)
"""


def test_a_service_left_running_at_exit_prints_no_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", _SCRIPT, str(tmp_path / "x.log"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    pid = int(done.stdout.strip())
    try:
        assert "still running" not in done.stderr, done.stderr
        assert Path(f"/proc/{pid}").exists(), "the child must outlive its parent"
    finally:
        subprocess.run(["kill", str(pid)], check=False)
