"""The metrics endpoint's HTTP server: prometheus-client's WSGI app, served with limits.

prometheus-client's own `start_http_server` answers any path, starts one thread per
connection with no cap and no timeout, so slow or idle connections pile up threads inside the
user's training process (500 of them held 509 threads and slowed TensorFlow's steps). This
server is the same standard-library WSGI server prometheus-client uses
(wsgiref + socketserver.ThreadingMixIn), with these limits:

- only `/metrics` is served (what Prometheus, the PodMonitor and the annotations ask for),
  and `/livez` (the recovery rule's verdict, tfgpu.act.recovery: 200, or 503 while the process is
  stuck at its cap); any other path gets 404 and reads no metric;
- each connection lives at most REQUEST_TIMEOUT_S from its accept to its close, whatever it
  sends: the serving loop shuts down any connection past its deadline (every 0.5 s). The
  handler's socket timeout alone bounds each read, so a client sending a byte every few
  seconds would keep its slot for ever;
- at most MAX_CONNECTIONS are served at once. When all are taken, a new connection replaces
  the oldest one that has not yet sent its whole request (a slow or idle client), so eight
  slow clients cannot keep a liveness probe out: the probe sends its request at once and is
  answered in milliseconds. Only when every slot is answering a request is a new connection
  closed at once, with no thread. A flood of fast clients can still crowd scrapes out: that is
  for the network policy to stop, not the training process to absorb;
- the metrics themselves are collected at most COLLECTIONS_PER_S times a second: the
  collector runs inside the training process (TensorFlow's and NVML's figures, /proc), and a
  flood of 8 loopback clients cut a training loop's steps by 45 %. Scrapes beyond that get the
  latest collection's answer (at most 1 s old), or 429 when none fits their request; one
  scraper (Prometheus, or an HA pair) never reaches the limit and always gets fresh figures;
- requests are answered at most REQUESTS_PER_S a second (after a burst): a flood of fast
  clients costs the training process a bounded share of a CPU, not whatever the clients ask
  (the collection limit alone left the HTTP handling of hundreds of cached answers a second).
  Connections are taken faster, at most ACCEPTS_PER_S a second, the rest waiting in the listen
  queue: idle ones, which cost no answer, then cannot hold a liveness probe behind them for
  seconds (128 idle clients that reconnect as soon as they are cut kept it 2.4 s when
  connections were paced like answers), while the threads they start stay bounded;
- the server looks up no name: http.server's `server_bind` asks `socket.getfqdn` for the bound
  address, which waited 10 s for a silent DNS server inside `import tensorflow`.

Written on the standard library rather than another server package: the runtime goes into
every image and may add nothing the images do not already carry.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import socketserver
import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Tuple

PATH = "/metrics"
LIVEZ_PATH = "/livez"  # the recovery rule's verdict (tfgpu.act.recovery), for liveness probes
REQUEST_TIMEOUT_S = 10.0  # Prometheus' default scrape_timeout; a scrape needs milliseconds
MAX_CONNECTIONS = 8  # one Prometheus (or two, in HA) scrapes a target one request at a time
COLLECTIONS_PER_S = 4  # fresh collections per rolling second; more scrapes share the last one
# connections accepted per second, after a burst: Prometheus asks once per scrape interval and
# the kubelet once per probe period; each answer costs the training process ~0.5-1.5 ms of CPU
REQUESTS_PER_S = 50.0
REQUEST_BURST = 10
ACCEPTS_PER_S = 500.0  # connections taken a second, after a burst: each costs a thread start
ACCEPT_BURST = 50
_EVICT_WAIT_S = 1.0  # how long a new connection waits for the slot of the one it replaced


class _QuietHandler(WSGIRequestHandler):
    # each read's timeout (StreamRequestHandler.setup) and, read by the server at accept, the
    # connection's whole life
    timeout = REQUEST_TIMEOUT_S

    def parse_request(self) -> bool:
        ok = bool(super().parse_request())
        if ok:  # its request is in: no longer a slow client that a newcomer may replace
            self.server.answering(self.request)  # type: ignore[attr-defined]
            self.server.pace_answer()  # type: ignore[attr-defined]
        return ok

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on the user's stderr (prometheus-client's server is silent too)."""


class BoundedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # never keeps the user's program alive
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256  # the listen backlog: paced clients wait there (socketserver: 5)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._lock = threading.Lock()
        # each connection served now -> [its deadline (monotonic), whether its request is in]
        self._open: Dict[Any, List[Any]] = {}
        self._next_accept = 0.0  # when the next connection may be taken (monotonic)
        self._next_answer = 0.0  # when the next request may be answered (monotonic)
        super().__init__(*args, **kwargs)

    def server_bind(self) -> None:
        """HTTPServer.server_bind without its `socket.getfqdn` (a DNS lookup in the thread
        that imports TensorFlow): the address itself is the server's name."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pace()
        if not self._slots.acquire(blocking=False) and not (
            self._evict_a_slow_client() and self._slots.acquire(timeout=_EVICT_WAIT_S)
        ):
            self.shutdown_request(request)  # every slot is answering: closed now, no thread
            return
        lifetime = float(getattr(self.RequestHandlerClass, "timeout", None) or REQUEST_TIMEOUT_S)
        with self._lock:
            self._open[request] = [time.monotonic() + lifetime, False]
        try:
            super().process_request(request, client_address)  # starts the thread
        except BaseException:
            with self._lock:
                self._open.pop(request, None)  # the base class closes it
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _pace(self) -> None:
        """At most ACCEPTS_PER_S connections a second (after a burst of ACCEPT_BURST): the
        serving loop waits its turn, and later clients wait in the listen queue."""
        now = time.monotonic()
        turn = max(self._next_accept, now - ACCEPT_BURST / ACCEPTS_PER_S) + 1 / ACCEPTS_PER_S
        self._next_accept = turn
        if turn > now:
            time.sleep(turn - now)

    def pace_answer(self) -> None:
        """At most REQUESTS_PER_S answers a second (after a burst of REQUEST_BURST): the
        handler's thread waits its turn. A flood then costs at most that many answers a
        second of the training process's CPU."""
        with self._lock:
            now = time.monotonic()
            turn = max(self._next_answer, now - REQUEST_BURST / REQUESTS_PER_S)
            turn += 1 / REQUESTS_PER_S
            self._next_answer = turn
        if turn > now:
            time.sleep(turn - now)

    def answering(self, request: Any) -> None:
        with self._lock:
            if request in self._open:
                self._open[request][1] = True

    def _evict_a_slow_client(self) -> bool:
        """Shut down the oldest connection whose request is not in yet; its thread then reads
        end of file, ends and frees its slot. False when every slot is answering."""
        with self._lock:
            waiting = [
                (deadline, id(r), r) for r, (deadline, done) in self._open.items() if not done
            ]
            if not waiting:
                return False
            _, _, oldest = min(waiting)
            self._cut(oldest)
            return True

    def service_actions(self) -> None:
        """Every turn of the serving loop (0.5 s at most): end connections past their life."""
        now = time.monotonic()
        with self._lock:
            for request in [r for r, (deadline, _) in self._open.items() if deadline <= now]:
                self._cut(request)

    def _cut(self, request: Any) -> None:
        """Shut a served connection down (under the lock, so never one already closed: its fd
        could be another socket's by then); its thread's blocked read or write returns."""
        del self._open[request]
        with contextlib.suppress(OSError):  # the client has gone already
            request.shutdown(socket.SHUT_RDWR)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)  # closed below: never cut after this
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or hung up: nothing to tell the user's program (the base
        class would print a traceback on its stderr)."""


class Collections:
    """The WSGI app of PATH, called at most `per_s` times in any rolling second; a scrape over
    the limit gets the latest answer to the same request (method, query, accepted types and
    encodings), or 429 when there is none. One collection at a time."""

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        per_s: int = COLLECTIONS_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._per_s = per_s
        self._clock = clock
        self._lock = threading.Lock()
        self._times: Deque[float] = collections.deque()  # the collections of the last second
        self._answers: Dict[Tuple[str, ...], Tuple[float, str, List[Tuple[str, str]], bytes]] = {}

    def __call__(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        key = tuple(
            str(environ.get(name, ""))
            for name in ("REQUEST_METHOD", "QUERY_STRING", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING")
        )
        # a collection that hangs (a TensorFlow or NVML call) holds its own thread only: the
        # scrapes queued behind it give up in time and free their slots
        if not self._lock.acquire(timeout=REQUEST_TIMEOUT_S):
            return _text(start_response, "503 Service Unavailable", _HUNG)
        try:
            now = self._clock()
            while self._times and self._times[0] <= now - 1.0:
                self._times.popleft()
            kept = self._answers.get(key)
            if len(self._times) >= self._per_s:
                if kept is None or kept[0] <= now - 1.0:
                    return _text(start_response, "429 Too Many Requests", _TOO_MANY)
                _, status, headers, body = kept
            else:
                self._times.append(now)
                status, headers, body = self._collect(environ)
                if len(self._answers) >= 16:  # a few kinds of request exist; never grow
                    self._answers.clear()
                self._answers[key] = (now, status, headers, body)
        finally:
            self._lock.release()
        start_response(status, headers)
        return [body]

    def _collect(self, environ: Any) -> Tuple[str, List[Tuple[str, str]], bytes]:
        answer: List[Any] = []

        def start_response(status: str, headers: List[Tuple[str, str]], *_: Any) -> Any:
            answer[:] = [status, list(headers)]
            return lambda data: None  # prometheus-client returns its body, never writes

        body = b"".join(self._app(environ, start_response))
        return answer[0], answer[1], body


_HUNG = f"the last collection has taken more than {REQUEST_TIMEOUT_S:.0f} s: try again later\n"
_TOO_MANY = f"more than {COLLECTIONS_PER_S} scrapes a second: try again in a second\n"


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

    metrics = Collections(app)

    def serve(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == PATH:
            return metrics(environ, start_response)
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

    server = Server((addr, port), _QuietHandler)  # make_server's two steps
    server.set_app(routes(app, livez))
    thread = threading.Thread(target=server.serve_forever, name="tfgpu-metrics", daemon=True)
    thread.start()
    return server
