"""What guards every request before a route runs: the body-size limit and the API key.

``BodyLimit`` is raw ASGI middleware, because the limit must hold while a chunked body is
still streaming in, before any route has parsed it. The API key is a FastAPI dependency
instead, so the OpenAPI page shows it and the app can leave the probes (/healthz, /metrics)
open by not attaching it to their router; it also accepts the dashboard's session cookie.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request, Security
from fastapi.security import APIKeyHeader
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.settings import Settings
from query.api.errors import error_response
from query.api.session import check_request


class BodyLimit:
    """Rejects request bodies above ``max_bytes`` with 413: at once when Content-Length says
    so, else while the body streams in (chunked uploads have no Content-Length). When the
    limit is crossed mid-body, whatever the app then tries to answer is replaced by the 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def _message(self) -> str:
        return (
            f"the request body is larger than {self.max_bytes} bytes (KGRAG_API__MAX_REQUEST_BYTES)"
        )

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(413, "request_too_large", self._message())(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (
            not (declared.isascii() and declared.isdigit()) or int(declared) > self.max_bytes
        ):
            await self._reject(scope, receive, send)
            return
        seen = 0
        over = False
        replaced = False

        async def counted() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded(message: Message) -> None:
            nonlocal replaced
            if not over:
                await send(message)
            elif message["type"] == "http.response.start" and not replaced:
                replaced = True
                await self._reject(scope, receive, send)

        await self.app(scope, counted, guarded)
        if over and not replaced:
            await self._reject(scope, receive, send)


def api_key_guard(settings: Settings) -> Callable[[Request, str | None], Awaitable[None]]:
    """A dependency that refuses requests without the configured ``X-API-Key`` or a signed-in
    session cookie (``query.api.session``; none configured: every request passes)."""
    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    async def guard(request: Request, key: str | None = Security(header)) -> None:
        check_request(settings, request, key)

    return guard
