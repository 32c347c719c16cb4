"""The explorer's HTTP server: a Starlette app serving one page and its JSON API to one person, on their machine.

Who may ask: every request carries the launch token (``?token=…``, as Jupyter does, or a header ``Authorization:
token …``) and a ``Host`` header naming the address served (``127.0.0.1:PORT``, ``localhost:PORT``; with ``--host
0.0.0.0``, any IP address and that port): a web page elsewhere that points a name of its own at 127.0.0.1 (DNS
rebinding) names the wrong host and is refused, and without the token nothing is answered. No route takes a path:
the models are the ones given at launch, named by the name they were given.

What it answers: ``GET /`` (the page, everything inline, with a Content-Security-Policy that lets it talk to this
server alone), ``GET /api/models`` and ``POST /api/{forward,head,generate,patch,translate,font}``; a refused
request gets its HTTP status and ``{"error": "one line"}``. Model work runs in a worker thread, one request at a
time, with at most :data:`MAX_WAITING` queued (more: 503, try again), so the event loop keeps answering and
refusing meanwhile.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from attnlab.explore.api import Api
from attnlab.explore.checks import MAX_BODY, ApiError
from attnlab.i18n import N_, translations

#: requests waiting for the model at most; one more is told to try again (503)
MAX_WAITING = 64
POSTS = ("forward", "head", "generate", "patch", "translate", "font")
HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
           (b"cache-control", b"no-store"), (b"x-frame-options", b"DENY")]


def say(lang: str, message: str, **fields: Any) -> str:
    """``message`` (marked with ``N_``) in ``lang``: the guard answers in the launch language, whatever a worker
    thread's request has set meanwhile."""
    return translations(lang).gettext(message).format(**fields)


@dataclass(frozen=True)
class Hosts:
    """The ``Host`` headers the server answers: ``port`` with a name of ``names`` (``localhost`` and the address
    served), or an IP address (a loopback one, or any with ``any_address``: serving 0.0.0.0 or ::)."""

    port: int
    names: frozenset[str]
    any_address: bool = False

    @classmethod
    def serving(cls, host: str, port: int) -> Hosts:
        wildcard = host in ("0.0.0.0", "::", "")
        return cls(port, frozenset({"localhost", host.lower().strip("[]")}), wildcard)

    def allows(self, header: str) -> bool:
        host, sep, port = header.lower().rpartition(":")
        if not sep or "]" in port:  # no port: HTTP's own, 80
            host, port = header.lower(), "80"
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or not port.isdigit() or int(port) != self.port:
            return False
        if host in self.names:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return self.any_address or address.is_loopback


def new_token() -> str:
    """A launch token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


class Guard:
    """ASGI middleware: the ``Host`` header, then the token, then the app; every answer with :data:`HEADERS`."""

    def __init__(self, app: Any, token: str, hosts: Hosts, lang: str) -> None:
        self.app, self.token, self.hosts, self.lang = app, token, hosts, lang

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not self.hosts.allows(host):
            message = say(self.lang, N_("Host {host!r} is not the address this server serves (a page elsewhere "
                                        "cannot reach it through a name of its own); open the URL attnlab explore "
                                        "printed"), host=host[:100])
            return await _error(403, message)(scope, receive, send)
        if not self._has_token(scope, headers):
            message = say(self.lang, N_("this server needs its launch token: open the URL attnlab explore printed "
                                        "(…/?token=…)"))
            return await _error(403, message)(scope, receive, send)

        async def guarded(event: dict) -> None:
            if event["type"] == "http.response.start":
                event = {**event, "headers": [*event.get("headers", []), *HEADERS]}
            await send(event)

        await self.app(scope, receive, guarded)

    def _has_token(self, scope: dict, headers: dict[str, str]) -> bool:
        from urllib.parse import parse_qs

        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[-1]
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "token":
            given = given or value.strip()
        return bool(given) and secrets.compare_digest(given.encode(), self.token.encode())


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers={k.decode(): v.decode() for k, v in HEADERS})


def create_app(api: Api, token: str, hosts: Hosts, page: Callable[[str], str], lang: str = "en") -> Any:
    """The ASGI app: :class:`Guard` around the routes (``page(nonce)``: the page's HTML, its script allowed by
    ``nonce``)."""
    waiting = {"n": 0}
    limiter = anyio.CapacityLimiter(1)

    async def index(request: Request) -> Response:
        nonce = secrets.token_urlsafe(16)
        policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src data: blob:; "
                  "font-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        return HTMLResponse(page(nonce), headers={"content-security-policy": policy})

    async def models(request: Request) -> Response:
        return await answer(request, "models", b"")

    async def post(request: Request) -> Response:
        endpoint = request.path_params["endpoint"]
        if endpoint not in POSTS:
            return _error(404, say(lang, N_("no endpoint {endpoint!r}; the endpoints: {names}"), endpoint=endpoint,
                                   names=", ".join(("models", *POSTS))))
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) > MAX_BODY:
            return _error(413, say(lang, N_("the request has {n:,} bytes; the explorer reads at most {limit:,}"),
                                   n=int(size), limit=MAX_BODY))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return _error(413, say(lang, N_("the request has {n:,} bytes; the explorer reads at most {limit:,}"),
                                       n=len(body), limit=MAX_BODY))
        return await answer(request, endpoint, body)

    async def answer(request: Request, endpoint: str, body: bytes) -> Response:
        if waiting["n"] >= MAX_WAITING:
            return _error(503, say(lang, N_("the explorer is busy ({n} requests waiting); try again"),
                                   n=waiting["n"]))
        waiting["n"] += 1
        asked = request.query_params.get("lang") or lang
        try:
            result = await anyio.to_thread.run_sync(api.call, endpoint, body, asked, limiter=limiter)
        except ApiError as err:
            return _error(err.status, err.message)
        except Exception as err:  # a bug: one line to the page, the traceback to the terminal
            if os.environ.get("ATTNLAB_DEBUG"):
                traceback.print_exc(file=sys.stderr)
            return _error(500, say(lang, N_("internal error ({err_type}: {err}); rerun with ATTNLAB_DEBUG=1 for the "
                                            "details, and please report it"), err_type=type(err).__name__, err=err))
        finally:
            waiting["n"] -= 1
        return Response(json.dumps(result, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
                        media_type="application/json")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status == 405:
            return _error(405, say(lang, N_("{method} {path}: not a method this address answers"),
                                   method=request.method, path=request.url.path))
        return _error(status, say(lang, N_("{path}: nothing here; the page is / and the API under /api/"),
                                  path=request.url.path))

    routes = [Route("/", index, methods=["GET"]), Route("/api/models", models, methods=["GET"]),
              Route("/api/{endpoint}", post, methods=["POST"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    return Guard(app, token, hosts, lang)
