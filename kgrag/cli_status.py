"""``kgrag status``: is the index keeping up, and if not, where is the work stuck?

One command answers what an operator asks first: how much is indexed, how much work waits at
each stage, whether the community job is alive and what it last did, which reports the LLM
refused, how old the newest version is, and when the backlog will be gone. It needs neither a
running worker nor the query service, and when Kafka is down it still shows the rest and says
Kafka was unreachable, so it is useful precisely when something is down.

This module is the command: ``kgrag.status_facts`` gathers the report, ``kgrag.status_render``
prints it for people, and ``--json`` prints one object with stable keys (listed in the
command's help) for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Annotated

import orjson
import typer
from rich.console import Console

from core.errors import KgragError
from core.settings import get_settings
from kgrag.status_facts import collect
from kgrag.status_render import print_report

console = Console()


class KafkaUnreachableError(KgragError):
    """Kafka could not be read; the rest of the status was still shown."""


@contextlib.contextmanager
def _quiet_kafka_client() -> Iterator[None]:
    """aiokafka logs each refused connection as an error; the command says it once itself."""
    logger = logging.getLogger("aiokafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def status_cmd(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (keys above) instead")
    ] = False,
    sample_s: Annotated[
        float,
        typer.Option(
            "--sample-s", min=0.0, help="Seconds between the two backlog samples for the ETA"
        ),
    ] = 2.0,
    timeout_s: Annotated[
        float, typer.Option("--timeout-s", min=0.1, help="Give up on Kafka after this long")
    ] = 5.0,
) -> None:
    """Indexed documents, pending work per stage, the community job, the ETA.

    Reads the latest snapshot, the community job's status file and Kafka
    (worker-group lag, graph_changes end offsets), sampling the backlog twice
    --sample-s apart for the ETA. When Kafka is unreachable the rest is still
    shown, and the command exits with 1 (also with --json).

    --json prints one object with these stable keys:
      namespace; checked_at (unix s); documents_indexed (int or null);
      ingestion: what extracting the indexed documents spent at the LLM:
        documents, prompt_tokens, completion_tokens, cost_usd,
        cost_per_document_usd (null before the first version);
      snapshot: version, created_at, age_s, mode, counts,
        consumed_offsets (null before the first version);
      kafka: bootstrap_servers, reachable, error (str or null);
      pending: documents, chunks, extractions, entity_items,
        relationship_items, claim_items, graph_changes, vectors
        (null: no Kafka);
      pending_total (int or null);
      eta: seconds (null: unknown), drained_per_s, sample_s, text;
      community_job: the job's status file with alive and restarts
        (null when no job has run in this namespace);
      community_job_heard_s_ago (float or null);
      workers: each stream worker's stall watchdog (group, name, alive,
        checks, stalls, repairs, failures, last_failure);
      health: status (ok, degraded, no_snapshot), reasons (strings);
      notes (strings).
    """
    settings = get_settings()
    with _quiet_kafka_client():
        report = asyncio.run(collect(settings, sample_s=sample_s, timeout_s=timeout_s))
    if as_json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
        if report.kafka_error:
            raise typer.Exit(1)
        return
    print_report(report, console)
    if report.kafka_error:
        raise KafkaUnreachableError(report.kafka_error)
