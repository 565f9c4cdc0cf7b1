"""Signing in once in a browser: a session cookie the API accepts beside the ``X-API-Key`` header.

A browser's ``EventSource`` cannot send a header, and a key in a URL leaks into logs and
history, so the dashboard posts the key once to ``POST /v1/session`` and gets a cookie:
``HttpOnly`` (page scripts cannot read it), ``SameSite=Strict`` (other sites' pages do not
send it), ``Secure`` when the request came over HTTPS, and ``Path=/``.

The cookie is stateless: ``<issued unix time>.<HMAC-SHA256 of it keyed by the API key>``. Any
replica of the service with the same key checks it without a shared store; changing the key
signs every session out; a session ends after ``SESSION_TTL_S``. Requests that change
something (``POST``, ``DELETE``) on the strength of the cookie alone must also carry
``X-Requested-With`` (any value): a form on another site cannot set it, and a cross-site
``fetch`` that sets it needs a CORS preflight this service never grants.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from core.settings import Settings
from query.api.errors import ApiError, documented
from query.api.state import Service

COOKIE = "kgrag_session"
SESSION_TTL_S = 12 * 3600
CSRF_HEADER = "X-Requested-With"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def sign(api_key: str, issued: int) -> str:
    mac = hmac.new(api_key.encode(), str(issued).encode(), hashlib.sha256).hexdigest()
    return f"{issued}.{mac}"


def valid_session(api_key: str, token: str | None, now: float | None = None) -> bool:
    """The cookie was signed with ``api_key`` and has not expired."""
    if not token or "." not in token:
        return False
    issued, _, _ = token.partition(".")
    if not (issued.isascii() and issued.isdigit()):
        return False
    age = (time.time() if now is None else now) - int(issued)
    if not 0 <= age <= SESSION_TTL_S:
        return False
    return hmac.compare_digest(token.encode(), sign(api_key, int(issued)).encode())


def key_matches(wanted: str, given: str | None) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), wanted.encode())


def check_request(settings: Settings, request: Request, header_key: str | None) -> None:
    """Pass a request carrying the API key in its header, or a valid session cookie (with
    ``X-Requested-With`` when it changes something); refuse the rest with 401 or 403."""
    wanted = settings.api.api_key
    if not wanted:
        return
    if header_key is not None:
        if not key_matches(wanted, header_key):
            raise ApiError(
                401, "unauthorized", "the X-API-Key header does not hold a valid API key"
            )
        return
    cookie = request.cookies.get(COOKIE)
    if cookie is None:
        raise ApiError(
            401,
            "unauthorized",
            "a valid API key is required in the X-API-Key header (or sign in: POST /v1/session)",
        )
    if not valid_session(wanted, cookie):
        raise ApiError(
            401, "session_expired", "the session has expired or was signed out; sign in again"
        )
    if request.method not in SAFE_METHODS and CSRF_HEADER.lower() not in request.headers:
        raise ApiError(
            403,
            "missing_header",
            f"a request that changes something with a session cookie needs the {CSRF_HEADER} "
            "header",
        )


class SignIn(BaseModel):
    api_key: str = Field(..., min_length=1, max_length=1000, description="The service's API key")


router = APIRouter(prefix="/v1", tags=["session"])


@router.get("/session", summary="Whether this browser is signed in, and whether it must be")
async def get_session(state: Service, request: Request) -> dict[str, bool]:
    wanted = state.settings.api.api_key
    return {
        "key_required": bool(wanted),
        "signed_in": not wanted or valid_session(wanted, request.cookies.get(COOKIE)),
    }


@router.post(
    "/session",
    summary="Sign in with the API key: sets an HttpOnly, SameSite=Strict session cookie",
    responses=documented(401, 422),
)
async def sign_in(
    state: Service, body: SignIn, request: Request, response: Response
) -> dict[str, bool]:
    wanted = state.settings.api.api_key
    if not wanted:
        return {"key_required": False, "signed_in": True}
    if not key_matches(wanted, body.api_key):
        raise ApiError(401, "unauthorized", "that is not the service's API key")
    response.set_cookie(
        COOKIE,
        sign(wanted, int(time.time())),
        max_age=SESSION_TTL_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return {"key_required": True, "signed_in": True}


@router.delete("/session", summary="Sign out: the session cookie is removed")
async def sign_out(state: Service, response: Response) -> dict[str, bool]:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return {"key_required": bool(state.settings.api.api_key), "signed_in": False}
