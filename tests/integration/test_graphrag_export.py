"""The GraphRAG export is read, and searched, by Microsoft GraphRAG itself.

The search test builds its graph through the real pipeline: the sample news published to real
Kafka, a real worker in LLM mode against the scripted OpenAI-compatible server (chat and
embeddings), vectors in real Weaviate, then ``kgrag export`` as a user runs it. GraphRAG's own
``local_search`` and ``basic_search`` (``graphrag.api``) then answer from the exported tables
and LanceDB vectors, with the same scripted server as their model, configured by a
``settings.yaml`` written from what the export printed.

GraphRAG is installed from PyPI into its own virtual environment (it pins pandas, numpy and
friends that must not leak into the project's), cached under
``~/.cache/kafka-graphrag/graphrag-venv/graphrag-<version>-py<X.Y>`` so only the first run pays
for the install (about 85 s on the 2-core dev machine). A separate process with that venv's
python loads every exported table the way ``graphrag query`` does (``DataReader`` over a parquet
``TableProvider``) and turns them into GraphRAG's query objects with
``graphrag.query.indexer_adapters``. The test skips only when pip cannot install graphrag, and
then says what pip said.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.publish import publish
from core.settings import Settings
from core.settings.llm import EmbeddingSettings, LLMSettings
from graph.versions.model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)
from kgrag.export import ExportError, export_graphrag, read_vectors, write_vectors
from kgrag.testing.scripted_answers import embed_text
from kgrag.testing.scripted_llm import ScriptedLLMServer
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import TunedWorker, wait_complete_llm_version

GRAPHRAG_VERSION = os.environ.get("KGRAG_GRAPHRAG_VERSION", "3.3.0")
VENV_CACHE = Path(
    os.environ.get(
        "KGRAG_GRAPHRAG_VENV_CACHE", Path.home() / ".cache" / "kafka-graphrag" / "graphrag-venv"
    )
)
INSTALL_TIMEOUT_S = 1500

# graphrag/data_model/schemas.py (3.x) *_FINAL_COLUMNS, in order
GRAPHRAG_COLUMNS = {
    "entities": ["id", "human_readable_id", "title", "type", "description", "text_unit_ids",
                 "frequency", "degree"],
    "relationships": ["id", "human_readable_id", "source", "target", "description", "weight",
                      "combined_degree", "text_unit_ids"],
    "communities": ["id", "human_readable_id", "community", "level", "parent", "children",
                    "title", "entity_ids", "relationship_ids", "text_unit_ids", "period",
                    "size"],
    "community_reports": ["id", "human_readable_id", "community", "level", "parent",
                          "children", "title", "summary", "full_content", "rank",
                          "rating_explanation", "findings", "full_content_json", "period",
                          "size"],
    "text_units": ["id", "human_readable_id", "text", "n_tokens", "document_id", "entity_ids",
                   "relationship_ids", "covariate_ids"],
    "documents": ["id", "human_readable_id", "title", "text", "text_unit_ids",
                  "creation_date", "raw_data"],
    "covariates": ["id", "human_readable_id", "covariate_type", "type", "description",
                   "subject_id", "object_id", "status", "start_date", "end_date",
                   "source_text", "text_unit_id"],
}  # fmt: skip

# -- a small, consistent news graph --------------------------------------------------------

ENTITIES = {  # key -> (title, type, text units)
    "bank of japan": ("BANK OF JAPAN", "organization", ("tu-1", "tu-2")),
    "yen": ("YEN", "currency", ("tu-1",)),
    "ministry of finance": ("MINISTRY OF FINANCE", "organization", ("tu-2",)),
    "opec": ("OPEC", "organization", ("tu-3",)),
    "saudi arabia": ("SAUDI ARABIA", "geo", ("tu-3",)),
}
EDGES = [  # (source key, target key, text unit)
    ("bank of japan", "yen", "tu-1"),
    ("ministry of finance", "yen", "tu-2"),
    ("bank of japan", "ministry of finance", "tu-2"),
    ("opec", "saudi arabia", "tu-3"),
]
COMMUNITIES = [  # (number, level, parent, children, title, members)
    (0, 0, -1, (2, 3), "Yen support", ("bank of japan", "yen", "ministry of finance")),
    (1, 0, -1, (), "Oil output", ("opec", "saudi arabia")),
    (2, 1, 0, (), "Bank of Japan and the yen", ("bank of japan", "yen")),
    (3, 1, 0, (), "Ministry of Finance", ("ministry of finance",)),
]
UNITS = {"tu-1": "doc-1", "tu-2": "doc-1", "tu-3": "doc-2"}


def rel_id(a: str, b: str) -> str:
    return f"{a}\u241e{b}"


def degree(key: str) -> int:
    return sum(key in (a, b) for a, b, _ in EDGES)


def build_snapshot(with_claims: bool = True) -> Snapshot:
    entities = tuple(
        SnapshotEntity(id=k, human_readable_id=i, title=t, type=ty, description=f"About {t}.",
                       text_unit_ids=tus, frequency=len(tus), degree=degree(k))
        for i, (k, (t, ty, tus)) in enumerate(ENTITIES.items())
    )  # fmt: skip
    rels = tuple(
        SnapshotRelationship(id=rel_id(a, b), human_readable_id=i, source=ENTITIES[a][0],
                             target=ENTITIES[b][0], description=f"{a} and {b}", weight=1.0 + i,
                             combined_degree=degree(a) + degree(b), text_unit_ids=(tu,),
                             source_id=a, target_id=b)
        for i, (a, b, tu) in enumerate(EDGES)
    )  # fmt: skip
    communities, reports = [], []
    for n, level, parent, children, title, members in COMMUNITIES:
        inner = tuple(rel_id(a, b) for a, b, _ in EDGES if a in members and b in members)
        units = tuple(sorted({tu for m in members for tu in ENTITIES[m][2]}))
        common = dict(
            human_readable_id=n,
            community=n,
            level=level,
            parent=parent,
            children=children,
            title=title,
            period="1987-03-02",
            size=len(members),
        )
        communities.append(
            SnapshotCommunity(
                id=f"c-{n}",
                entity_ids=members,
                relationship_ids=inner,
                text_unit_ids=units,
                **common,
            )
        )
        findings = ({"summary": f"{title} finding", "explanation": "Because [Data: ...]"},)
        reports.append(
            SnapshotReport(
                id=f"c-{n}",
                summary=f"Summary of {title}",
                full_content=f"# {title}\n\nSummary of {title}",
                rank=2.5 + n,
                rating_explanation="impact",
                findings=findings,
                full_content_json="{}",
                **common,
            )
        )
    claims = (
        SnapshotClaim(id="claim-1", human_readable_id=0, covariate_type="claim",
                      type="INTERVENTION", description="The BoJ bought yen.",
                      subject_id="BANK OF JAPAN", object_id="YEN", status="TRUE",
                      start_date="1987-03-01", end_date="1987-03-01",
                      source_text="bought dollars", text_unit_id="tu-1"),
        SnapshotClaim(id="claim-2", human_readable_id=1, covariate_type="claim",
                      type="OUTPUT CUT", description="Saudi Arabia may cut output.",
                      subject_id="SAUDI ARABIA", object_id=None, status="SUSPECTED",
                      start_date=None, end_date=None, source_text="may cut",
                      text_unit_id="tu-3"),
    ) if with_claims else ()  # fmt: skip
    units = tuple(
        SnapshotTextUnit(id=tu, human_readable_id=i, text=f"text of {tu}", n_tokens=10 + i,
                         document_id=doc,
                         entity_ids=tuple(k for k, v in ENTITIES.items() if tu in v[2]),
                         relationship_ids=tuple(rel_id(a, b) for a, b, t in EDGES if t == tu),
                         covariate_ids=tuple(c.id for c in claims if c.text_unit_id == tu))
        for i, (tu, doc) in enumerate(UNITS.items())
    )  # fmt: skip
    docs = tuple(
        SnapshotDocument(id=d, human_readable_id=i, title=f"Title {d}", text=f"Body {d}",
                         text_unit_ids=tuple(t for t, dd in UNITS.items() if dd == d),
                         creation_date=f"1987-03-0{i + 1}T00:00:00Z",
                         raw_data={"topics": ["money-fx"], "source": "reuters"} if i == 0 else {})
        for i, d in enumerate(("doc-1", "doc-2"))
    )  # fmt: skip
    meta = SnapshotMeta(version=3, created_at="2024-01-01T00:00:00Z",
                        newest_document_time="1987-03-02T00:00:00Z")  # fmt: skip
    return Snapshot(meta=meta, entities=entities, relationships=rels,
                    communities=tuple(communities), community_reports=tuple(reports),
                    text_units=units, documents=docs, claims=claims)  # fmt: skip


# -- the export itself, checked with pyarrow (no graphrag needed) ---------------------------


class TestParquetShape:
    def test_files_and_exact_columns(self, tmp_path: Path) -> None:
        paths = export_graphrag(build_snapshot(), tmp_path)
        assert sorted(p.name for p in paths) == sorted(f"{t}.parquet" for t in GRAPHRAG_COLUMNS)
        for table, columns in GRAPHRAG_COLUMNS.items():
            assert pq.read_schema(tmp_path / f"{table}.parquet").names == columns, table
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)

    def test_types_graphrag_expects(self, tmp_path: Path) -> None:
        export_graphrag(build_snapshot(), tmp_path)
        reports = pq.read_schema(tmp_path / "community_reports.parquet")
        assert reports.field("findings").type == pa.list_(
            pa.struct([("summary", pa.string()), ("explanation", pa.string())])
        )
        assert reports.field("children").type == pa.list_(pa.int64())
        assert reports.field("rank").type == pa.float64()
        entities = pq.read_schema(tmp_path / "entities.parquet")
        assert entities.field("text_unit_ids").type == pa.list_(pa.string())
        assert entities.field("human_readable_id").type == pa.int64()

    def test_raw_data_is_json_or_null(self, tmp_path: Path) -> None:
        export_graphrag(build_snapshot(), tmp_path)
        raw = pq.read_table(tmp_path / "documents.parquet").column("raw_data").to_pylist()
        assert json.loads(raw[0]) == {"topics": ["money-fx"], "source": "reuters"}
        assert raw[1] is None

    def test_no_claims_no_covariates_even_from_an_earlier_export(self, tmp_path: Path) -> None:
        export_graphrag(build_snapshot(), tmp_path)
        paths = export_graphrag(build_snapshot(with_claims=False), tmp_path)
        assert "covariates.parquet" not in {p.name for p in paths}
        assert not (tmp_path / "covariates.parquet").exists()

    def test_repeated_community_titles_are_told_apart(self, tmp_path: Path) -> None:
        s = build_snapshot()
        same = tuple(c.__class__(**{**_fields(c), "title": "Same"}) for c in s.communities)
        export_graphrag(Snapshot(**{**_fields(s), "communities": same}), tmp_path)
        titles = pq.read_table(tmp_path / "communities.parquet").column("title").to_pylist()
        assert len(set(titles)) == len(titles) == 4


class TestVectors:
    def vectors(self, dim: int = 8) -> dict[str, dict[str, list[float]]]:
        s = build_snapshot()
        return {
            "entity": {e.id: embed_text(e.title, dim) for e in s.entities[1:]},  # one missing
            "text_unit": {**{u.id: embed_text(u.text, dim) for u in s.text_units},
                          "tu-gone": embed_text("a deleted unit", dim)},
            "report": {r.id: embed_text(r.summary, dim) for r in s.community_reports},
        }  # fmt: skip

    def test_one_table_per_graphrag_embedding_holding_the_snapshots_rows(
        self, tmp_path: Path
    ) -> None:
        import lancedb

        snap = build_snapshot()
        written = write_vectors(snap, self.vectors(), tmp_path)
        assert written.dimension == 8
        assert written.written == {"entity_description": 4, "text_unit_text": 3,
                                   "community_full_content": 4}  # fmt: skip
        assert written.missing == {"entity_description": 1, "text_unit_text": 0,
                                   "community_full_content": 0}  # fmt: skip
        db = lancedb.connect(str(tmp_path / "lancedb"))
        units = db.open_table("text_unit_text").to_arrow()
        assert sorted(units.column("id").to_pylist()) == ["tu-1", "tu-2", "tu-3"]  # not tu-gone
        assert units.schema.field("vector").type == pa.list_(pa.float32(), 8)
        # a second export replaces the tables
        again = write_vectors(snap, {"entity": {}, "text_unit": {}, "report": {}}, tmp_path)
        assert again.written == dict.fromkeys(written.written, 0)
        assert db.open_table("text_unit_text").count_rows() == 0

    def test_vectors_of_two_sizes_are_refused(self, tmp_path: Path) -> None:
        mixed = self.vectors()
        mixed["report"] = {"c-0": embed_text("x", 16)}
        with pytest.raises(ExportError, match="different dimensions"):
            write_vectors(build_snapshot(), mixed, tmp_path)

    def test_weaviate_down_says_what_to_do(self, tmp_path: Path) -> None:
        from tests.conftest import make_settings

        endpoints = {"kafka.bootstrap_servers": "127.0.0.1:1", "weaviate.url":
                     "http://127.0.0.1:1", "weaviate.grpc_port": 2}  # fmt: skip
        settings = make_settings(endpoints, "nowhere", tmp_path)
        with pytest.raises(ExportError, match=r"kgrag services up.*--no-vectors"):
            asyncio.run(read_vectors(settings))


def _fields(obj: object) -> dict[str, object]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}  # type: ignore[attr-defined]


# -- GraphRAG's own loaders, in GraphRAG's own environment ---------------------------------

LOADER = r"""
import asyncio, json, sys
from graphrag_storage.file_storage import FileStorage
from graphrag_storage.tables.parquet_table_provider import ParquetTableProvider
from graphrag.data_model.data_reader import DataReader
from graphrag.query.indexer_adapters import (
    read_indexer_communities, read_indexer_covariates, read_indexer_entities,
    read_indexer_relationships, read_indexer_reports, read_indexer_text_units,
)

reader = DataReader(ParquetTableProvider(FileStorage(base_dir=sys.argv[1])))
names = ["entities", "relationships", "communities", "community_reports", "text_units",
         "documents", "covariates"]
t = {n: asyncio.run(getattr(reader, n)()) for n in names}
entities = read_indexer_entities(t["entities"], t["communities"], community_level=None)
relationships = read_indexer_relationships(t["relationships"])
reports = read_indexer_reports(t["community_reports"], t["communities"], community_level=None)
level0 = read_indexer_reports(t["community_reports"], t["communities"], community_level=0)
communities = read_indexer_communities(t["communities"], t["community_reports"])
units = read_indexer_text_units(t["text_units"])
covariates = read_indexer_covariates(t["covariates"])
print(json.dumps({
    "rows": {n: len(df) for n, df in t.items()},
    "entities": {e.id: {"title": e.title, "short_id": e.short_id, "rank": e.rank,
                        "communities": sorted(e.community_ids), "units": e.text_unit_ids}
                 for e in entities},
    "relationships": [[r.source, r.target, r.weight, r.rank] for r in relationships],
    "reports": sorted([r.id, r.community_id, r.rank, r.title] for r in reports),
    "level0_reports": sorted(r.community_id for r in level0),
    "communities": sorted([c.id, c.short_id, c.level, c.parent, c.children]
                          for c in communities),
    "units": {u.id: [u.document_id, u.n_tokens, u.entity_ids] for u in units},
    "covariates": {c.id: [c.subject_id, c.covariate_type, c.attributes["status"]]
                   for c in covariates},
    "findings": t["community_reports"]["findings"].iloc[0].tolist()
                if hasattr(t["community_reports"]["findings"].iloc[0], "tolist")
                else t["community_reports"]["findings"].iloc[0],
}, default=str))
"""


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs never build the same venv at once
        yield


def _clean_env() -> dict[str, str]:
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def graphrag_python() -> Path:
    """The python of a venv holding graphrag==GRAPHRAG_VERSION, built once and cached."""
    tag = f"graphrag-{GRAPHRAG_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"
    venv = VENV_CACHE / tag
    python = venv / "bin" / "python"
    done = venv / ".kgrag-complete"
    with _exclusive(VENV_CACHE / f"{tag}.lock"):
        if done.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        started = time.monotonic()
        make = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                              text=True, env=_clean_env(), check=False)  # fmt: skip
        if make.returncode != 0:
            pytest.skip(f"cannot create a venv for graphrag: {make.stderr.strip()[-800:]}")
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
             f"graphrag=={GRAPHRAG_VERSION}"],
            capture_output=True, text=True, env=_clean_env(), timeout=INSTALL_TIMEOUT_S,
            check=False,
        )  # fmt: skip
        if pip.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.skip(
                f"graphrag=={GRAPHRAG_VERSION} cannot be installed; pip said: "
                f"{(pip.stderr or pip.stdout).strip()[-1500:]}"
            )
        seconds = time.monotonic() - started
        done.write_text(json.dumps({"version": GRAPHRAG_VERSION, "install_s": round(seconds)}))
        print(f"installed graphrag=={GRAPHRAG_VERSION} in {seconds:.0f}s into {venv}")
    return python


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 300)
def test_graphrag_loaders_read_every_table(graphrag_python: Path, tmp_path: Path) -> None:
    out = tmp_path / "output"
    export_graphrag(build_snapshot(), out)
    script = tmp_path / "load_with_graphrag.py"
    script.write_text(LOADER)
    run = subprocess.run([str(graphrag_python), str(script), str(out)], capture_output=True,
                         text=True, env=_clean_env(), timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])

    assert got["rows"] == {"entities": 5, "relationships": 4, "communities": 4,
                           "community_reports": 4, "text_units": 3, "documents": 2,
                           "covariates": 2}  # fmt: skip
    # entities joined to their communities through communities.entity_ids == entities.id
    boj = got["entities"]["bank of japan"]
    assert boj == {"title": "BANK OF JAPAN", "short_id": "0", "rank": 2,
                   "communities": ["0", "2"], "units": ["tu-1", "tu-2"]}  # fmt: skip
    assert got["entities"]["opec"]["communities"] == ["1"]
    assert ["BANK OF JAPAN", "YEN", 1.0, 4] in got["relationships"]
    # every report survives GraphRAG's roll-up; level filtering keeps the two roots
    assert [r[1] for r in got["reports"]] == ["0", "1", "2", "3"]
    assert ["c-3", "3", 5.5, "Ministry of Finance"] in got["reports"]
    assert got["level0_reports"] == ["0", "1"]
    assert ["c-0", "0", "0", "-1", [2, 3]] in got["communities"]
    assert got["units"]["tu-2"] == ["doc-1", 11, ["bank of japan", "ministry of finance"]]
    # GraphRAG's adapter reads the claim type (our `type`) into Covariate.covariate_type
    assert got["covariates"]["claim-2"] == ["SAUDI ARABIA", "OUTPUT CUT", "SUSPECTED"]
    assert got["findings"][0]["summary"] == "Yen support finding"


# -- GraphRAG's own search on an export of the real pipeline ------------------------------

NEWS = Path(__file__).resolve().parents[2] / "examples" / "news" / "articles.jsonl"
QUESTION = "Why did the Rotterdam dockworkers strike?"

SEARCH = r"""
import asyncio, json, sys
from pathlib import Path
import pandas as pd
import graphrag.api as api
from graphrag.config.load_config import load_config

root, question = Path(sys.argv[1]), sys.argv[2]
config = load_config(root)
out = root / "output"
t = {n: pd.read_parquet(out / f"{n}.parquet") for n in
     ["entities", "communities", "community_reports", "text_units", "relationships",
      "covariates"]}

def records(context):
    return {k: v.to_dict(orient="records") if hasattr(v, "to_dict") else v
            for k, v in context.items()}

local, local_context = asyncio.run(api.local_search(
    config=config, entities=t["entities"], communities=t["communities"],
    community_reports=t["community_reports"], text_units=t["text_units"],
    relationships=t["relationships"], covariates=t["covariates"], community_level=2,
    response_type="Multiple Paragraphs", query=question))
basic, basic_context = asyncio.run(api.basic_search(
    config=config, text_units=t["text_units"], response_type="Multiple Paragraphs",
    query=question))
print(json.dumps({"local": local, "local_context": records(local_context),
                  "basic": basic, "basic_context": records(basic_context)}, default=str))
"""


@dataclass
class Exported:
    settings: Settings
    llm: ScriptedLLMServer
    snapshot: Snapshot
    root: Path  # GraphRAG's project root: settings.yaml and output/
    printed: str  # what `kgrag export` printed


@pytest.fixture(scope="module")
def exported(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Exported]:
    tmp = tmp_path_factory.mktemp("graphrag-pipeline")
    with ScriptedLLMServer() as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-grx",
            tmp,
            llm=LLMSettings(base_url=llm.base_url, max_retries=2, timeout_s=30),
            embeddings=EmbeddingSettings(base_url=llm.base_url),
        )
        asyncio.run(ensure_topics(settings))
        env = {
            "KGRAG_COMMUNITY__DEBOUNCE_S": "1",
            "KGRAG_COMMUNITY__MAX_WAIT_S": "10",
            "KGRAG_EXTRACTION__CLAIMS_ENABLED": "true",  # GraphRAG's covariates, off by default
        }
        worker = TunedWorker(settings, tmp / "worker.log", env).start()
        try:
            wanted = {json.loads(line)["id"] for line in NEWS.read_text().splitlines() if line}
            asyncio.run(publish(settings, NEWS))
            snap = wait_complete_llm_version(settings, wanted, worker, timeout_s=420)
            root = tmp / "graphrag"
            run = subprocess.run(
                # the version waited for: the job may write another after it (a retry, a
                # report brought up to date), which the test's expectations do not know
                [sys.executable, "-m", "kgrag.cli", "export", "--format", "graphrag",
                 "--version", str(snap.meta.version), str(root / "output")],
                env=settings_env(settings), capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
            assert run.returncode == 0, run.stderr[-3000:]
            yield Exported(settings, llm, snap, root, " ".join(run.stdout.split()))
        finally:
            worker.stop()
            asyncio.run(delete_namespace_topics(settings))


def test_the_export_holds_every_vector_and_links_claims_to_their_units(
    exported: Exported,
) -> None:
    snap = exported.snapshot
    out = exported.root / "output"
    printed = exported.printed
    assert f"wrote 7 tables of version {snap.meta.version}" in printed
    assert (
        f"entity_description {len(snap.entities)}, text_unit_text {len(snap.text_units)}, "
        f"community_full_content {len(snap.community_reports)}; dimension 1024" in printed
    )
    assert "without a vector" not in printed
    assert f"embed queries with {exported.settings.embeddings.model} at" in printed

    # the vectors, read as GraphRAG's LanceDB store reads them, are Weaviate's
    import lancedb

    db = lancedb.connect(str(out / "lancedb"))
    entities = db.open_table("entity_description").to_arrow()
    assert entities.schema.names == ["id", "vector", "create_date", "update_date"]
    assert sorted(entities.column("id").to_pylist()) == sorted(e.id for e in snap.entities)
    in_weaviate = asyncio.run(_vectors(exported.settings, "entity"))
    for key, vector in zip(entities.column("id").to_pylist(),
                           entities.column("vector").to_pylist(), strict=True):  # fmt: skip
        assert len(vector) == 1024 and _cosine(vector, in_weaviate[key]) > 0.9999, key
    for name, rows in (("text_unit_text", snap.text_units),
                       ("community_full_content", snap.community_reports)):  # fmt: skip
        ids = db.open_table(name).to_arrow().column("id").to_pylist()
        assert sorted(ids) == sorted(r.id for r in rows), name

    # claims name a unit that states them, and each unit lists exactly the claims naming it
    claims = pq.read_table(out / "covariates.parquet").to_pylist()
    units = {u["id"]: u for u in pq.read_table(out / "text_units.parquet").to_pylist()}
    assert claims, "the scripted model extracts claims from the sample news"
    for c in claims:
        assert c["text_unit_id"] in units, c
        assert c["id"] in units[c["text_unit_id"]]["covariate_ids"]
    listed = {(cid, u) for u, row in units.items() for cid in row["covariate_ids"]}
    assert {cid for cid, _ in listed} == {c["id"] for c in claims}
    by_id = {c["id"]: c for c in claims}
    for cid, unit in listed:  # a unit listing a claim states it: the claim quotes the unit
        quoted = _words(by_id[cid]["source_text"])
        assert len(quoted & _words(units[unit]["text"])) >= 0.8 * len(quoted), (cid, unit)


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 300)
def test_graphrag_loaders_read_the_pipelines_export(
    exported: Exported, graphrag_python: Path, tmp_path: Path
) -> None:
    script = tmp_path / "load_with_graphrag.py"
    script.write_text(LOADER)
    command = [str(graphrag_python), str(script), str(exported.root / "output")]
    run = subprocess.run(command, capture_output=True, text=True, env=_clean_env(), timeout=300,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    snap = exported.snapshot
    assert got["rows"] == {
        "entities": len(snap.entities),
        "relationships": len(snap.relationships),
        "communities": len(snap.communities),
        "community_reports": len(snap.community_reports),
        "text_units": len(snap.text_units),
        "documents": len(snap.documents),
        "covariates": len(snap.claims),
    }
    assert len(got["reports"]) == len(snap.community_reports)  # none lost in the roll-up
    assert set(got["entities"]) == {e.id for e in snap.entities}
    members = {e for c in snap.communities for e in c.entity_ids}
    # GraphRAG's join gives an entity in no community the community "-1" (as its own does for
    # entities its clustering left out)
    clustered = {k for k, e in got["entities"].items() if e["communities"] != ["-1"]}
    assert clustered == members


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 600)
def test_graphrags_own_local_and_basic_search_answer_from_the_export(
    exported: Exported, graphrag_python: Path
) -> None:
    settings, llm = exported.settings, exported.llm
    db_uri = re.search(r"vector_store.db_uri: (\S+),", exported.printed)
    size = re.search(r"vector_store.vector_size: (\d+)", exported.printed)
    assert db_uri and size, exported.printed
    model = settings.embeddings.model
    (exported.root / "settings.yaml").write_text(
        f"""completion_models:
  default_completion_model:
    model_provider: openai
    model: {settings.llm.model}
    api_base: {llm.base_url}
    api_key: scripted
embedding_models:
  default_embedding_model:
    model_provider: openai
    model: {model}
    api_base: {llm.base_url}
    api_key: scripted
    call_args:
      dimensions: {size.group(1)}
vector_store:
  type: lancedb
  db_uri: {db_uri.group(1)}
  vector_size: {size.group(1)}
"""
    )
    script = exported.root / "search_with_graphrag.py"
    script.write_text(SEARCH)
    llm.clear_calls()
    env = {**_clean_env(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no fetch of its price list
    command = [str(graphrag_python), str(script), str(exported.root), QUESTION]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])

    # GraphRAG asked our model: the question embedded with the export's model, then one
    # search prompt each, both GraphRAG's own (the scripted model refuses any it cannot read)
    calls = llm.calls()
    embedded = [c for c in calls if c.kind == "embeddings"]
    assert embedded and all(c.model == model and c.input == [QUESTION] for c in embedded)
    searches = [c for c in calls if c.kind == "graphrag_search"]
    assert [c.status for c in searches] == [200, 200]

    # local search found its entities through the exported vectors: the entities nearest the
    # question by the vectors the pipeline wrote are in the context GraphRAG built
    question = embed_text(QUESTION, int(size.group(1)))
    snap = exported.snapshot
    entity_vectors = asyncio.run(_vectors(settings, "entity"))
    titles = {e.id: e.title for e in snap.entities}
    nearest = sorted(titles, key=lambda k: -_cosine(question, entity_vectors[k]))[:5]
    in_context = {row["entity"] for row in got["local_context"]["entities"]}
    assert {titles[k] for k in nearest} <= in_context, (nearest, in_context)
    assert any("ROTTERDAM" in t.upper() for t in in_context)
    assert got["local_context"]["reports"] and got["local_context"]["relationships"]
    assert "I do not know" not in got["local"] and "[Data:" in got["local"]
    assert "rotterdam" in got["local"].lower()

    # basic search found its sources through the exported text-unit vectors
    unit_vectors = asyncio.run(_vectors(settings, "text_unit"))
    texts = {u.id: u.text for u in snap.text_units}
    best = sorted(texts, key=lambda k: -_cosine(question, unit_vectors[k]))[:3]
    sources = {" ".join(row["text"].split()) for row in got["basic_context"]["sources"]}
    assert {" ".join(texts[k].split()) for k in best} <= sources
    assert "[Data: Sources (" in got["basic"] and "I do not know" not in got["basic"]


async def _vectors(settings: Settings, kind: str) -> dict[str, list[float]]:
    from core.vector_store import WeaviateStore

    async with WeaviateStore(settings) as store:
        return await store.vectors(kind)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / ((math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))) or 1.0)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))
