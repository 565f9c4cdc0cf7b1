"""A real S3-compatible object store: versitygw serving a local directory, on loopback.

versitygw (Apache-2.0, ``github.com/versity/versitygw``) translates the S3 API to a POSIX
directory: each top-level directory is a bucket, objects are files, metadata lives in
extended attributes. Its go.mod has no replace directives, so ``go install`` builds it, cached
like Weaviate's binary. It honours conditional writes (``If-None-Match: *``), which is what
keeps Delta commits atomic without a locking provider (``core.object_store``).

``up`` starts it with the root credentials of ``services.object_store_*`` and creates the
bucket ``services.object_store_bucket``; point the graph tables at it with
``KGRAG_TABLES__URI=s3://kgrag/graph`` and ``KGRAG_TABLES__ENDPOINT_URL=http://127.0.0.1:19000``
(and those credentials). Nothing uses it unless ``tables.uri`` says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from core.errors import ServiceError
from core.object_store import ObjectStoreError, create_bucket
from core.settings import Settings
from kgrag.services.process import (
    ServiceRecord,
    ensure_ports_free,
    go_install,
    launch,
    owned_alive,
    pid_alive,
    port_open,
    wait_until,
)

NAME = "object-store"
MODULE = "github.com/versity/versitygw/cmd/versitygw"


def binary_path(settings: Settings) -> Path:
    v = settings.services.versitygw_version
    return settings.services.cache_dir / "bin" / f"versitygw-{v}" / "versitygw"


def prepare(settings: Settings) -> Path:
    """Build versitygw with ``go install`` unless the cached binary exists."""
    return go_install(MODULE, settings.services.versitygw_version, binary_path(settings))


def endpoint_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.services.object_store_port}"


def _state(settings: Settings) -> Path:
    return settings.services_state_dir / NAME


def data_dir(settings: Settings) -> Path:
    """The directory versitygw serves: one sub-directory per bucket."""
    return _state(settings) / "data"


def record(settings: Settings) -> ServiceRecord | None:
    return ServiceRecord.load(_state(settings) / "service.json")


def ready(settings: Settings) -> bool:
    """The S3 port answers HTTP (any status: an unsigned request is refused with 403)."""
    try:
        httpx.get(endpoint_url(settings), timeout=2)
    except httpx.HTTPError:
        return False
    return True


def up(settings: Settings) -> ServiceRecord:
    existing = record(settings)
    log_path = _state(settings) / "versitygw.log"
    if owned_alive(existing):
        assert existing is not None
        _wait_ready(settings, existing.pid, log_path)
        return existing
    s = settings.services
    ensure_ports_free({"KGRAG_SERVICES__OBJECT_STORE_PORT": s.object_store_port}, "versitygw")
    binary = prepare(settings)
    state = _state(settings)
    data = data_dir(settings)
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        str(binary),
        "--port",
        f"127.0.0.1:{s.object_store_port}",
        "--quiet",
        "posix",
        str(data),
    ]
    env = {  # credentials through the environment keep the secret out of ``ps``
        **os.environ,
        "ROOT_ACCESS_KEY_ID": s.object_store_access_key,
        "ROOT_SECRET_ACCESS_KEY": s.object_store_secret_key.get_secret_value(),
    }
    rec = launch(
        NAME,
        argv,
        state=state,
        log_path=log_path,
        env=env,
        ports={"s3": s.object_store_port},
        version=s.versitygw_version,
    )
    _wait_ready(settings, rec.pid, log_path)
    return rec


def _wait_ready(settings: Settings, pid: int, log_path: Path) -> None:
    s = settings.services
    wait_until(
        lambda: port_open(s.object_store_port) and ready(settings),
        timeout=s.start_timeout_s,
        what="versitygw",
        alive=lambda: pid_alive(pid),
        log_path=log_path,
    )
    try:
        create_bucket(
            endpoint_url(settings),
            s.object_store_bucket,
            s.object_store_access_key,
            s.object_store_secret_key.get_secret_value(),
        )
    except ObjectStoreError as e:
        raise ServiceError(f"versitygw started but {e}") from None
