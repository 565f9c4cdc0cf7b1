"""``kgrag``: the command line. Errors print one clear message, never a stack trace."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from core.errors import KgragError
from core.settings import Settings, get_settings

app = typer.Typer(
    help="GraphRAG as an event-driven, incremental indexer on Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
services_app = typer.Typer(
    help="Local Kafka, Weaviate and object store (no Docker needed).", no_args_is_help=True
)
from kgrag.cli_query import (  # noqa: E402
    api_cmd,
    query_app,
    questions_cmd,
    watch_cmd,
)
from kgrag.cli_status import status_cmd  # noqa: E402
from kgrag.cli_trends import trends_cmd  # noqa: E402

app.add_typer(services_app, name="services")
app.add_typer(query_app, name="query")

console = Console()
err_console = Console(stderr=True)


def _settings() -> Settings:
    return get_settings()


# ---- services ----------------------------------------------------------------------------


@services_app.command("up")
def services_up(
    docker: Annotated[bool, typer.Option(help="Use docker compose instead")] = False,
) -> None:
    """Start Kafka, Weaviate and the object store (reusing ones already started), wait until
    usable."""
    from kgrag.services import launcher

    if docker:
        launcher.docker_up()
        console.print("[green]Kafka, Weaviate and the object store are up (docker compose)[/]")
        return
    settings = _settings()
    started = time.monotonic()
    with console.status("starting Kafka, Weaviate and versitygw (the first run builds them)…"):
        records = launcher.up(settings)
    for rec in records:
        ports = ", ".join(f"{k} {v}" for k, v in rec.ports.items())
        console.print(f"[green]✔[/] {rec.name} {rec.version} pid {rec.pid} ({ports})")
    console.print(f"ready in {time.monotonic() - started:.1f}s")


@services_app.command("down")
def services_down(
    docker: Annotated[bool, typer.Option(help="Use docker compose instead")] = False,
) -> None:
    """Stop the services this launcher started (and only those)."""
    from kgrag.services import launcher

    if docker:
        launcher.docker_down()
        return
    stopped = launcher.down(_settings())
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing of ours was running")


@services_app.command("status")
def services_status() -> None:
    """Health, version and ports of Kafka, Weaviate and the object store."""
    from kgrag.services import launcher

    table = Table("service", "ours", "healthy", "version", "pid", "ports", "endpoint")
    for st in launcher.status(_settings()):
        table.add_row(
            st.name,
            "yes" if st.running else "no",
            "[green]yes[/]" if st.healthy else "[red]no[/]",
            st.version or "-",
            str(st.pid or "-"),
            ", ".join(f"{k} {v}" for k, v in st.ports.items()),
            st.detail,
        )
    console.print(table)


@services_app.command("bucket")
def services_bucket() -> None:
    """Create the bucket ``tables.uri`` names (KGRAG_TABLES__URI=s3://bucket/prefix) at
    ``tables.endpoint_url`` with ``tables``' credentials, unless it exists."""
    from core.object_store import bucket_for

    settings = _settings()
    created = bucket_for(settings)
    console.print(f"bucket of {settings.tables.uri}: {'created' if created else 'already there'}")


# ---- topics, worker, publish -------------------------------------------------------------


@app.command("topics")
def topics_create() -> None:
    """Create this namespace's topics with the configured partition count."""
    from streams.admin import ensure_topics

    settings = _settings()
    created = asyncio.run(ensure_topics(settings))
    console.print(f"created {len(created)} topic(s); {len(settings.all_topics())} in namespace")


# set by ``core.children.Supervisor`` on a child it restarts (the community job, the vector worker)
SupervisorRestarts = Annotated[
    int,
    typer.Option(
        "--supervisor-restarts",
        min=0,
        hidden=True,
        help="Times the worker's supervisor restarted this process (set by the supervisor)",
    ),
]


@app.command("worker")
def worker(
    loglevel: Annotated[str, typer.Option(help="debug, info, warning")] = "info",
    community_job: Annotated[
        bool, typer.Option(help="Also run the community job (one leader across workers)")
    ] = True,
    vectors: Annotated[
        bool, typer.Option(help="Also run the vector worker (the embedders into Weaviate)")
    ] = True,
) -> None:
    """Run the stream worker (chunker, extractor, mergers) until interrupted.

    The community job and the vector worker (the embedders, in a consumer group of their own
    so a Weaviate outage holds back only the vectors) run as supervised child processes,
    started once the worker is ready: restarted with a growing backoff when they die, ended
    with the worker. With KGRAG_WORKER__METRICS_PORT set, its Prometheus metrics (extraction
    tokens and cost, LLM calls) are served on that port.
    """
    from prometheus_client import CollectorRegistry

    from core.children import supervise_kgrag
    from kgrag.worker import GraphWorker, build, serve_metrics
    from streams.admin import ensure_topics
    from streams.app import freeze_startup_heap

    settings = _settings()
    asyncio.run(ensure_topics(settings))
    helpers = [
        supervise_kgrag([command, "--loglevel", loglevel], start=False)
        for command, wanted in (("community-job", community_job), ("vector-worker", vectors))
        if wanted
    ]
    registry = CollectorRegistry()
    topo = build(settings, registry)
    serve_metrics(settings, registry)
    freeze_startup_heap()
    GraphWorker(topo.app, helpers=helpers, loglevel=loglevel).execute_from_commandline()


@app.command("vector-worker")
def vector_worker(
    loglevel: Annotated[str, typer.Option(help="debug, info, warning")] = "info",
    supervisor_restarts: SupervisorRestarts = 0,
) -> None:
    """Run the embedders (chunks and graph changes into Weaviate) until interrupted; `kgrag
    worker` starts one beside itself."""
    from faust import Worker

    from kgrag.worker import build_vectors
    from streams.admin import ensure_topics
    from streams.app import freeze_startup_heap

    settings = _settings()
    if supervisor_restarts:
        logging.getLogger(__name__).warning(
            "vector worker restarted by its supervisor (%d restarts)", supervisor_restarts
        )
    asyncio.run(ensure_topics(settings))
    app = build_vectors(settings)
    freeze_startup_heap()
    Worker(app, loglevel=loglevel).execute_from_commandline()


@app.command("community-job")
def community_job_cmd(
    loglevel: Annotated[str, typer.Option(help="debug, info, warning")] = "info",
    supervisor_restarts: SupervisorRestarts = 0,
) -> None:
    """Run the debounced community job (re-clustering, reports, graph versions, events)."""
    from agents.community.job import CommunityJob
    from streams.admin import ensure_topics

    logging.getLogger().setLevel(loglevel.upper())
    settings = _settings()
    asyncio.run(ensure_topics(settings))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(CommunityJob(settings, supervisor_restarts=supervisor_restarts).run_forever())


@app.command("publish")
def publish_cmd(
    path: Annotated[Path, typer.Argument(help="A .jsonl file or a directory of them")],
    limit: Annotated[int | None, typer.Option(help="Send at most this many documents")] = None,
) -> None:
    """Send documents (one JSON object per line) to the documents topic."""
    from core.publish import publish
    from streams.admin import ensure_topics

    settings = _settings()
    asyncio.run(ensure_topics(settings))
    with Progress(
        TextColumn("publishing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[bad]} bad"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("publish", total=limit, bad=0)

        def tick(sent: int, bad: int) -> None:
            progress.update(task, completed=sent, bad=bad)

        summary = asyncio.run(publish(settings, path, limit=limit, on_progress=tick))
    for b in summary.bad:
        err_console.print(f"[yellow]{b.path}:{b.line}[/]: {b.reason}")
    console.print(
        f"sent {summary.sent} document(s) from {summary.files} file(s) to "
        f"{settings.topics.documents}; {len(summary.bad)} bad line(s) skipped"
    )


@app.command("delete")
def delete_cmd(
    ids: Annotated[list[str], typer.Argument(help="Ids of the documents to delete")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Send the deletion even for ids the graph does not hold (yet): a document "
            "published moments ago",
        ),
    ] = False,
) -> None:
    """Delete published documents: everything they contributed to the graph and its vectors
    is retracted, and entities, relationships and communities left with no evidence go."""
    from core.publish import UNKNOWN_HINT, delete_documents, plan_deletion
    from core.tables.opening import open_graph_store
    from streams.admin import ensure_topics

    settings = _settings()
    plan = plan_deletion(open_graph_store(settings), ids, force=force)
    if plan.send:
        asyncio.run(ensure_topics(settings))
        asyncio.run(delete_documents(settings, plan.send))
        console.print(
            f"deleting {len(plan.send)} document(s): {', '.join(plan.send)} "
            "(the worker retracts them; the next community run removes what they alone backed)"
        )
    if plan.already:
        console.print(f"already deleted, nothing to do: {', '.join(plan.already)}")
    if plan.unknown:
        raise KgragError(f"not indexed: {', '.join(plan.unknown)}; {UNKNOWN_HINT} (--force)")


# ---- query, trends, watch, api (kgrag/cli_query.py, kgrag/cli_trends.py) -------------------------

app.command("questions")(questions_cmd)
app.command("trends")(trends_cmd)
app.command("watch")(watch_cmd)
app.command("api")(api_cmd)
app.command("status")(status_cmd)


@app.command("export")
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Directory for the parquet tables")],
    fmt: Annotated[str, typer.Option("--format", help="Only 'graphrag' for now")] = "graphrag",
    version: Annotated[int | None, typer.Option(help="Graph version (default: latest)")] = None,
    vectors: Annotated[
        bool,
        typer.Option(
            "--vectors/--no-vectors",
            help="Also write the vectors from Weaviate as GraphRAG's LanceDB tables "
            "(OUT_DIR/lancedb); Weaviate holds the latest vectors only",
        ),
    ] = True,
) -> None:
    """Write the latest graph version (or --version) as Microsoft GraphRAG output tables,
    with the vectors its local, basic and DRIFT search read."""
    from core.tables.migration import legacy_hint
    from core.tables.opening import open_graph_store
    from kgrag.export import export_graphrag, read_vectors, write_vectors

    if fmt != "graphrag":
        raise KgragError(f"unknown export format {fmt!r}; use --format graphrag")
    settings = _settings()
    store = open_graph_store(settings)
    if store.latest_version() is None:
        raise KgragError(
            legacy_hint(settings, store)
            or "no graph version yet: run `kgrag worker` and publish documents first"
        )
    snapshot = store.load(version)
    paths = export_graphrag(snapshot, out_dir)
    console.print(f"wrote {len(paths)} tables of version {snapshot.meta.version} to {out_dir}")
    if not vectors:
        return
    written = write_vectors(snapshot, asyncio.run(read_vectors(settings)), out_dir)
    counts = ", ".join(f"{name} {n}" for name, n in written.written.items())
    console.print(f"wrote vectors to {written.db_uri} ({counts}; dimension {written.dimension})")
    if any(written.missing.values()):
        gaps = ", ".join(f"{name} {n}" for name, n in written.missing.items() if n)
        console.print(f"rows without a vector (not embedded yet, or replaced since): {gaps}")
    emb = settings.embeddings
    model = f"{emb.model} at {emb.base_url}" if emb.base_url else "kgrag's offline embedder"
    console.print(
        f"GraphRAG's settings.yaml: vector_store.db_uri: {written.db_uri.resolve()}, "
        f"vector_store.vector_size: {written.dimension}; embed queries with {model}"
    )


@app.command("migrate")
def migrate_cmd() -> None:
    """Convert snapshots of earlier releases into graph tables.

    The latest old snapshot becomes the first graph version; nothing happens once graph
    tables exist.
    """
    from core.tables.migration import convert_legacy_snapshots
    from core.tables.opening import open_graph_store

    settings = _settings()
    store = open_graph_store(settings)
    version = convert_legacy_snapshots(settings, store)
    if version is None:
        latest = store.latest_listed()
        console.print(
            "nothing to convert: "
            + (f"graph tables hold version {latest}" if latest else "no old snapshots found")
        )
        return
    console.print(
        f"converted snapshot {version} into graph tables at {store.root}; "
        f"{settings.snapshots_dir} is no longer read and may be deleted"
    )


# ---- demo ----------------------------------------------------------------------------------


@app.command("demo")
def demo(
    path: Annotated[Path, typer.Option(help="Articles to index")] = Path("examples/news"),
    question: Annotated[str, typer.Option(help="Question to ask")] = (
        "Why did dockworkers in Rotterdam walk out?"
    ),
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop the worker and dashboard a demo left running")
    ] = False,
) -> None:
    """Services up, a worker, publish the sample news, ask questions; leaves the dashboard
    running (stop it with --stop)."""
    from kgrag.demo import run_demo, stop_demo

    if stop:
        stop_demo(_settings(), console)
        return
    run_demo(_settings(), path, question, console)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # aiokafka logs every retried produce (e.g. NOT_LEADER right after topic creation) as a
    # warning; the retries succeed, and real failures still raise.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    from aiokafka.errors import KafkaError

    try:
        app()
    except KgragError as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(1)
    except KafkaError as e:
        where = _settings().kafka.bootstrap_servers
        err_console.print(
            f"[red]error:[/] Kafka at {where} did not answer ({e}); start it with "
            "`kgrag services up`, or point KGRAG_KAFKA__BOOTSTRAP_SERVERS at a running broker"
        )
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
