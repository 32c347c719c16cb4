"""Starting the explorer: the page's boot data and font (cut once per launch), the socket, uvicorn.

The port is bound here, before uvicorn starts, so that a port in use is one line naming it, and ``--port 0`` takes
any free port, printed in the URL. uvicorn handles Ctrl-C itself: it stops serving, then raises the signal again,
which the command line turns into ``Interrupted.`` and exit status 130.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import Any

from attnlab.explore.api import Api
from attnlab.explore.catalog import all_text, tables
from attnlab.i18n import tr

#: the language switch names each language in itself
LANGUAGE_NAMES = "English中文"


def boot_data(api: Api, lang: str, token: str | None = None, snapshot: dict | None = None) -> dict[str, Any]:
    """What the page starts from: the models, the catalog in both languages, the language, and the launch token
    (the server's page) or the snapshot's answers (an exported page)."""
    data: dict[str, Any] = {"models": api.models(), "strings": tables(), "lang": lang}
    if token is not None:
        data["token"] = token
    if snapshot is not None:
        data["snapshot"] = snapshot
    return data


def launch_font(api: Api, extra: str = "") -> dict[str, Any]:
    """The launch face: the glyphs of the page's words in both languages, the models' starting texts and
    ``extra``."""
    texts = "".join(e.text for e in api.entries.values())
    return api.fonts.base(all_text() + LANGUAGE_NAMES + texts + extra)


def named_face(face: dict[str, Any]) -> dict[str, Any]:
    """The launch face as the boot data names it: its family and characters (its rule is in the page's head)."""
    return {"family": face["family"], "chars": face["chars"], "css": ""}


def page_maker(api: Api, lang: str, token: str) -> Callable[[str], str]:
    """``nonce -> page``; the boot data and the launch face (a cut of about two seconds) made once, here."""
    from attnlab.explore.page import page_html

    boot, face = boot_data(api, lang, token), launch_font(api)
    boot["font"] = named_face(face)
    return lambda nonce: page_html(boot, face["css"], nonce=nonce)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port); a port in use or a host that is not this machine's is
    a ValueError naming it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ValueError(tr("--host: {host!r} is not an address of this machine ({err})", host=host,
                            err=err.strerror)) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT is free; one in use is not
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise ValueError(tr("--port: port {port} is in use on {host} (another program listens there); choose "
                                "another with --port, or --port 0 for any free one", port=port, host=host)) from None
        if err.errno in (errno.EACCES, errno.EPERM):
            raise ValueError(tr("--port: port {port} on {host} needs privileges this user lacks; choose one above "
                                "1023", port=port, host=host)) from None
        raise ValueError(tr("--host: cannot listen on {host}:{port} ({err})", host=host, port=port,
                            err=err.strerror)) from None
    return sock


def url_of(sock: socket.socket, host: str, token: str) -> str:
    """The URL to open: the address served (127.0.0.1 when serving every address), the port, the token."""
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else \
        f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def make_server(app: Any, ready: Callable[[], None]) -> Any:
    """A uvicorn server for ``app`` that calls ``ready()`` once it answers (quiet: no access log)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                ready()

    return Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                 timeout_graceful_shutdown=2))


def serve(app: Any, sock: socket.socket, ready: Callable[[], None]) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C (or SIGTERM); ``ready()`` once it answers."""
    make_server(app, ready).run(sockets=[sock])


def local_server(api: Api, token: str, lang: str = "en") -> tuple[str, Callable[[], None]]:
    """``api`` served on a free port of 127.0.0.1 from a daemon thread of this process (the tests' server, the
    benchmark's): ``(base URL, stop)``, once it answers."""
    import threading

    from attnlab.explore.server import Hosts, create_app

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(api, token, Hosts.serving("127.0.0.1", port), page_maker(api, lang, token), lang)
    up = threading.Event()
    server = make_server(app, up.set)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    up.wait()

    def stop() -> None:
        server.should_exit = True
        thread.join(30)

    return f"http://127.0.0.1:{port}", stop
