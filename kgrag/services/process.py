"""Start, find and stop the background processes the launcher owns.

Each service has a state directory holding ``service.json`` (pid, ports, version, the
command line it was started with). ``down`` only signals a pid whose live command line still
matches the recorded one, so a recycled pid of someone else's process is never killed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from core.errors import MissingToolError, PortInUseError, ServiceError

# Children started by this process, kept so they are reaped (not leaked as zombies or
# reported as "still running" when the Popen object is collected) if we stop them ourselves.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@atexit.register
def _hand_off_children() -> None:
    """Services outlive the command that started them (``up`` then exit is the normal case),
    so a child still running at exit is handed off, not leaked. Python would still print
    "subprocess N is still running" for each: the ``weaviate`` package turns every warning on
    when imported. Forget them quietly at exit, after every other use of ``_CHILDREN``."""
    warnings.filterwarnings(
        "ignore", message=r"subprocess \d+ is still running", category=ResourceWarning
    )
    _CHILDREN.clear()


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    name: str
    pid: int
    ports: dict[str, int]
    version: str
    argv: list[str]
    started_at: float

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ServiceRecord | None:
        try:
            data = orjson.loads(path.read_bytes())
            return cls(**data)
        except (OSError, orjson.JSONDecodeError, TypeError):
            return None


def require_tool(tool: str, hint: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise MissingToolError(tool, hint)
    return found


def go_install(module: str, version: str, binary: Path) -> Path:
    """Build ``module@v<version>`` with ``go install`` into ``binary``'s directory unless the
    binary is there (Go's own module and build caches make a rebuild cheap)."""
    if binary.exists():
        return binary
    go = require_tool("go", "install Go 1.26 or newer (https://go.dev/doc/install)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOBIN": str(binary.parent)}
    started = time.monotonic()
    cmd = [go, "install", f"{module}@v{version}"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0 or not binary.exists():
        raise ServiceError(
            f"building {binary.name} {version} failed:\n{(result.stdout + result.stderr)[-3000:]}"
        )
    (binary.parent / "build-seconds").write_text(f"{time.monotonic() - started:.1f}\n")
    return binary


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def ensure_ports_free(ports: Mapping[str, int], service: str) -> None:
    """Raise PortInUseError naming the setting that moves the first taken port."""
    for setting, port in ports.items():
        if port_open(port):
            raise PortInUseError(port, service, setting)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = _proc_state(pid)
    return state not in {"Z", "X"}


def _proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""


def cmdline_matches(pid: int, argv: Sequence[str]) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    live = [p.decode(errors="replace") for p in raw.split(b"\0") if p]
    return bool(live) and bool(argv) and Path(live[0]).name == Path(argv[0]).name


def owned_alive(record: ServiceRecord | None) -> bool:
    return record is not None and pid_alive(record.pid) and cmdline_matches(record.pid, record.argv)


def spawn(argv: Sequence[str], *, log_path: Path, env: Mapping[str, str], cwd: Path) -> int:
    """Start a detached process (own session) logging to ``log_path``; return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def launch(
    name: str,
    argv: Sequence[str],
    *,
    state: Path,
    log_path: Path,
    env: Mapping[str, str],
    ports: dict[str, int],
    version: str,
) -> ServiceRecord:
    """Start a service's process and record it in ``state/service.json`` (``up`` then waits
    until it is usable; ``down`` stops exactly what the record names)."""
    pid = spawn(argv, log_path=log_path, env=env, cwd=state)
    rec = ServiceRecord(
        name=name, pid=pid, ports=ports, version=version, argv=list(argv), started_at=time.time()
    )
    rec.save(state / "service.json")
    return rec


def stop_pid(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; reap if it is our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.1)


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    alive: Callable[[], bool] | None = None,
    log_path: Path | None = None,
    interval: float = 0.5,
) -> None:
    """Poll ``check`` until true; fail early if the process died, quoting its log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and not alive():
            raise ServiceError(f"{what}: the process exited during start-up{_tail(log_path)}")
        time.sleep(interval)
    raise ServiceError(f"{what}: not ready after {timeout:.0f}s{_tail(log_path)}")


def _tail(log_path: Path | None, lines: int = 15) -> str:
    if log_path is None or not log_path.exists():
        return ""
    text = log_path.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log_path}:\n" + "\n".join(text)
