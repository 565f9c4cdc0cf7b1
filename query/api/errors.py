"""The HTTP API's errors: ``ApiError`` and the one JSON envelope every error answer uses.

Every error, whatever raised it, reaches the client as ``{"error": {"code", "message"}}``
with a stable code and a sentence saying what to do, never a stack trace. ``api_error`` maps
the errors the query layer raises on purpose to their HTTP form; anything else is a 500 whose
details go to the server log only.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.errors import ConfigError, LLMError
from core.tables.errors import GraphStoreUnavailableError
from core.vector_store import VectorStoreError
from graph.errors import PicklableError
from prompts import PromptError
from query.errors import AllMapCallsFailedError, QueryError, TimeWindowError

log = logging.getLogger(__name__)


class ApiError(PicklableError):
    """An error the client can act on: an HTTP status, a stable code and a sentence.

    Picklable by state, like the project's other errors, though it is not a ``KgragError``:
    handlers that catch those must not turn an HTTP answer into something else.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, machine-readable: e.g. unauthorized, invalid_query")
    message: str = Field(description="What was wrong and what to do")


class ErrorEnvelope(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error answers a route gives, in the envelope."""
    what = {
        401: "The API key is missing or wrong (send it in X-API-Key)",
        404: "Nothing with that id in the served graph version",
        413: "The request or question is over its limit",
        422: "The request is invalid; the message names the field and what is allowed",
        503: "A dependency (Kafka, Weaviate, the graph tables) is not available, or the index "
        "is not built yet; the message says what to do",
    }
    return {s: {"model": ErrorEnvelope, "description": what[s]} for s in statuses}


def api_error(e: Exception) -> ApiError | None:
    """The client-facing form of an error the query layer raises on purpose (else None)."""
    match e:
        case ApiError():
            return e
        case TimeWindowError():
            return ApiError(422, "invalid_time_window", str(e))
        case AllMapCallsFailedError() | LLMError():
            return ApiError(502, "llm_failed", f"the language model gave no usable answer: {e}")
        case VectorStoreError():
            return ApiError(503, "vector_store_unavailable", str(e))
        case GraphStoreUnavailableError():
            return ApiError(503, "graph_tables_unavailable", f"{e}; try again shortly")
        case PromptError() | ConfigError():
            return ApiError(500, "misconfigured", str(e))
        case QueryError() | ValueError():
            return ApiError(422, "invalid_query", str(e))
    return None


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "")
            parts.append(f"the request body is not valid JSON ({reason})".replace(" ()", ""))
            continue
        where = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in the envelope: ours, FastAPI's validation, routing, the rest."""

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(422, "invalid_request", _validation_message(exc))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(
            exc.status_code,
            codes.get(exc.status_code, f"http_{exc.status_code}"),
            str(exc.detail),
            headers=dict(exc.headers) if exc.headers else None,  # 405 keeps its Allow
        )

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        mapped = api_error(exc)  # one the query layer means, raised outside ``timed``
        if mapped is not None:
            return error_response(mapped.status, mapped.code, mapped.message)
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal", "internal error; the server log has the details")

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
