"""The settings tree: env overrides, YAML file, and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.settings import load_settings


def test_nested_environment_variables_override_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGRAG_KAFKA__PARTITIONS", "16")
    monkeypatch.setenv("KGRAG_COMMUNITY__MAX_CLUSTER_SIZE", "25")
    s = load_settings()
    assert s.kafka.partitions == 16
    assert s.community.max_cluster_size == 25


def test_yaml_file_is_read_and_env_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = tmp_path / "kgrag.yaml"
    cfg.write_text("namespace: fromyaml\nchunking:\n  size: 300\n  overlap: 50\n")
    monkeypatch.setenv("KGRAG_CONFIG", str(cfg))
    monkeypatch.setenv("KGRAG_CHUNKING__SIZE", "400")
    s = load_settings()
    assert s.namespace == "fromyaml"
    assert (s.chunking.size, s.chunking.overlap) == (400, 50)


@pytest.mark.parametrize(
    ("env", "value", "mentions"),
    [
        ("KGRAG_KAFKA__PARTITIONS", "0", ["kafka__partitions", "KGRAG_KAFKA__PARTITIONS"]),
        ("KGRAG_KAFKA__BOOTSTRAP_SERVERS", "localhost", ["host:port"]),
        ("KGRAG_CHUNKING__OVERLAP", "900", ["overlap", "smaller than size"]),
        ("KGRAG_CHUNKING__ENCODING", "gpt2", ["o200k_base"]),
        ("KGRAG_WEAVIATE__URL", "weaviate:8080", ["http(s)://host"]),
        ("KGRAG_NAMESPACE", "has space", ["namespace", "letters, digits"]),
    ],
)
def test_a_wrong_value_names_the_setting_and_what_is_allowed(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, mentions: list[str]
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    for text in mentions:
        assert text in str(err.value)


def test_missing_config_file_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KGRAG_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="not a file"):
        load_settings()


def test_namespace_isolates_topics_app_and_collections() -> None:
    a, b = load_settings(namespace="one"), load_settings(namespace="two")
    assert set(a.all_topics()).isdisjoint(b.all_topics())
    assert a.app_id != b.app_id
    assert a.collection("text_unit") == "TextUnit_one" != b.collection("text_unit")


def test_hybrid_search_leans_lexical_offline_and_follows_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KGRAG_WEAVIATE__HYBRID_ALPHA", raising=False)
    monkeypatch.delenv("KGRAG_EMBEDDINGS__BASE_URL", raising=False)
    offline = load_settings()
    assert offline.hybrid_alpha == 0.1
    assert offline.weaviate.hybrid_fusion == "relative_score"
    monkeypatch.setenv("KGRAG_EMBEDDINGS__BASE_URL", "http://127.0.0.1:9/v1")
    assert load_settings().hybrid_alpha == 0.5
    monkeypatch.setenv("KGRAG_WEAVIATE__HYBRID_ALPHA", "0.7")
    monkeypatch.setenv("KGRAG_WEAVIATE__HYBRID_FUSION", "ranked")
    s = load_settings()
    assert (s.hybrid_alpha, s.weaviate.hybrid_fusion) == (0.7, "ranked")
    monkeypatch.setenv("KGRAG_WEAVIATE__HYBRID_FUSION", "average")
    with pytest.raises(ConfigError, match="hybrid_fusion"):
        load_settings()
