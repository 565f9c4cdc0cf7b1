"""``kgrag demo --stop``: the processes a demo left running are stopped, by the ids it wrote,
and a number another process reused is left alone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import orjson
from rich.console import Console

from core.settings import load_settings
from kgrag.demo import _free_port, stop_demo


def test_the_recorded_processes_stop_and_others_are_left_alone(tmp_path: Path) -> None:
    settings = load_settings().model_copy(update={"data_dir": tmp_path})
    left = subprocess.Popen(  # stands in for the demo's worker: a kgrag.cli command line
        [sys.executable, "-c", "import time; time.sleep(120)", "kgrag.cli", "worker"],
        start_new_session=True,
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (tmp_path / "demo-processes.json").write_bytes(
            orjson.dumps({"worker": left.pid, "api": other.pid})
        )
        console = Console(record=True, width=200)
        stop_demo(settings, console)
        assert left.wait(10) != 0  # terminated
        assert other.poll() is None  # not ours by its command line: untouched
        said = console.export_text()
        assert f"stopped the demo's worker (pid {left.pid})" in said
        assert f"api (pid {other.pid}) is not running" in said
        assert not (tmp_path / "demo-processes.json").exists()
        stop_demo(settings, console)
        assert "no demo processes are recorded as running" in console.export_text()
    finally:
        for p in (left, other):
            p.kill()
            p.wait()


def test_a_busy_port_is_swapped_for_a_free_one() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert _free_port("127.0.0.1", taken) != taken
    assert _free_port("127.0.0.1", taken) == taken
