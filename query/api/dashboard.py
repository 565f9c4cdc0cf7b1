"""The newsroom dashboard: static pages served by the query service at ``/``.

The pages are plain HTML, CSS and JavaScript under ``query/api/static`` (no build step, no
framework: a handful of views over the public ``/v1`` API), plus one library, cytoscape.js,
vendored with its licence (``static/vendor``, refreshed from npm by
``scripts/refresh-dashboard-vendor.sh``), so installing the project needs no npm and the page
works without internet. Every page is sent with a Content-Security-Policy that allows scripts,
styles and connections from this origin only: news text and LLM output are untrusted, and the
scripts only ever put them into the page as text, but an injected ``<script>`` or ``onerror=``
would not run even if they did not.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")
# styles may be inline: cytoscape.js sets style attributes on the elements it draws into;
# scripts may not, which is what stops injected markup from running
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _Static(StaticFiles):
    """Static files with the dashboard's security headers."""

    def file_response(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        response = super().file_response(*args, **kwargs)  # type: ignore[arg-type]
        response.headers.update(HEADERS)
        return response


def mount(app: FastAPI) -> None:
    """``/`` is the dashboard; its files are under ``/dashboard/``."""
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=HEADERS)

    @router.get("/dashboard")
    async def bare() -> RedirectResponse:
        return RedirectResponse("/")

    app.include_router(router)
    app.mount("/dashboard", _Static(directory=STATIC), name="dashboard")
