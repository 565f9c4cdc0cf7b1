"""``kgrag``: the command line. Errors print one clear message, never a stack trace."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kgrag.errors import KgragError
from kgrag.settings import Settings, get_settings

app = typer.Typer(
    help="GraphRAG as an event-driven, incremental indexer on Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
services_app = typer.Typer(
    help="Local Kafka and Weaviate (no Docker needed).", no_args_is_help=True
)
query_app = typer.Typer(help="Ask the index.", no_args_is_help=True)
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
    """Start Kafka and Weaviate (reusing ones already started), wait until usable."""
    from kgrag.services import launcher

    if docker:
        launcher.docker_up()
        console.print("[green]Kafka and Weaviate are up (docker compose)[/]")
        return
    settings = _settings()
    started = time.monotonic()
    with console.status("starting Kafka and Weaviate (first run downloads and builds them)…"):
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
    """Health, version and ports of Kafka and Weaviate."""
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


# ---- topics, worker, publish -------------------------------------------------------------


@app.command("topics")
def topics_create() -> None:
    """Create this namespace's topics with the configured partition count."""
    from streams.admin import ensure_topics

    settings = _settings()
    created = asyncio.run(ensure_topics(settings))
    console.print(f"created {len(created)} topic(s); {len(settings.all_topics())} in namespace")


@app.command("worker")
def worker(
    loglevel: Annotated[str, typer.Option(help="debug, info, warning")] = "info",
) -> None:
    """Run the stream worker (chunker, embedder, …) until interrupted."""
    from faust import Worker

    from streams.admin import ensure_topics
    from streams.app import build

    settings = _settings()
    asyncio.run(ensure_topics(settings))
    topo = build(settings)
    Worker(topo.app, loglevel=loglevel).execute_from_commandline()


@app.command("publish")
def publish_cmd(
    path: Annotated[Path, typer.Argument(help="A .jsonl file or a directory of them")],
    limit: Annotated[int | None, typer.Option(help="Send at most this many documents")] = None,
) -> None:
    """Send documents (one JSON object per line) to the documents topic."""
    from kgrag.publish import publish
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
        f"{settings.topic('documents')}; {len(summary.bad)} bad line(s) skipped"
    )


# ---- query -------------------------------------------------------------------------------


@query_app.command("basic")
def query_basic(
    question: Annotated[str, typer.Argument(help="The question")],
    limit: Annotated[int, typer.Option(help="How many text units")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Vector search over text units: the best passages and their documents."""
    hits = asyncio.run(_basic(question, limit))
    if as_json:
        sys.stdout.write(orjson.dumps([h.__dict__ for h in hits], default=str).decode() + "\n")
        return
    if not hits:
        console.print("no text units indexed yet: publish documents and run a worker")
        return
    for i, h in enumerate(hits, 1):
        snippet = " ".join(h.text.split())[:240]
        console.print(
            f"[bold]{i}. {h.title or h.document_id}[/] [dim]({h.document_id}, "
            f"distance {h.distance:.3f})[/]\n   {snippet}…"
        )


async def _basic(question: str, limit: int) -> list[Any]:
    from graph.hashing_embedding import HashingEmbedder
    from kgrag.vector_store import WeaviateStore
    from query.basic import search_text_units

    settings = _settings()
    async with WeaviateStore(settings) as store:
        return await search_text_units(
            question,
            embedder=HashingEmbedder(settings.embeddings.dimensions),
            store=store,
            limit=limit,
        )


# ---- demo ----------------------------------------------------------------------------------


@app.command("demo")
def demo(
    path: Annotated[Path, typer.Option(help="Articles to index")] = Path("examples/news"),
    question: Annotated[str, typer.Option(help="Question to ask")] = (
        "What did OPEC decide about oil production?"
    ),
) -> None:
    """Services up, a worker, publish the sample news, ask a question."""
    from kgrag.demo import run_demo

    run_demo(_settings(), path, question, console)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except KgragError as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
