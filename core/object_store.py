"""How kafka-graphrag talks to an S3-compatible object store (``tables.uri = s3://…``).

Three clients, one configuration (``tables``: endpoint, region, credentials, timeouts):

- **delta-rs** writes and reads the graph tables (``delta_storage_options``). Commits stay
  atomic on S3 through *conditional put*: a Delta commit is the creation of
  ``_delta_log/<n>.json``, sent with ``If-None-Match: *`` (``aws_conditional_put = etag``), so
  of two writers racing for the same log entry exactly one succeeds and the other sees a
  conflict. AWS S3 has honoured that header since August 2024, and versitygw (the launcher's
  server) honours it too, so no DynamoDB locking provider and no "unsafe rename" is needed.
  A store without conditional writes must not be used (two writers could overwrite a commit).
- **obstore** (the Python binding of the same Rust ``object_store`` crate delta-rs uses) reads
  and writes the few small objects beside the tables, e.g. the community job's status, so a
  query service on another machine sees what the job is doing (``ObjectFile``).
- **pyarrow**'s S3 filesystem creates the bucket (``kgrag services up``, ``kgrag services
  bucket``): neither of the others has a create-bucket call.

Credentials left empty come from the standard AWS environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``; on EC2 or ECS the instance's
role), which each client reads itself. Errors are reduced to one line without terminal colours,
so the health probe and the CLI can quote them.
"""

from __future__ import annotations

import os
import re
import typing
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from core.errors import KgragError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

    from core.settings import Settings
    from core.settings.store import TablesSettings

DEFAULT_REGION = "us-east-1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CONNECT_TIMEOUT_S = 2.0


class ObjectStoreError(KgragError):
    """The object store could not be reached or refused a request."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """An object-store error as one readable line (delta-rs and object_store print nested
    causes over several coloured lines)."""
    text = _ANSI.sub("", str(err)).split("\n\nDebug source:")[0]
    parts = [p.strip(" ↳-") for p in text.splitlines() if sum(c.isalnum() for c in p) >= 3]
    # keep the outer message and the innermost cause (where the network error is named)
    keep = parts if len(parts) <= 2 else [parts[0], *parts[-2:]]
    line = " / ".join(p for p in keep if not p.startswith("<"))
    return line[:limit] or type(err).__name__


def _given(tables: TablesSettings) -> dict[str, str]:
    """What the settings say of the store (endpoint, region, credentials); what they leave
    out the AWS environment supplies, read by each client itself."""
    given = {
        "endpoint": tables.endpoint_url,
        "region": tables.region,
        "access_key_id": tables.access_key_id,
    }
    if tables.access_key_id and tables.secret_access_key is not None:
        given["secret_access_key"] = tables.secret_access_key.get_secret_value()
    return {k: v for k, v in given.items() if v}


def _plain_http(tables: TablesSettings) -> bool:
    """Whether the endpoint (from the settings, else the AWS environment) is plain http://,
    which both clients refuse unless told (options given explicitly replace the ones each
    would read from the environment, so this is said explicitly too)."""
    endpoint = (
        tables.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or ""
    )
    return endpoint.startswith("http://") or os.environ.get("AWS_ALLOW_HTTP", "") == "true"


_DELTA_NAMES = {
    "endpoint": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
}


def delta_storage_options(tables: TablesSettings) -> dict[str, str]:
    """delta-rs ``storage_options`` for ``tables`` (empty for a local directory)."""
    if not tables.remote:
        return {}
    options = {
        "aws_conditional_put": "etag",  # atomic commits without a locking provider (above)
        "timeout": f"{tables.timeout_s:g}s",
        "connect_timeout": f"{min(_CONNECT_TIMEOUT_S, tables.timeout_s):g}s",
        "max_retries": str(tables.max_retries),
        "retry_timeout": f"{tables.retry_timeout_s:g}s",
    }
    if _plain_http(tables):
        options["AWS_ALLOW_HTTP"] = "true"
    options.update({_DELTA_NAMES[k]: v for k, v in _given(tables).items()})
    return options


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → (``bucket``, ``a/b``)."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


class ObjectFile:
    """One small object (a few KB) in the bucket, beside the namespace's tables, read and
    written whole (a PUT replaces an object atomically).

    ``read`` returns None when the object does not exist; any other failure raises
    ``ObjectStoreError`` with a one-line reason."""

    def __init__(self, settings: Settings, key: str) -> None:
        self.uri = f"{settings.namespace_uri}/{key}"
        self._tables = settings.tables
        self._store: Any = None

    def _client(self) -> Any:
        if self._store is None:
            from obstore.store import S3Store

            t = self._tables
            config = typing.cast("S3Config", _given(t))
            client: ClientConfig = {
                "timeout": f"{t.timeout_s:g}s",
                "connect_timeout": f"{min(_CONNECT_TIMEOUT_S, t.timeout_s):g}s",
            }
            if _plain_http(t):
                client["allow_http"] = True
            retry: RetryConfig = {
                "max_retries": t.max_retries,
                "retry_timeout": timedelta(seconds=t.retry_timeout_s),
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=2),
                    "base": 2,
                },
            }
            bucket, prefix = split_uri(self.uri.rsplit("/", 1)[0])
            self._store = S3Store(
                bucket, prefix=prefix, config=config, client_options=client, retry_config=retry
            )
        return self._store

    @property
    def _name(self) -> str:
        return self.uri.rsplit("/", 1)[1]

    def read(self) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(self._client(), self._name).bytes())
        except FileNotFoundError:
            return None
        except Exception as err:  # obstore raises its own classes per failure kind
            raise ObjectStoreError(f"{self.uri}: {one_line(err)}") from None

    def write(self, data: bytes) -> None:
        import obstore

        try:
            obstore.put(self._client(), self._name, data)
        except Exception as err:
            raise ObjectStoreError(f"{self.uri}: {one_line(err)}") from None


def create_bucket(
    endpoint_url: str, bucket: str, access_key: str, secret_key: str, region: str = ""
) -> bool:
    """Create ``bucket`` unless it exists; True when it was created."""
    import pyarrow.fs as pafs

    scheme, _, host = endpoint_url.partition("://")
    fs = pafs.S3FileSystem(
        access_key=access_key or None,
        secret_key=secret_key or None,
        endpoint_override=host or None,
        scheme=scheme or "https",
        region=region or DEFAULT_REGION,
        allow_bucket_creation=True,
        connect_timeout=_CONNECT_TIMEOUT_S,
        request_timeout=10,
    )
    try:
        if fs.get_file_info(bucket).type != pafs.FileType.NotFound:
            return False
        fs.create_dir(bucket)
    except OSError as err:
        raise ObjectStoreError(
            f"could not create bucket {bucket!r} at {endpoint_url or 'AWS S3'}: {one_line(err)}"
        ) from None
    return True


def bucket_for(settings: Settings) -> bool:
    """Create the bucket ``tables.uri`` names, with ``tables``' endpoint and credentials."""
    t = settings.tables
    if not t.remote:
        raise ObjectStoreError(
            "tables.uri (KGRAG_TABLES__URI) is not an s3:// URI: the graph tables are on the "
            "local disk and need no bucket"
        )
    bucket, _ = split_uri(t.uri)
    secret = "" if t.secret_access_key is None else t.secret_access_key.get_secret_value()
    return create_bucket(t.endpoint_url, bucket, t.access_key_id, secret, t.region)
