"""The stream worker, assembled in one place: the pipeline from a document to the graph reads
top to bottom here.

``kgrag worker`` calls :func:`build` and runs the app it returns; the community job runs beside
it as a supervised process of its own (``agents.community.job``), and the query service reads
what both produce (``query/``).
"""

from __future__ import annotations

from agents import chunker, embedder, extractor, merger
from core.clients import Clients
from core.lag import WORKER_TOPICS
from core.settings import Settings
from core.tokenizer import ensure_offline_bpe
from streams import watchdog
from streams.app import create_app
from streams.topology import Topology, declare


def build(settings: Settings) -> Topology:
    """The faust app with its topics and tables declared and every agent registered."""
    ensure_offline_bpe()  # before any tokenizer use in this process
    topo = declare(settings, create_app(settings))
    # the model and the embedder, built once (offline stand-ins when none is configured)
    clients = Clients.from_settings(settings)
    # documents → chunks (text units cut by tokens; corrections retract what they replace)
    chunker.register(topo)
    # chunks → extractions (entities, relationships and claims, by the LLM or offline rules)
    extractor.register(topo, clients)
    # extractions → items keyed by entity / relationship → merged rows → graph changes
    merger.register(topo)
    # chunks and graph changes → vectors of text units and entities in Weaviate
    embedder.register(topo, clients)
    # a partition faust stopped delivering after a rebalance makes the worker rejoin its group
    watchdog.register(topo.app, [settings.topic(name) for name in WORKER_TOPICS])
    return topo
