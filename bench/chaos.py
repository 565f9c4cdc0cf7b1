"""A chaos run with figures: the live pipeline disturbed every way the reliability issue names,
compared with an undisturbed run of the same input.

Usage: ``.venv/bin/python bench/chaos.py [--full] [--articles N] [--rate 12] [--kill-every S]
[--out PATH]``

What runs. A private Kafka broker and a private Weaviate (the project's own launchers on other
ports and their own state, so restarting them disturbs nothing else; started here, stopped on
the way out, or by a guard process when the bench is killed), the scripted OpenAI-compatible
server (LLM mode, 20 ms a call), and per run a fresh namespace with ``kgrag worker`` (static
membership: ``kafka.instance_id``) and ``kgrag api``. The input is the first ``--articles``
Reuters dev articles with ``--corrections`` of them corrected, each correction published
right after its original (the same batch of the chunker): the original's closing sentences
cut, so the correction retracts evidence.

The *reference* run publishes everything at once and waits. The *chaos* run publishes at
``--rate`` articles a second while: the worker is killed with ``kill -9`` every ``--kill-every``
seconds (at least ``--kills`` times) and restarted at once; Weaviate is stopped for
``--weaviate-down`` seconds; the broker is stopped for ``--broker-down`` seconds once (at
``--broker-at``); the
scripted LLM answers 20% of calls with 429 and 5% with malformed output; and a query load
(local and basic search, two a second) runs against the API. Then both runs are drained (both
worker groups' lag 0 and every document folded) and compared on evidence, not prose:

- ``documents_lost``: reference documents missing from the chaos run's graph;
- ``text_units_extra``: chaos text units the reference does not have (a correction that left
  its original's chunk behind);
- ``mentions_double_counted``: mentions an entity has beyond the reference's, summed;
- ``entities_diff`` / ``relationships_diff``: rows present in one run only, or with other
  mention/document counts or weight; ``descriptions_diff``: rows whose kept description sets
  differ; ``claims_diff``: subjects whose kept claim sets differ; and
  ``diffs_not_from_dead_letters``: per kind, the differing rows (a sample of them in
  ``diffs_not_from_dead_letters_sample``) that no chunk the
  chaos run dead-lettered supports in the reference — a chunk whose every extraction attempt
  came back garbled is dead-lettered with its reason, by design, and its rows differ;
- ``vectors_diff``: text-unit and entity keys Weaviate holds in one run only, plus duplicates;
- ``recovery_s``: seconds from a kill until the graph worker's group commits again
  (consumption resumed; the worker is restarted at once), median, min and max over the kills
  (``recovery_s_each`` per kill; a kill after which consumption did not resume within 180 s
  counts as 180 s and in ``recoveries_missed``);
- ``dlq``: dead letters of the chaos run by reason (first words);
- ``api_500``, ``api_503`` (and ``api_ok``, ``api_other``) of the query load.

Targets (judged on the full run): 0 documents lost, text units extra, mentions double counted,
entity, relationship, description and vector differences, differing rows not from dead
letters (``diffs_not_from_dead_letters_total``) and API 500s; at least 4 kills; every
recovery within 10 s (``recovery_s`` max). The quick run takes 600 articles (10
corrections) with Weaviate down 20 s, the broker down 10 s at 60 s and a kill every 15 s;
``--full`` 5,000 articles (50 corrections), Weaviate down 60 s, the broker down 10 s at
110 s, a kill every 20 s. What it does not model: a worker killed while Weaviate is down and
the broker is down at once, more than one worker, or disk loss. Writes its run into
``bench/results/chaos.json`` (``bench.record``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from aiokafka.admin import AIOKafkaAdminClient

from bench.ingest import absorbed
from bench.live import (
    LLMServer,
    api_ready,
    dies_with_us,
    free_port,
    fresh_namespace,
    from_start,
    start_api,
    start_llm_server,
    start_worker,
    stop,
    wait_ready,
)
from bench.record import Target, mode_argument, record, timing
from bench.results_io import REUTERS_DEV, read_jsonl
from core.lag import pipeline_lag
from core.publish import DocumentPublisher
from core.settings import Settings, get_settings
from core.vector_store import WeaviateStore
from graph.extraction.documents import document_from_obj
from graph.merge.view import GraphView
from kgrag.services import kafka, weaviate
from kgrag.services.process import port_open, stop_pid
from streams.codecs import Retraction, decode_chunk_event

DATA = REUTERS_DEV
# below the ephemeral range, apart from the test suite's private services
PORTS = {"broker": 29692, "controller": 29693, "http": 28281, "grpc": 25252}
PORTS |= {"gossip": 27947, "raft": 28501}
FAULTS = {"rate_limit": 0.2, "malformed": 0.05, "retry_after_s": 0.5, "seed": 11}
QUESTIONS = ("What happened to oil prices?", "What did the central banks do about the dollar?")
WEAVIATE_AT_S = 30.0  # Weaviate stops this long after publishing starts
RECOVERY_TIMEOUT_S = 180.0  # a kill after which consumption did not resume counts this long
MEASURES = ("bench/live.py", "bench/ingest.py", "kgrag/services")
# each mode's schedule; a command-line option overrides its entry
MODES = {
    "quick": {"articles": 600, "corrections": 10, "kill_every": 15.0, "weaviate_down": 20.0,
              "broker_at": 60.0},
    "full": {"articles": 5000, "corrections": 50, "kill_every": 20.0, "weaviate_down": 60.0,
             "broker_at": 110.0},
}  # fmt: skip

# the limits this bench has always set: nothing lost, doubled or differing, no API 500, at
# least 4 kills, and every recovery within 10 s
_ZERO = (
    "documents_lost",
    "text_units_extra",
    "mentions_double_counted",
    "entities_diff",
    "relationships_diff",
    "descriptions_diff",
    "vectors_diff",
    "api_500",
    "diffs_not_from_dead_letters_total",
)
TARGETS = {
    **{name: Target(f"/{name}", "<=", 0) for name in _ZERO},
    "kills": Target("/kills", ">=", 4),
    "recovery_s_max": Target("/recovery_s/max", "<=", 10.0),
}


# ---- input ----


def corpus(n: int, corrections: int) -> list[dict[str, Any]]:
    """The first ``n`` dev articles; ``corrections`` of them (evenly spread) followed at once
    by a correction that cuts their closing sentences."""
    docs = read_jsonl(DATA, n)
    every = max(1, n // max(1, corrections))
    out: list[dict[str, Any]] = []
    made = 0
    for i, doc in enumerate(docs):
        out.append(doc)
        sentences = re.split(r"(?<=[.!?])\s+", doc["text"].strip())
        if made < corrections and i % every == every // 2 and len(sentences) >= 3:
            kept = " ".join(sentences[: max(2, len(sentences) * 2 // 3)])
            out.append({**doc, "text": f"{kept}\nThis story was corrected."})
            made += 1
    return out


# ---- private services ----


def private_settings(base: Settings, workdir: Path) -> Settings:
    p = PORTS
    return base.model_copy(
        update={
            "kafka": base.kafka.model_copy(
                update={"bootstrap_servers": f"127.0.0.1:{p['broker']}"}
            ),
            "weaviate": base.weaviate.model_copy(
                update={"url": f"http://127.0.0.1:{p['http']}", "grpc_port": p["grpc"]}
            ),
            "services": base.services.model_copy(
                update={
                    "state_dir": workdir / "services",
                    "kafka_controller_port": p["controller"],
                    "weaviate_gossip_port": p["gossip"],
                    "weaviate_raft_port": p["raft"],
                }
            ),
            "data_dir": workdir / "data",
        }
    )


def services_down(settings: Settings) -> None:
    for mod in (weaviate, kafka):
        rec = mod.record(settings)
        if rec is not None:
            stop_pid(rec.pid)


# Waits for SIGTERM (blocked before it starts, so one sent early stays pending), then stops
# every service recorded under the state folder it is given (their pids change as the chaos
# run restarts them, so the records are read then).
_GUARD = """
import signal, sys
from pathlib import Path
from kgrag.services.process import ServiceRecord, owned_alive, stop_pid
signal.sigwait({signal.SIGTERM, signal.SIGINT})
for path in sorted(Path(sys.argv[1]).glob("*/service.json")):
    record = ServiceRecord.load(path)
    if record is not None and owned_alive(record):
        stop_pid(record.pid)
"""


def start_guard(state_dir: Path) -> subprocess.Popen[bytes]:
    """A process that stops the services recorded under ``state_dir`` when this bench dies,
    even by ``kill -9`` (the kernel sends it SIGTERM then, ``dies_with_us``); the launcher
    starts the services in sessions of their own, so nothing else would. Stopping the guard
    stops them too."""
    dies = dies_with_us()

    def preexec() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        dies()

    return subprocess.Popen(
        [sys.executable, "-c", _GUARD, str(state_dir)],
        cwd=Path(__file__).resolve().parents[1],
        preexec_fn=preexec,
    )


# ---- the run ----


@dataclass
class Run:
    settings: Settings
    server: LLMServer
    extra: dict[str, str]
    worker: subprocess.Popen[bytes] | None = None
    recovery_s: list[float | None] = field(default_factory=list)
    api: Counter[str] = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def note(self, what: str) -> None:
        line = f"{time.monotonic() - self.started:6.1f}s {what}"
        self.events.append(line)
        print(f"[{self.settings.namespace}] {line}", flush=True)

    def start_worker(self) -> None:
        self.worker = start_worker(self.settings, self.extra)


async def committed_total(settings: Settings) -> int:
    """Offsets the graph worker's group has committed, summed over its partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.app_id)
    finally:
        await admin.close()
    return sum(max(0, m.offset) for m in offsets.values() if m is not None)


async def publish_paced(run: Run, docs: list[dict[str, Any]], rate: float | None) -> None:
    """Every document, ``rate`` a second (all at once when None), each send retried until
    the broker has it (it may be down)."""
    settings = run.settings
    publisher = DocumentPublisher(settings, linger_ms=5)
    limit = settings.chunking.max_document_chars
    parsed = [document_from_obj(d, max_chars=limit) for d in docs]
    t0 = time.monotonic()
    for i, doc in enumerate(parsed):
        if rate:
            await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
        while True:
            try:
                await asyncio.wait_for(await publisher.send(doc), 20)
                break
            except Exception as e:  # the broker is down: a new producer once it is back
                run.note(f"publish of {doc.id} failed ({type(e).__name__}), retrying")
                with contextlib.suppress(Exception):
                    await publisher.stop()
                publisher = DocumentPublisher(settings, linger_ms=5)
                await asyncio.sleep(1)
    await publisher.stop()
    run.note(f"published {len(parsed)} documents")


async def query_load(run: Run, url: str, stop_at: asyncio.Event) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        i = 0
        while not stop_at.is_set():
            method = ("local", "basic")[i % 2]
            try:
                r = await c.post(f"/v1/query/{method}", json={"question": QUESTIONS[i % 2]})
                code = r.status_code
                run.api["ok" if code == 200 else str(code) if code in (500, 503) else "other"] += 1
            except httpx.HTTPError:
                run.api["unanswered"] += 1  # the API process itself is never disturbed
            i += 1
            await asyncio.sleep(0.5)


async def group_members(settings: Settings) -> set[str] | None:
    """The member ids of the graph worker's group when it is stable with partitions assigned,
    else None. A restarted static member rejoins under its old instance id but a new member
    id, and until it does the group stays stable with the dead member's assignment."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        groups = await admin.describe_consumer_groups([settings.app_id])
    finally:
        await admin.close()
    state = groups[0].groups[0] if groups and groups[0].groups else None
    if state is None or state[2] != "Stable" or not state[5]:
        return None
    return {str(member[0]) for member in state[5]}


async def kill_and_restart(run: Run) -> None:
    """``kill -9`` the worker, start it again at once, and time until consumption resumes:
    its group commits again, or (with nothing left to consume) the new process holds the
    partitions."""
    assert run.worker is not None
    settings = run.settings
    members = await group_members(settings) or set()
    killed = time.monotonic()
    run.worker.send_signal(signal.SIGKILL)
    run.worker.wait(30)
    # read after the kill: a commit the old worker made just before it would otherwise count
    # as the restarted worker's
    before = await committed_total(settings)
    run.start_worker()
    run.note(f"worker killed and restarted (committed {before})")
    deadline = killed + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        with contextlib.suppress(Exception):
            if await committed_total(settings) > before or (
                (await pipeline_lag(settings))["graph"] == 0
                and not (await group_members(settings) or members) & members
            ):
                run.recovery_s.append(round(time.monotonic() - killed, 2))
                run.note(f"consumption resumed after {run.recovery_s[-1]} s")
                return
    run.recovery_s.append(None)
    run.note(f"consumption did not resume within {RECOVERY_TIMEOUT_S:g} s")


async def disturb(run: Run, args: argparse.Namespace, publishing: asyncio.Task[None]) -> None:
    """The schedule, in seconds from the start of publishing: Weaviate down from 30 s for
    ``weaviate_down``; the broker down at ``broker_at`` for ``broker_down``; a kill every
    ``kill_every`` until publishing has ended and ``kills`` were made, skipping the slots
    from 15 s before the broker stops to 20 s after it is back (a kill then would time the
    broker, not the worker)."""
    t0 = time.monotonic()
    settings = run.settings

    async def at(t: float) -> None:
        await asyncio.sleep(max(0.0, t0 + t - time.monotonic()))

    async def outage(what: str, service: Any, start: float, down: float) -> None:
        await at(start)
        rec = service.record(settings)
        assert rec is not None
        await asyncio.to_thread(stop_pid, rec.pid)
        run.note(f"{what} stopped for {down:g} s")
        await asyncio.sleep(down)
        await asyncio.to_thread(service.up, settings)
        run.note(f"{what} back")

    others = [
        asyncio.create_task(outage("Weaviate", weaviate, WEAVIATE_AT_S, args.weaviate_down)),
        asyncio.create_task(outage("broker", kafka, args.broker_at, args.broker_down)),
    ]
    quiet = (args.broker_at - 15, args.broker_at + args.broker_down + 20)
    slot = 1
    while len(run.recovery_s) < args.kills or not publishing.done():
        t = slot * args.kill_every
        slot += 1
        if quiet[0] <= t <= quiet[1]:
            continue
        await at(t)
        await kill_and_restart(run)
    await asyncio.gather(*others)


async def drained(run: Run, ids: set[str], timeout: float) -> GraphView:
    """The folded graph once every document is in, no change came for 10 s and both worker
    groups have committed everything."""
    view = await absorbed(run.settings, len(ids), timeout, settle=10.0)
    run.note("drained")
    return view


async def dead_letters(settings: Settings) -> tuple[Counter[str], set[str]]:
    """Dead letters by reason (first words), and the keys (chunk or document ids) they hold."""
    out: Counter[str] = Counter()
    keys: set[str] = set()
    consumer = from_start(settings, "documents_dlq", "extractions_dlq")
    await consumer.start()
    try:
        while batch := await consumer.getmany(timeout_ms=3000):
            for msgs in batch.values():
                for m in msgs:
                    letter = json.loads(m.value)
                    reason = str(letter.get("reason", "?"))
                    out[" ".join(reason.split()[:6])] += 1
                    if m.key:
                        keys.add(m.key.decode("utf-8", "replace"))
                    with contextlib.suppress(Exception):  # a chunk's letter: its chunk id
                        chunk = decode_chunk_event(str(letter["payload"]).encode())
                        keys.add(chunk.chunk_id if isinstance(chunk, Retraction) else chunk.id)
    finally:
        await consumer.stop()
    return out, keys


async def vectors(settings: Settings) -> dict[str, list[str]]:
    async with WeaviateStore(settings) as store:
        return {kind: await store.keys(kind) for kind in ("text_unit", "entity")}


async def one_run(
    base: Settings,
    server: LLMServer,
    docs: list[dict[str, Any]],
    args: argparse.Namespace,
    workdir: Path,
    *,
    chaos: bool,
) -> dict[str, Any]:
    async with fresh_namespace(base, f"chaos-{'run' if chaos else 'ref'}", workdir) as settings:
        server.set_faults(FAULTS if chaos else {})
        extra = {
            **server.env(8, settings.data_dir),
            "KGRAG_KAFKA__INSTANCE_ID": f"{settings.namespace}-w1",
            "KGRAG_COMMUNITY__DEBOUNCE_S": "2.0",
        }
        run = Run(settings, server, extra)
        run.start_worker()
        port = free_port()
        api = start_api(settings, port)
        stop_load = asyncio.Event()
        try:
            assert run.worker is not None
            await wait_ready(settings, run.worker, timeout=180)
            run.started = time.monotonic()
            publishing = asyncio.create_task(publish_paced(run, docs, args.rate if chaos else None))
            load = asyncio.create_task(query_load(run, f"http://127.0.0.1:{port}", stop_load))
            if chaos:
                await disturb(run, args, publishing)
            await publishing
            view = await drained(run, {d["id"] for d in docs}, args.timeout)
            took = time.monotonic() - run.started
            with contextlib.suppress(Exception):
                await api_ready(f"http://127.0.0.1:{port}", timeout=60)
            stop_load.set()
            await load
            server.set_faults({})
            reasons, dead = await dead_letters(settings)
            dlq = dict(reasons)
            return {
                "namespace": settings.namespace,
                "seconds": round(took, 1),
                "view": view,
                "vectors": await vectors(settings),
                "dlq": dlq,
                "dead": dead,
                "recovery_s": run.recovery_s,
                "api": dict(run.api),
                "events": run.events,
            }
        finally:
            stop_load.set()
            stop(run.worker, api)


# ---- comparison ----


def _diff(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def compare(ref: GraphView, got: GraphView, dead: set[str]) -> dict[str, Any]:
    """The evidence of the two runs side by side; ``dead`` are the chaos run's dead-lettered
    chunks: ``diffs_not_from_dead_letters`` counts the differing rows none of those chunks
    supports in the reference (the dead letters' own loss is visible, by design, in the
    topic with its reason)."""

    def entities(v: GraphView) -> dict[str, tuple[int, int]]:
        return {k: (e.mention_count, e.document_count) for k, e in v.entities.items()}

    def descriptions(v: GraphView) -> dict[str, frozenset[str]]:
        out = {f"e:{k}": frozenset(e.descriptions.values()) for k, e in v.entities.items()}
        out.update(
            {f"r:{k}": frozenset(r.descriptions.values()) for k, r in v.relationships.items()}
        )
        return out

    def from_dead(key: str) -> bool:
        kind, _, row = key.partition(":")
        units = ref.entity_units if kind == "e" else ref.relationship_units
        return bool(units.get(row, set()) & dead)

    double = sum(
        max(0, e.mention_count - ref.entities[k].mention_count)
        for k, e in got.entities.items()
        if k in ref.entities
    )
    diffs = {
        "entities": {f"e:{k}" for k in _diff(entities(ref), entities(got))},
        "relationships": {
            f"r:{k}"
            for k in _diff(
                {k: r.weight for k, r in ref.relationships.items()},
                {k: r.weight for k, r in got.relationships.items()},
            )
        },
        "descriptions": _diff(descriptions(ref), descriptions(got)),
    }
    not_from_dead = {
        kind: len([k for k in keys if not from_dead(k)]) for kind, keys in diffs.items()
    }
    return {
        "documents_lost": len(set(ref.documents) - set(got.documents)),
        "text_units_extra": len(set(got.text_units) - set(ref.text_units)),
        "text_units_missing": len(set(ref.text_units) - set(got.text_units)),
        "mentions_double_counted": double,
        "entities_diff": len(diffs["entities"]),
        "relationships_diff": len(diffs["relationships"]),
        "descriptions_diff": len(diffs["descriptions"]),
        "claims_diff": len(
            _diff(
                {k: frozenset(f.id for f in c.facts) for k, c in ref.claims.items()},
                {k: frozenset(f.id for f in c.facts) for k, c in got.claims.items()},
            )
        ),
        "diffs_not_from_dead_letters": not_from_dead,
        "diffs_not_from_dead_letters_total": sum(not_from_dead.values()),
        "diffs_not_from_dead_letters_sample": sorted(
            k for keys in diffs.values() for k in keys if not from_dead(k)
        )[:20],
    }


def vectors_diff(ref: dict[str, list[str]], got: dict[str, list[str]]) -> int:
    out = 0
    for kind in ref:
        a, b = Counter(ref[kind]), Counter(got[kind])
        out += len(set(a) ^ set(b)) + sum(n - 1 for n in b.values() if n > 1)
    return out


# ---- main ----


def recovery_figures(recovery_s: list[float | None]) -> dict[str, Any]:
    """The kills and the seconds to recover from each, a missed recovery counted as
    ``RECOVERY_TIMEOUT_S``."""
    seconds = [RECOVERY_TIMEOUT_S if s is None else s for s in recovery_s]
    return {
        "kills": len(recovery_s),
        "recovery_s": timing(seconds, 2) if seconds else None,
        "recovery_s_each": recovery_s,
        "recoveries_missed": sum(1 for s in recovery_s if s is None),
    }


async def main_async(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    taken = [p for p in PORTS.values() if port_open(p)]
    if taken:
        raise SystemExit(f"ports {taken} of the private services are taken")
    settings = private_settings(get_settings(), workdir)
    docs = corpus(args.articles, args.corrections)
    print(f"{len(docs)} documents ({args.corrections} corrections); private services…", flush=True)
    guard = start_guard(settings.services_state_dir)
    try:
        await asyncio.to_thread(kafka.up, settings)
        await asyncio.to_thread(weaviate.up, settings)
        server = start_llm_server(args.latency_ms, workdir / "llm.log")
        try:
            ref = await one_run(settings, server, docs, args, workdir, chaos=False)
            print(f"reference: {ref['seconds']} s", flush=True)
            got = await one_run(settings, server, docs, args, workdir, chaos=True)
            print(f"chaos: {got['seconds']} s", flush=True)
        finally:
            stop(server.proc)
            services_down(settings)
    finally:
        stop(guard)
    return {
        "documents_published": len(docs),
        "reference_s": ref["seconds"],
        "chaos_s": got["seconds"],
        **compare(ref["view"], got["view"], got["dead"]),
        "vectors_diff": vectors_diff(ref["vectors"], got["vectors"]),
        **recovery_figures(got["recovery_s"]),
        "dlq": got["dlq"],
        "dlq_reference": ref["dlq"],
        "api_500": got["api"].get("500", 0),
        "api_503": got["api"].get("503", 0),
        "api_ok": got["api"].get("ok", 0),
        "api_other": got["api"].get("other", 0) + got["api"].get("unanswered", 0),
        "entities": len(ref["view"].entities),
        "relationships": len(ref["view"].relationships),
        "timeline": got["events"],
    }


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode_argument(ap)
    ap.add_argument("--articles", type=int, default=None, help="600 quick, 5000 full")
    ap.add_argument("--corrections", type=int, default=None, help="10 quick, 50 full")
    ap.add_argument("--rate", type=float, default=12.0, help="articles a second, chaos run")
    ap.add_argument("--kill-every", type=float, default=None, help="15 s quick, 20 s full")
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--weaviate-down", type=float, default=None, help="20 s quick, 60 s full")
    ap.add_argument("--broker-at", type=float, default=None, help="60 s quick, 110 s full")
    ap.add_argument("--broker-down", type=float, default=10.0)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds to drain a run")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the working folder and its logs")
    args = ap.parse_args(argv)
    args.mode = "full" if args.full else "quick"
    for key, value in MODES[args.mode].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} not found")
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="kgrag-chaos-"))
    print(f"working in {workdir} (logs: <namespace>-worker.log, -api.log)", flush=True)
    figures = asyncio.run(main_async(args, workdir))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps({k: v for k, v in figures.items() if k != "timeline"}, indent=1))
    settings = {
        "data": DATA.name,
        "articles": args.articles,
        "corrections": args.corrections,
        "rate_per_s": args.rate,
        "kill_every_s": args.kill_every,
        "kills_at_least": args.kills,
        "weaviate_at_s": WEAVIATE_AT_S,
        "weaviate_down_s": args.weaviate_down,
        "broker_at_s": args.broker_at,
        "broker_down_s": args.broker_down,
        "llm_faults": FAULTS,
        "llm_latency_ms": args.latency_ms,
        "static_membership": True,
        "recovery_timeout_s": RECOVERY_TIMEOUT_S,
    }
    record("chaos", args.mode, figures, TARGETS, settings, MEASURES, path=args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
