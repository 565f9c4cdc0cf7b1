"""``kgrag trends``: what is emerging in a window of document time, as tables in the terminal.

The figures come from ``query.trends`` (the same as the API's ``/trends``); this module asks
for them, optionally beside an earlier graph version's answer, and lays them out: storylines
by emerging score, what dropped since the compared version, new entities, mention timelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from core.settings import get_settings
from kgrag.cli_query import AsJson, AsOf, Since, Until, console, fail, load_index, print_json

if TYPE_CHECKING:
    from query.trends import ThenCommunity, TrendComparison, TrendsResult

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(points: Sequence[tuple[str, int]], since: str, until: str) -> str:
    """One bar per day of the window, days without mentions at the bottom."""
    first, last = date.fromisoformat(since), date.fromisoformat(until)
    counts = dict(points)
    days = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    top = max(counts.values(), default=0)
    if top == 0:
        return ""
    steps = len(_BARS) - 1
    return "".join(_BARS[-(-counts.get(d, 0) * steps // top)] for d in days)


def trends_cmd(
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, typer.Option(help="Rows per table")] = 10,
    level: Annotated[int | None, typer.Option(help="Only communities of this level")] = None,
    as_of: AsOf = None,
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help="Answer from this graph version too (number or ISO time) and show then beside now",
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """What is emerging: one row per storyline (its levels folded into one, rows never share
    members) by emerging score, with its articles in the window against what was expected and
    its top articles; new entities; mention timelines."""
    from query.errors import QueryError
    from query.time_window import parse_time_window
    from query.trends import compare_trends, trends

    settings = get_settings()
    index = load_index(settings, as_of)
    then = None if compare is None else load_index(settings, compare)
    try:
        window = parse_time_window(since, until, newest=index.newest)
        result = trends(index, window, limit=limit, level=level)
        if then is not None:
            then_window = parse_time_window(since, until, newest=then.newest)
            result = compare_trends(result, then, then_window, limit=limit, level=level)
    except QueryError as e:
        fail(str(e))
    if as_json:
        print_json(result.as_dict())
        return
    _print_trends(result)


def _print_trends(result: TrendsResult) -> None:
    console.print(
        f"[bold]Trends {result.since} .. {result.until}[/] ({result.window_days} days, "
        f"snapshot {result.snapshot_version})"
    )
    console.print(
        _storylines_table(result)
        if result.communities
        else "[dim]no community mentioned in the window[/]"
    )
    if result.compared is not None:
        _print_compared(result.compared)
    new = Table("entity", "type", "first seen", "mentions", title="New entities")
    for ne in result.new_entities:
        new.add_row(ne.title, ne.type, ne.first_seen, str(ne.mentions))
    console.print(new)
    lines = Table("entity", "mentions per day", "total", title="Mention timelines")
    for t in result.timelines:
        spark = sparkline(t.points, result.since, result.until)
        lines.add_row(t.title, spark, str(sum(n for _, n in t.points)))
    console.print(lines)


def _storylines_table(result: TrendsResult) -> Table:
    compared = result.compared
    then_header = [f"v{compared.snapshot_version}"] if compared else []
    table = Table(
        "#", "community", "level", "storyline", "score", "articles", "expected", *then_header,
        "top articles",
    )  # fmt: skip
    for i, c in enumerate(result.communities, 1):
        then_cell = [_then_cell(compared.then[c.id])] if compared else []
        others = len(c.folded) + len(c.within)
        more = f"\n[dim]+{others} nested communities[/]" if others else ""
        top = "\n".join(f"{d.day} {d.title}" for d in c.top_documents[:3])
        table.add_row(
            str(i), str(c.community), str(c.level), f"{c.title}{more}", f"{c.score:.2f}",
            str(c.documents), f"{c.expected_documents:.1f}", *then_cell, top,
        )  # fmt: skip
    return table


def _then_cell(then: ThenCommunity) -> str:
    if not then.existed:
        return "new"
    if then.rank is None:
        return f"not mentioned ({then.size} members)"
    return f"#{then.rank} ({then.score:.2f})"


def _print_compared(compared: TrendComparison) -> None:
    console.print(
        f"[dim]v{compared.snapshot_version}: the same question from graph version "
        f"{compared.snapshot_version} ({compared.since} .. {compared.until}): its rank "
        "and score then, or new (the community did not exist)[/]"
    )
    dropped = Table("rank then", "community", "title", "score then", title="Dropped since")
    for d in compared.dropped:
        dropped.add_row(str(d.rank), str(d.community), d.title, f"{d.score:.2f}")
    if compared.dropped:
        console.print(dropped)
