"""``kgrag query local|global|basic|drift``, ``kgrag questions``, ``kgrag watch``, ``kgrag api``.

The query commands work directly on the snapshot store and Weaviate (no HTTP service needed)
through the same ``query.engine.run_query`` the API uses, so an answer on the command line
and over HTTP is the same answer. Output is readable (the answer, then a table that resolves
every citation to its record) or, with ``--json``, the API's JSON. Errors are one line.
``kgrag trends`` (``kgrag.cli_trends``) shares the options, index loading and output helpers
defined here.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from core.errors import KgragError
from core.settings import Settings, get_settings
from core.tables.errors import GraphTablesError, SnapshotNotFoundError
from core.tables.migration import legacy_hint
from core.tables.opening import open_graph_store
from core.tables.versions import parse_as_of
from query.index import QueryIndex
from query.results import QueryResult, describe_basis

if TYPE_CHECKING:
    from query.engine import Method

query_app = typer.Typer(
    help="Ask the index: local, global, basic and DRIFT search.", no_args_is_help=True
)
console = Console()
err_console = Console(stderr=True)

NO_SNAPSHOT_HINT = (
    "no graph snapshot yet in {path}: run a worker (`kgrag worker`) and publish documents "
    "(`kgrag publish examples/news`), then ask again once the community job has written one"
)
KIND_STYLES = {
    "emerged": "bold green",
    "grew": "green",
    "shrank": "yellow",
    "split": "magenta",
    "merged": "cyan",
    "dissolved": "red",
    "report_updated": "blue",
    "bootstrap": "bold",
    "aliased": "dim cyan",
    "unaliased": "dim yellow",
}

Since = Annotated[str | None, typer.Option(help="ISO date or 'last N days' (document time)")]
Until = Annotated[str | None, typer.Option(help="ISO date (document time)")]
AsOf = Annotated[
    str | None,
    typer.Option("--as-of", help="What the graph knew then: a graph version number or an ISO time"),
]
Level = Annotated[int, typer.Option(help="Community level (0 is the coarsest)")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead")]
Question = Annotated[str, typer.Argument(help="The question")]
HistoryFile = Annotated[
    Path | None,
    typer.Option(
        "--history",
        help="Earlier turns of the conversation: a JSON list of {role, content}, oldest first",
    ),
]


def fail(message: str) -> NoReturn:
    """The one-line error every query command ends with, and exit status 1."""
    err_console.print(f"[red]error:[/] {message}", highlight=False)
    raise typer.Exit(1)


def load_index(settings: Settings, as_of: str | None = None) -> QueryIndex:
    """The index of the latest graph version (or the one ``as_of`` names); a friendly exit
    when there is none."""
    store = open_graph_store(settings, for_queries=True)
    try:
        return QueryIndex.read(store, parse_as_of(as_of))
    except GraphTablesError as e:
        fail(str(e))
    except SnapshotNotFoundError as e:
        if as_of is not None:
            fail(str(e))
        fail(legacy_hint(settings, store) or NO_SNAPSHOT_HINT.format(path=settings.tables_uri))


async def _ask(
    settings: Settings, method: Method, question: str, opts: Any, as_of: str | None = None
) -> tuple[QueryResult, QueryIndex]:
    from query.deps import open_deps
    from query.engine import run_query

    index = await asyncio.to_thread(load_index, settings, as_of)
    async with open_deps(settings) as deps:
        return await run_query(method, question, index, deps, opts), index


def _query(
    method: Method, question: str, as_json: bool, as_of: str | None = None, **options: Any
) -> None:
    from query.api.views import result_view
    from query.engine import QueryOptions

    settings = get_settings()
    try:
        history = _history(options.pop("history", None))
        opts = QueryOptions(history=history, **options)
        result, index = asyncio.run(_ask(settings, method, question, opts, as_of))
    except KgragError as e:
        fail(str(e))
    if as_json:
        print_json(result_view(result, index))
    else:
        print_answer(result, index)


def questions_cmd(
    question: Question,
    count: Annotated[int, typer.Option(min=1, max=20, help="How many questions")] = 5,
    since: Since = None,
    until: Until = None,
    history: HistoryFile = None,
    as_of: AsOf = None,
    as_json: AsJson = False,
) -> None:
    """Suggested next questions, from the local context of the latest question (and the
    conversation so far, which they do not repeat)."""
    from query.deps import open_deps
    from query.engine import QueryOptions, run_questions

    settings = get_settings()

    async def ask(opts: QueryOptions) -> Any:
        index = await asyncio.to_thread(load_index, settings, as_of)
        async with open_deps(settings) as deps:
            return await run_questions(question, index, deps, count=count, opts=opts)

    try:
        opts = QueryOptions(since=since, until=until, history=_history(history))
        result = asyncio.run(ask(opts))
    except KgragError as e:
        fail(str(e))
    if as_json:
        print_json(result.as_dict())
        return
    for n, q in enumerate(result.questions, start=1):
        console.print(f"{n}. {q}", highlight=False)
    console.print(
        f"[dim]{result.mode} · snapshot {result.snapshot_version} · {result.llm_calls} LLM "
        f"call(s), {result.prompt_tokens}+{result.completion_tokens} tokens, "
        f"{result.elapsed_ms:.0f} ms[/]"
    )


def _history(path: Path | None) -> tuple[Any, ...]:
    from query.history import read_history

    return () if path is None else read_history(path)


def print_json(obj: Any) -> None:
    """The ``--json`` output: indented, one trailing newline."""
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def print_answer(result: QueryResult, index: QueryIndex, out: Console | None = None) -> None:
    """The answer, a table resolving each citation, and what the answer cost."""
    from query.api.views import references

    out = out or console
    basis = describe_basis(result.basis) or f"snapshot {result.snapshot_version}"
    title = f"{result.method} search · {basis} · {result.mode}"
    out.print(Panel(Text(result.answer), title=title, title_align="left"))
    refs = references(index, result.citations)
    if any(refs.values()):
        table = Table("cited", "id", "record", title="Citations", title_justify="left")
        for dataset, rows in refs.items():
            for row in rows:
                table.add_row(dataset, str(row["id"]), _describe(dataset, row))
        out.print(table)
    removed = (
        f", {result.removed_citations} made-up citation(s) removed"
        if result.removed_citations
        else ""
    )
    cost = f", ${result.cost_usd:.4f}" if result.cost_usd else ""
    out.print(
        f"[dim]{result.llm_calls} LLM call(s), {result.prompt_tokens}+"
        f"{result.completion_tokens} tokens{cost}, {result.elapsed_ms:.0f} ms{removed}[/]"
    )


def _describe(dataset: str, row: dict[str, Any]) -> str:
    match dataset:
        case "Entities":
            return f"{row['title']} ({row['type']})"
        case "Relationships":
            return f"{row['source']} – {row['target']}"
        case "Reports":
            return f"{row['title']} (level {row['level']})"
        case "Sources":
            return f"{row['title']} · {str(row['published_at'])[:10]} · {row['document_id']}"
    return str(row.get("description", ""))


@query_app.command("local")
def local_cmd(
    question: Question,
    since: Since = None,
    until: Until = None,
    level: Level = 2,
    history: HistoryFile = None,
    as_of: AsOf = None,
    as_json: AsJson = False,
) -> None:
    """About specific entities: the question's nearest entities and what surrounds them."""
    _query(
        "local", question, as_json, as_of, since=since, until=until, level=level, history=history
    )


@query_app.command("global")
def global_cmd(
    question: Question,
    since: Since = None,
    until: Until = None,
    level: Level = 2,
    dynamic: Annotated[
        bool, typer.Option(help="Rate reports top-down, read only relevant branches")
    ] = False,
    history: HistoryFile = None,
    as_of: AsOf = None,
    as_json: AsJson = False,
) -> None:
    """About the whole collection: map-reduce over the community reports of one level."""
    _query(
        "global",
        question,
        as_json,
        as_of,
        since=since,
        until=until,
        level=level,
        dynamic=dynamic,
        history=history,
    )


@query_app.command("basic")
def basic_cmd(
    question: Question,
    since: Since = None,
    until: Until = None,
    k: Annotated[int, typer.Option(help="Text units in the context")] = 10,
    history: HistoryFile = None,
    as_of: AsOf = None,
    as_json: AsJson = False,
) -> None:
    """Baseline RAG: the text units nearest to the question."""
    _query("basic", question, as_json, as_of, since=since, until=until, k=k, history=history)


@query_app.command("drift")
def drift_cmd(
    question: Question,
    since: Since = None,
    until: Until = None,
    primer_k: Annotated[
        int | None, typer.Option(help="Community reports the primer reads (setting: drift)")
    ] = None,
    followups: Annotated[int | None, typer.Option(help="Follow-ups answered per step")] = None,
    depth: Annotated[int | None, typer.Option(help="Steps of follow-ups")] = None,
    history: HistoryFile = None,
    as_of: AsOf = None,
    as_json: AsJson = False,
) -> None:
    """From the whole to the detail: the nearest community reports first, then follow-up
    questions answered by local search."""
    from query.drift_search import DriftConfig

    config = DriftConfig.of(
        get_settings().drift, primer_k=primer_k, followups=followups, depth=depth
    )
    _query(
        "drift", question, as_json, as_of, since=since, until=until, drift=config, history=history
    )


# ---- watch -------------------------------------------------------------------------------------


def format_event(payload: dict[str, Any]) -> Text:
    kind = str(payload.get("kind", "?"))
    text = Text()
    text.append(f"{kind:<15}", style=KIND_STYLES.get(kind, ""))
    text.append(f" v{payload.get('snapshot_version', '?')}", style="dim")
    if kind == "headline":  # a storyline that emerged or surged: its title and why
        why = payload.get("why", {})
        text.append(f" #{payload.get('rank', '?')} ", style="bold")
        text.append(str(payload.get("title", "")), style="bold")
        text.append(
            f"\n    {why.get('documents', '?')} articles {why.get('since', '?')}.."
            f"{why.get('until', '?')}, {why.get('expected_documents', '?')} expected "
            f"(x{why.get('ratio', '?')})",
            style="dim",
        )
        new = [str(e.get("title", "")) for e in payload.get("new_entities", [])]
        if new:
            text.append(f"; new: {', '.join(new[:4])}", style="dim")
        for d in payload.get("top_documents", [])[:3]:
            text.append(f"\n    {d.get('day', '')}  {d.get('title', '')} ({d.get('id', '')})")
        return text
    if kind in ("aliased", "unaliased"):  # a name resolved to another: the names and why
        text.append(f" {payload.get('title', '')}", style="bold")
        text.append(f"  ({payload.get('rule', '?')}) {payload.get('evidence', '')}", style="dim")
        return text
    text.append(f" L{payload.get('level', '?')} {payload.get('community_id', '?')}")
    text.append(f" size {payload.get('size', '?')}  ")
    text.append(str(payload.get("title", "")), style="bold")
    return text


async def _watch(settings: Settings, start: str, kinds: frozenset[str] | None) -> None:
    from query.sse import event_feed
    from streams.admin import ensure_topics

    await ensure_topics(settings)
    first = True
    async for batch in event_feed(settings, start="earliest" if start == "earliest" else "latest"):
        if first:
            first = False
            console.print(
                f"[dim]watching {settings.topics.community_events} from {start} (Ctrl-C to stop)[/]"
            )
        for e in batch:
            if kinds is None or e.payload["kind"] in kinds:
                console.print(format_event(e.payload))


def watch_cmd(
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Replay every event first")
    ] = False,
    kind: Annotated[
        list[str] | None,
        typer.Option(help="Only these kinds (repeatable): headline, emerged, grew, …"),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Every event: lineage and aliases too, not headlines only")
    ] = False,
) -> None:
    """Live headlines: the storylines that emerged or surged, each with why (the articles in
    the last days against what was expected, new entities, top articles). ``--raw`` shows
    every community lineage event too (emerged, grew, shrank, split, merged, dissolved,
    report_updated) and names resolved to one thing (aliased, unaliased)."""
    from graph.communities.lineage import PUBLISHED_KINDS, kinds_shown

    unknown = sorted(set(kind or ()) - set(PUBLISHED_KINDS))
    if unknown:
        fail(f"unknown event kind(s) {', '.join(unknown)}; use {', '.join(PUBLISHED_KINDS)}")
    settings = get_settings()
    start = "earliest" if from_beginning else "latest"
    try:
        asyncio.run(_watch(settings, start, kinds_shown(kind, raw)))
    except KeyboardInterrupt:
        return
    except KgragError as e:
        fail(str(e))
    except Exception as e:  # aiokafka raises its own types when the broker is away
        fail(f"cannot read community events from {settings.kafka.bootstrap_servers}: {e}")


# ---- api ---------------------------------------------------------------------------------------


def api_cmd(
    host: Annotated[str | None, typer.Option(help="Bind address (default: api.host)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: api.port)")] = None,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs)."""
    import uvicorn

    from core.malloc import cap_malloc_arenas
    from query.api.app import create_app

    settings = get_settings()
    cap_malloc_arenas(settings.api.malloc_arenas)  # before uvicorn and the readers start threads
    uvicorn.run(
        create_app(settings),
        host=host or settings.api.host,
        port=port or settings.api.port,
        log_level="info",
    )
