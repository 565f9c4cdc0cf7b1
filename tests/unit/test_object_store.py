"""Graph tables on an object store, the pure parts: where the settings put the tables, the
delta-rs options that keep commits atomic (conditional put), secrets reaching child processes,
errors cut to one line, and a query service that keeps its version while the store is
unreachable and says so. The real bucket is in ``tests/integration/test_object_store.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from core.errors import ConfigError
from core.object_store import delta_storage_options, one_line, split_uri
from core.settings import Settings, load_settings
from core.settings.store import TablesSettings
from core.tables.errors import GraphStoreUnavailableError
from core.tables.store import GraphTables
from query.api.state import IndexHolder
from tests.unit.test_graph_tables import graph


def remote(**changes: Any) -> TablesSettings:
    return TablesSettings(
        uri="s3://news-graph/prod/",
        endpoint_url="http://127.0.0.1:19000/",
        access_key_id="AKIA",
        secret_access_key=SecretStr("shh"),
        **changes,
    )


class TestWhereTheTablesLive:
    def test_the_default_is_the_local_data_directory(self, tmp_path: Path) -> None:
        s = load_settings(data_dir=tmp_path, namespace="desk")
        assert not s.tables.remote
        assert s.tables_uri == str(tmp_path / "desk" / "tables")

    def test_a_bucket_prefix_gets_the_namespace_appended(self, tmp_path: Path) -> None:
        s = load_settings(data_dir=tmp_path, namespace="desk", tables=remote())
        assert s.tables.remote
        assert s.tables_uri == "s3://news-graph/prod/desk/tables"
        assert s.namespace_uri == "s3://news-graph/prod/desk"

    def test_a_local_directory_may_be_named_too(self, tmp_path: Path) -> None:
        s = load_settings(namespace="desk", tables={"uri": f"file://{tmp_path}/shared"})
        assert not s.tables.remote
        assert s.tables_uri == f"{tmp_path}/shared/desk/tables"

    @pytest.mark.parametrize(
        ("field", "value", "says"),
        [
            ("uri", "gs://bucket/x", "s3://bucket/prefix"),
            ("uri", "s3:///x", "no bucket"),
            ("endpoint_url", "127.0.0.1:19000", "http:// or https://"),
        ],
    )
    def test_unusable_locations_are_refused_naming_the_setting(
        self, field: str, value: str, says: str
    ) -> None:
        with pytest.raises(ConfigError) as err:
            load_settings(tables={field: value})
        assert f"tables__{field}" in str(err.value)
        assert says in str(err.value)


class TestDeltaOptions:
    def test_local_tables_need_none(self) -> None:
        assert delta_storage_options(TablesSettings()) == {}

    def test_commits_use_conditional_put_with_the_configured_endpoint(self) -> None:
        options = delta_storage_options(remote(timeout_s=3, max_retries=1, retry_timeout_s=5))
        assert options["aws_conditional_put"] == "etag"  # atomic without a locking provider
        assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:19000"
        assert options["AWS_ALLOW_HTTP"] == "true"
        assert (options["AWS_ACCESS_KEY_ID"], options["AWS_SECRET_ACCESS_KEY"]) == ("AKIA", "shh")
        assert (options["timeout"], options["max_retries"], options["retry_timeout"]) == (
            "3s",
            "1",
            "5s",
        )
        assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in options

    def test_without_credentials_the_standard_aws_chain_is_left_to_answer(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ALLOW_HTTP"):
            monkeypatch.delenv(name, raising=False)
        options = delta_storage_options(TablesSettings(uri="s3://b/p"))
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"} & set(options)
        assert "AWS_ALLOW_HTTP" not in options  # AWS itself: https only

    def test_a_plain_http_endpoint_from_the_aws_environment_is_allowed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio.local:9000")
        options = delta_storage_options(TablesSettings(uri="s3://b/p"))
        assert options["AWS_ALLOW_HTTP"] == "true"
        assert "AWS_ENDPOINT_URL" not in options  # delta-rs reads the variable itself

    def test_bucket_and_prefix(self) -> None:
        assert split_uri("s3://b/a/b/") == ("b", "a/b")
        assert split_uri("s3://b") == ("b", "")


class TestChildProcesses:
    def test_secrets_reach_the_community_child_but_not_a_plain_dump(self) -> None:
        s = load_settings(tables=remote())
        assert "shh" not in s.model_dump_json()
        again = Settings.model_validate_json(s.child_json())
        assert again == s
        assert again.tables.secret_access_key is not None
        assert again.tables.secret_access_key.get_secret_value() == "shh"


def test_store_errors_become_one_readable_line() -> None:
    nested = OSError(
        "Kernel error -> Generic S3 error\n          \x1b[31m↳\x1b[0m Error performing GET "
        "http://h/b/_delta_log/_last_checkpoint in 6s, after 1 retries\n"
        "           \x1b[31m↳\x1b[0m HTTP error\n"
        "             \x1b[31m↳\x1b[0m error sending request"
    )
    line = one_line(nested)
    assert "\n" not in line and "\x1b" not in line
    assert line.startswith("Kernel error -> Generic S3 error")
    assert line.endswith("error sending request")
    debug = OSError("Generic S3 error: builder error\n\nDebug source:\nGeneric {\n    ),\n}")
    assert one_line(debug) == "Generic S3 error: builder error"


class FlakyStore(GraphTables):
    """Local graph tables whose storage can be switched off, as an outage would."""

    down = False

    def pointer_stamp(self) -> tuple[int, int, int] | None:
        self._fail()
        return super().pointer_stamp()

    def version_infos_all(self) -> list[Any]:
        self._fail()
        return super().version_infos_all()

    def _fail(self) -> None:
        if self.down:
            raise GraphStoreUnavailableError(f"graph tables at {self.root} not reachable: down")


class TestAnOutageSeenByTheQueryService:
    def test_the_last_good_version_is_served_and_the_store_caught_up_with(
        self, tmp_path: Path
    ) -> None:
        store = FlakyStore(tmp_path / "tables")
        store.write(graph(1, {1: "first"}))
        holder = IndexHolder(store)

        async def scenario() -> None:
            assert (await holder.refresh()) is not None
            assert holder.index is not None and holder.index.version == 1
            store.down = True
            assert holder._poll() is not None  # the last stamp seen, not an exception
            assert (await holder.refresh()).version == 1  # type: ignore[union-attr]
            assert holder.unreachable is not None and "not reachable" in str(holder.unreachable)
            assert holder.failing_since is not None
            store.down = False
            store.write(graph(2, {1: "first", 2: "second"}))
            assert (await holder.refresh()).version == 2  # type: ignore[union-attr]
            assert holder.unreachable is None and holder.failing_since is None

        asyncio.run(scenario())


def test_an_unreachable_store_is_a_503_saying_so_never_a_500(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from query.api.app import create_app
    from tests.unit.test_query_service import query_deps
    from tests.unit.test_query_service import settings as api_settings

    store = FlakyStore(tmp_path / "tables")
    store.write(graph(1, {1: "first"}))
    app = create_app(
        api_settings(tmp_path), deps=query_deps(), graph_store=store, refresh_interval_s=30
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        store.down = True
        r = client.post("/v1/query/local", json={"question": "What of E1?", "as_of": "1"})
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "graph_tables_unavailable"
