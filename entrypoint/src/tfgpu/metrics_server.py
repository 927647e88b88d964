"""The metrics endpoint's HTTP server: prometheus-client's WSGI app, served with limits.

prometheus-client's own `start_http_server` answers any path, starts one thread per
connection with no cap and no timeout, so slow or idle connections pile up threads inside the
user's training process (500 of them held 509 threads and slowed TensorFlow's steps). This
server is the same standard-library WSGI server prometheus-client uses
(wsgiref + socketserver.ThreadingMixIn), with three limits:

- only `/metrics` is served (what Prometheus, the PodMonitor and the annotations ask for),
  and `/livez` (the recovery rule's verdict, tfgpu.recovery: 200, or 503 while the process is
  stuck at its cap); any other path gets 404 and reads no metric;
- each connection has REQUEST_TIMEOUT_S to send its request and take the answer
  (`StreamRequestHandler.timeout`), then it is closed;
- at most MAX_CONNECTIONS are served at once; one more is closed at once, with no thread.
  A flood can still deny scrapes (for up to REQUEST_TIMEOUT_S after it stops): that is for the
  network policy to stop, not the training process to absorb.

Written on the standard library rather than another server package: the runtime goes into
every image and may add nothing the images do not already carry.
"""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, List, Optional, Tuple

PATH = "/metrics"
LIVEZ_PATH = "/livez"  # the recovery rule's verdict (tfgpu.recovery), for liveness probes
REQUEST_TIMEOUT_S = 10.0  # Prometheus' default scrape_timeout; a scrape needs milliseconds
MAX_CONNECTIONS = 8  # one Prometheus (or two, in HA) scrapes a target one request at a time


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S  # applied to the connection by StreamRequestHandler.setup

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on the user's stderr (prometheus-client's server is silent too)."""


class BoundedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # never keeps the user's program alive
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the cap: closed now, no thread started
            return
        try:
            super().process_request(request, client_address)  # starts the thread
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or hung up: nothing to tell the user's program (the base
        class would print a traceback on its stderr)."""


def _text(start_response: Callable[..., Any], status: str, text: str) -> Iterable[bytes]:
    body = text.encode()
    headers: List[Tuple[str, str]] = [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(body))),
    ]
    start_response(status, headers)
    return [body]


def routes(
    app: Callable[..., Iterable[bytes]], livez: Optional[Callable[[], Tuple[bool, str]]] = None
) -> Callable[..., Iterable[bytes]]:
    """The WSGI app on PATH, `livez` (alive, text) on LIVEZ_PATH (200 or 503), 404 elsewhere."""

    def serve(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == PATH:
            return app(environ, start_response)
        if path == LIVEZ_PATH and livez is not None:
            alive, text = livez()
            return _text(start_response, "200 OK" if alive else "503 Service Unavailable", text)
        return _text(start_response, "404 Not Found", f"not found: {PATH} is served here\n")

    return serve


def serve(
    app: Callable[..., Iterable[bytes]],
    addr: str,
    port: int,
    livez: Optional[Callable[[], Tuple[bool, str]]] = None,
) -> BoundedServer:
    """Listen on (addr, port) and serve `app` on a daemon thread; raises OSError when the
    address cannot be bound (taken port, an address this container does not have)."""

    class Server(BoundedServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    server = make_server(addr, port, routes(app, livez), Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="tfgpu-metrics", daemon=True)
    thread.start()
    return server
