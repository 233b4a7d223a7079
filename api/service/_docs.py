"""`/docs` (Swagger UI) and `/redoc` served with their assets from the service itself, not from a CDN: clusters
are often offline, and a docs page that loads its scripts from the internet is blank there. The assets come from
the `fastapi-offline` package (Swagger UI 5 and ReDoc 2 bundles as package data); the pages are FastAPI's own."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "assets_dir", "install_docs"]

ASSETS_URL = "/docs/assets"


def assets_dir() -> Path:
    """The folder holding swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


def install_docs(app: FastAPI) -> None:
    """Serve the docs pages on `app` (created with docs_url=None and redoc_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
                                   oauth2_redirect_url=f"{root}{redirect}",
                                   swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png")

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False)
