"""``create_app``: the query service as one FastAPI app, composed from ``query.api``'s parts.

The only module that knows every part: it builds the shared ``ServiceState``, opens the
clients in the lifespan (once, closed on shutdown) and starts the version refresher, installs
the error envelope and the body limit, and mounts the routers, the API key guarding all but
the probes and the session routes (signing in is how a browser gets past it), and serves the
dashboard at ``/``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI

from core.publish import DocumentPublisher
from core.settings import Settings
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from query.api import dashboard, routes_documents, routes_graph, routes_ops, routes_queries, session
from query.api.errors import install_error_handlers
from query.api.middleware import BodyLimit, api_key_guard
from query.api.state import IndexHolder, ServiceState
from query.deps import QueryDeps, open_deps
from query.kafka_probes import LagProbe, PendingProbe
from query.metrics import QueryMetrics


def create_app(
    settings: Settings,
    *,
    deps: QueryDeps | None = None,
    graph_store: GraphTables | None = None,
    refresh_interval_s: float = 0.2,
    lag_ttl_s: float = 15.0,
) -> FastAPI:
    """The query service. ``deps`` replaces the clients the lifespan would build (tests);
    ``graph_store`` the namespace's graph tables; consumer lag is read from
    Kafka at most every ``lag_ttl_s`` seconds."""
    metrics = QueryMetrics()
    store = graph_store or open_graph_store(settings, for_queries=True)
    state = ServiceState(
        settings,
        IndexHolder(store, metrics, settings),
        metrics,
        LagProbe(settings, metrics, lag_ttl_s),
        PendingProbe(settings),
        DocumentPublisher(settings),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            state.deps = deps or await stack.enter_async_context(
                open_deps(settings, metrics.registry)
            )
            refresher = asyncio.create_task(state.holder.run(refresh_interval_s))
            try:
                yield
            finally:
                refresher.cancel()
                await asyncio.gather(refresher, return_exceptions=True)
                await state.close()

    app = FastAPI(
        title="kafka-graphrag query service",
        version="0.1.0",
        description="Local, global and basic GraphRAG search over the live graph, trends on "
        "document time, the graph's entities and communities, and their lineage events.",
        lifespan=lifespan,
    )
    app.state.service = state
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_request_bytes)
    guard = [Depends(api_key_guard(settings))]
    app.include_router(routes_queries.router, dependencies=guard)
    app.include_router(routes_graph.router, dependencies=guard)
    app.include_router(routes_documents.router, dependencies=guard)
    app.include_router(routes_ops.router)
    app.include_router(session.router)
    dashboard.mount(app)
    return app
