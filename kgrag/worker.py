"""The stream workers, assembled in one place: the pipeline from a document to the graph reads
top to bottom here.

``kgrag worker`` runs the graph worker (:func:`build`: chunker, extractor, mergers) and starts
two supervised child processes beside it: the community job (``agents.community.job``) and the
vector worker (:func:`build_vectors`: the embedders, ``kgrag vector-worker``). The embedders
have their own faust app and consumer group because a stage that waits holds back its whole
app: faust stops delivering every topic of an app once one agent's queue is full, so embedders
waiting for Weaviate inside the graph worker froze chunking and merging with them. Apart, a
Weaviate outage delays only the vectors; the graph, its versions and the reports go on. The
query service reads what all of them produce (``query/``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import faust
from prometheus_client import CollectorRegistry, start_http_server

from agents import chunker, extractor, merger
from core.children import Supervisor
from core.clients import Clients
from core.lag import GRAPH_TOPICS, VECTOR_TOPICS
from core.settings import Settings
from core.tokenizer import ensure_offline_bpe
from streams import watchdog
from streams.app import create_app
from streams.topology import Topology, declare, declare_topics

log = logging.getLogger(__name__)


def build(settings: Settings, registry: CollectorRegistry | None = None) -> Topology:
    """The graph worker's faust app with its topics and tables declared and its agents
    registered; the extractor's and the LLM's metrics go to ``registry``."""
    ensure_offline_bpe()  # before any tokenizer use in this process
    topo = declare(settings, create_app(settings))
    # the model (an offline stand-in when none is configured), built once
    clients = Clients.from_settings(settings, registry)
    # documents → chunks (text units cut by tokens; corrections retract what they replace)
    chunker.register(topo)
    # chunks → extractions (entities, relationships and claims, by the LLM or offline rules,
    # each with the tokens it spent)
    extractor.register(topo, clients, registry)
    # extractions → items keyed by entity / relationship → merged rows → graph changes
    merger.register(topo)
    # a partition faust stopped delivering after a rebalance makes the worker rejoin its group
    watchdog.register(
        topo.app, [settings.topic(n) for n in GRAPH_TOPICS], settings=settings, group="graph"
    )
    return topo


def serve_metrics(settings: Settings, registry: CollectorRegistry) -> None:
    """Serve ``registry`` as Prometheus text on ``worker.metrics_port`` (any path, /metrics
    included) from a thread of its own, when the port is set. A port already taken (another
    worker on this host) is logged and the worker runs on without it: metrics are not worth
    a worker."""
    cfg = settings.worker
    if cfg.metrics_port is None:
        return
    try:
        start_http_server(cfg.metrics_port, addr=cfg.metrics_host, registry=registry)
    except OSError as e:
        log.warning("worker metrics not served on %s:%d: %s", cfg.metrics_host, cfg.metrics_port, e)
        return
    log.info("worker metrics on http://%s:%d/metrics", cfg.metrics_host, cfg.metrics_port)


# a worker that is not ready by then (a broker down, a long recovery) starts its helpers anyway
HELPERS_AFTER_S = 30.0


class GraphWorker(faust.Worker):
    """faust's worker for the graph app, starting its helper processes (the community job,
    the vector worker) once the app is ready (partitions assigned, tables recovered), or after
    ``helpers_after_s`` if it is not by then. A restarted worker's recovery time is its
    start-up; helpers starting beside it on a small machine compete for the cores with their
    imports, their own recovery and a first community run, and made it seconds slower."""

    def __init__(
        self,
        app: faust.App,
        *,
        helpers: Sequence[Supervisor],
        loglevel: str,
        helpers_after_s: float = HELPERS_AFTER_S,
    ) -> None:
        super().__init__(app, loglevel=loglevel)
        self._helpers = tuple(helpers)
        self._lock = threading.Lock()
        self._helpers_started = False
        self._timer = threading.Timer(helpers_after_s, self.start_helpers)
        self._timer.daemon = True
        self._timer.start()

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        self.start_helpers()

    def start_helpers(self) -> None:
        """Start every helper, once (the ready signal and the timer may both call this)."""
        with self._lock:
            if self._helpers_started:
                return
            self._helpers_started = True
        self._timer.cancel()
        for helper in self._helpers:
            helper.start()


def build_vectors(settings: Settings) -> faust.App:
    """The vector worker's faust app: chunks and graph changes → vectors of text units and
    entities in Weaviate, in the ``vector_app_id`` consumer group. The embedders (and the
    Weaviate client, a second or more of imports) are imported here only: a restarted graph
    worker, whose start-up is its recovery time after a crash, does not load them."""
    from agents import embedder

    ensure_offline_bpe()
    app = create_app(settings, vectors=True)
    topics = declare_topics(settings, app)
    embedder.register(app, settings, topics, Clients.from_settings(settings))
    watchdog.register(
        app, [settings.topic(n) for n in VECTOR_TOPICS], settings=settings, group="vectors"
    )
    return app
