"""The only code that touches sockets: asyncio streams carrying HTTP/1.1 through h11.

Theory of operation. Each connection is a loop over h11 events: a request's head is
checked before its body is read (route, API key, ``Content-Length`` against the body
limit: 413 without reading), then ``App.handle`` answers it or plans a generation.
A generation runs on the ``Worker`` thread; its items come back over an
``asyncio.Queue`` and are written as the renderer's frames (SSE or NDJSON, chunked) or,
for a non-streaming request, as one JSON body. The status line waits for the first item
after the request is accepted, so a refusal the engine finds late (the context is too
small) is still a 4xx with the API's error body; later errors go into the stream in its
own format. While a generation runs, the connection is read in the background: EOF
means the client left, and the request's ``cancel`` event stops generation. Keep-alive
follows h11 (``start_next_cycle``); any response sent before its request's body was
read closes the connection.

Bounds, so that no client holds a connection forever: a request's head and body must
arrive within ``read_timeout`` of its first byte (else 408), a connection waiting for a
request's first byte is closed silently after ``idle_timeout``, and past
``max_connections`` a new connection is answered 503 at once. A response being generated
is under none of them: its client is waiting, not sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

import h11

from .app import App, Generation, Reply, api_of
from .errors import ApiError, api_error, shutting_down
from .fields import dumps, encode_frame, merge_warnings, warning_headers
from .worker import Item, Worker

log = logging.getLogger("llamay.server")

#: Bytes read from a socket at a time.
READ_SIZE = 64 << 10

#: Bytes of pipelined requests buffered while a response is being generated.
MAX_PIPELINED = 1 << 20

#: Seconds a shutdown waits for open responses before closing their connections.
SHUTDOWN_GRACE = 5.0

#: Largest request head (request line and headers).
MAX_HEAD = 64 << 10

#: Seconds a request's head and body may take from its first byte: nginx's client_header_timeout and
#: client_body_timeout, but counted once for the whole request (nginx times the body between reads), so a
#: client trickling a byte at a time cannot stretch it. A body of the default --max-body (16 MiB) makes it
#: at 2.3 Mbit/s.
READ_TIMEOUT = 60.0

#: Seconds a connection may wait for a request's first byte before it is closed: nginx's keepalive_timeout.
#: Well above the pools of common clients (httpx, which the OpenAI and Anthropic SDKs use, keeps an idle
#: connection 5 s, aiohttp 15 s), so a client seldom reuses a connection the server is just closing.
IDLE_TIMEOUT = 75.0

#: Open connections served at once; one more is answered 503 and closed. Hundreds of waiting clients
#: are far more than a one-generation-at-a-time server can use, and 512 (nginx's worker_connections)
#: stays well under the usual limit of 1024 open files a process, which the model's files share.
MAX_CONNECTIONS = 512


class Server:
    """An ``App`` served on ``host:port`` (port 0: any free port, see ``port``)."""

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 11435, *, read_timeout: float = READ_TIMEOUT,
                 idle_timeout: float = IDLE_TIMEOUT, max_connections: int = MAX_CONNECTIONS) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.worker = Worker(app.model, app.queue)
        app.watch(self.worker)
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._closed: asyncio.Event | None = None  # created on the serving loop
        self.stopping = False

    async def start(self) -> None:
        self._closed = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, self.host, self.port, limit=READ_SIZE)
        self.port = self._server.sockets[0].getsockname()[1]

    async def wait_closed(self) -> None:
        assert self._closed is not None
        await self._closed.wait()

    async def stop(self) -> None:
        """Stop accepting, cancel generations, give open responses a moment, then close everything."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        await asyncio.get_running_loop().run_in_executor(None, self.worker.close)
        for task, connection in list(self._connections.items()):
            if not connection.busy:  # idle keep-alive connections go at once
                task.cancel()
        if self._connections:
            _, pending = await asyncio.wait(list(self._connections), timeout=SHUTDOWN_GRACE)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._closed is not None:
            self._closed.set()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        full = len(self._connections) >= self.max_connections
        connection = self._connections[task] = _Connection(self, reader, writer)
        try:
            if full:  # at once, without waiting for a request: a silent client would hold the slot
                await connection.close_with(ApiError(503, f"the server is at its limit of {self.max_connections} open "
                                                          "connections (--max-connections); retry later",
                                                     code="overloaded"))
            else:
                await connection.run()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self._connections.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class _Connection:
    """One client connection: h11 state, the socket pair, and the request being answered."""

    def __init__(self, server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.app = server.app
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.eof = False
        self.request_id = ""
        self.head_only = False
        self.busy = False  # between a request's head and the end of its response
        self.cancel = threading.Event()  # the current generation's
        self.deadline: float | None = None  # when the request being read must be complete; None before its first byte
        self.received_ns = 0  # monotonic: when the current request's head arrived

    async def run(self) -> None:
        while True:
            self.request_id = ""  # until a request's head is read, an error names no request
            # a request pipelined behind the last response has its first byte already: its clock is running
            self.deadline = self._read_deadline() if self.h11.trailing_data[0] else None
            try:
                event = await self._next()
            except h11.RemoteProtocolError as exc:
                await self._protocol_error(exc)
                return
            except asyncio.TimeoutError:
                await self.close_with(self._timed_out())
                return
            if not isinstance(event, h11.Request):
                return  # ConnectionClosed, or a client that sent something else
            self.busy = True
            try:
                await self._request(event)
            finally:
                self.busy = False
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return  # a body left unread, or Connection: close
            self.h11.start_next_cycle()

    async def _next(self) -> Any:
        """The next h11 event; ``asyncio.TimeoutError`` once the request being read is past its deadline."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.deadline is None:  # no byte of a request yet: the connection is idle
                try:
                    data = await asyncio.wait_for(self.reader.read(READ_SIZE), self.server.idle_timeout)
                except asyncio.TimeoutError:
                    return h11.ConnectionClosed()  # closed without a word, as nginx and llama-server do
                self.deadline = self._read_deadline()
            else:
                remaining = self.deadline - asyncio.get_running_loop().time()
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), remaining)
            self.eof = not data
            self.h11.receive_data(data)

    def _read_deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.server.read_timeout

    def _timed_out(self) -> ApiError:
        return ApiError(408, f"the request did not arrive within {self.server.read_timeout:g} s (--read-timeout)",
                        code="request_timeout")

    async def _protocol_error(self, exc: h11.RemoteProtocolError) -> None:
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            await self.close_with(ApiError(exc.error_status_hint, f"malformed HTTP request: {exc}"))

    async def close_with(self, error: ApiError) -> None:
        """An error for a request that was not (or not wholly) read, in OpenAI's shape: no path tells the API."""
        await self._reply(self.app.error_reply("openai", error), close=True)

    # -- one request ----------------------------------------------------------------------
    async def _request(self, request: h11.Request) -> None:
        self.received_ns = time.monotonic_ns()
        method = request.method.decode("ascii", "replace")
        path = request.target.decode("latin-1").split("?", 1)[0]
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        self.request_id = "req_" + secrets.token_hex(12)
        self.head_only = method == "HEAD"
        api = api_of(path)
        stats: dict[str, Any] = {}
        try:
            route = self.app.route(method, path, headers)
        except ApiError as exc:
            route, error = None, exc
        else:
            error = None
            api = route.api
            if not self.app.authorized(route, headers):
                error = ApiError(401, "a valid API key is required (Authorization: Bearer KEY or x-api-key: KEY)")
        status = 499  # unless an answer is sent: the client left first
        try:
            status = await self._answer(route, error, api, headers, stats)
        finally:
            _log_request(method, path, status, (time.monotonic_ns() - self.received_ns) / 1e9, stats)
            self.app.metrics.observe(path, status, stats)

    async def _answer(self, route: Any, error: ApiError | None, api: str, headers: dict[str, str],
                      stats: dict[str, Any]) -> int:
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.app.max_body:
            error = ApiError(413, f"the request body has {length} bytes; this server takes at most "
                                  f"{self.app.max_body} (--max-body)", code="request_too_large")
        if error is not None and (error.status == 413 or (error.status == 401 and _has_body(headers))):
            # an unread body: answered from the head, and the connection closed
            return await self._reply(self.app.error_reply(api, error), close=True)
        if self.h11.they_are_waiting_for_100_continue:
            self._send(h11.InformationalResponse(status_code=100, headers=[]))
        try:
            body = await self._read_body()
        except asyncio.TimeoutError:
            return await self._reply(self.app.error_reply(api, self._timed_out()), close=True)
        except h11.RemoteProtocolError as exc:  # broken framing (a chunk size that is not hex), or EOF mid-body
            if self.eof:
                return 499
            error = ApiError(exc.error_status_hint, f"malformed HTTP request body: {exc}")
            return await self._reply(self.app.error_reply(api, error), close=True)
        if body is None:
            error = ApiError(413, f"the request body is over {self.app.max_body} bytes (--max-body)",
                             code="request_too_large")
            return await self._reply(self.app.error_reply(api, error), close=True)
        if error is not None:
            return await self._reply(self.app.error_reply(api, error))
        answer = self.app.handle(route, body)
        if isinstance(answer, Reply):
            return await self._reply(answer)
        return await self._generate(answer, stats)

    async def _read_body(self) -> bytes | None:
        """The whole body, or None once it grows past the limit (chunked bodies have no length up front)."""
        parts, size = [], 0
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.app.max_body:
                    return None
                parts.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            else:
                raise ConnectionError("the client closed the connection mid-request")

    # -- generation -----------------------------------------------------------------------
    async def _generate(self, gen: Generation, stats: dict[str, Any]) -> int:
        request = gen.request
        stats.update(constraint=request.constraint_kind, warnings=list(request.warnings))
        cancel = self.cancel = threading.Event()
        try:
            items = self.server.worker.submit(request, cancel, self.received_ns)
        except ApiError as exc:
            return await self._reply(self.app.error_reply(gen.api, exc))
        watcher = asyncio.create_task(self._watch(cancel))
        try:
            first = await items.get()
            if first[0] != "ready":
                return await self._refuse(gen, first)
            warnings = merge_warnings(request.warnings, first[1])
            stats["warnings"] = warnings
            if request.stream:
                return await self._stream(gen, items, warnings, stats)
            return await self._whole(gen, items, warnings, stats)
        finally:
            cancel.set()  # no effect once generation is over; stops it if we leave early
            watcher.cancel()
            await asyncio.wait([watcher])  # the connection's reader is ours again

    async def _refuse(self, gen: Generation, item: Item) -> int:
        """An error answer before anything was sent; nothing at all for a client that has left."""
        if self.eof:
            return 499
        if item[0] in ("cancelled", "done"):  # "done": cut short by the shutdown
            error = shutting_down()
        else:
            error = api_error(item[1], gen.request.constraint_field)
        return await self._reply(self.app.error_reply(gen.api, error))

    def _cut_short(self, item: Item) -> bool:
        """A ``Done`` that only means the server's shutdown cancelled the generation."""
        return item[0] == "done" and self.server.stopping and self.cancel.is_set()

    async def _stream(self, gen: Generation, items: asyncio.Queue[Item], warnings: list[str],
                      stats: dict[str, Any]) -> int:
        renderer = gen.renderer
        item = await items.get()
        if item[0] in ("error", "cancelled") or self._cut_short(item):
            return await self._refuse(gen, item)  # nothing sent yet: a proper status and body
        headers = [("Content-Type", renderer.media_type), ("Cache-Control", "no-cache"),
                   ("X-Accel-Buffering", "no"), *warning_headers(warnings)]
        self._send(h11.Response(status_code=200, headers=self._headers(headers), reason=b"OK"))
        frames = renderer.start(warnings)
        while True:
            kind = item[0]
            if kind == "event":
                frames += renderer.event(item[1], item[2])
            elif kind == "choice":
                frames += renderer.end_choice(item[1], item[2])
            elif self._cut_short(item):
                frames += renderer.error(shutting_down())
                stats["error"] = "shutting down"
            elif kind == "done":
                frames += renderer.finish(item[1], item[2])
                _done_stats(stats, [c.done for c in renderer.ended(item[1])], item[2], renderer.sent_warnings)
            elif kind == "error":
                frames += renderer.error(api_error(item[1], gen.request.constraint_field))
                stats["error"] = str(item[1])
            if frames:
                self._send(h11.Data(data=b"".join(encode_frame(renderer.media_type, f) for f in frames)))
            frames = []
            if kind not in ("event", "choice"):
                break
            if items.empty():
                await self._drain()
            item = await items.get()
        self._send(h11.EndOfMessage())
        await self._drain()
        return 200

    async def _whole(self, gen: Generation, items: asyncio.Queue[Item], warnings: list[str],
                     stats: dict[str, Any]) -> int:
        renderer = gen.renderer
        while True:
            item = await items.get()
            if item[0] == "event":
                renderer.event(item[1], item[2])
            elif item[0] == "choice":
                renderer.end_choice(item[1], item[2])
            elif item[0] == "done" and not self._cut_short(item):
                break
            else:
                return await self._refuse(gen, item)
        done, timing = item[1], item[2]
        dones = [c.done for c in renderer.ended(done)]
        warnings = merge_warnings(warnings, *(d.warnings for d in dones))
        _done_stats(stats, dones, timing, warnings)
        body = dumps(renderer.response(done, timing, warnings)).encode()
        return await self._reply(Reply(200, body, headers=warning_headers(warnings)))

    async def _watch(self, cancel: threading.Event) -> None:
        """Read while a response is generated: EOF cancels it; pipelined bytes are kept for h11."""
        buffered = 0
        while not self.eof and buffered < MAX_PIPELINED:
            data = await self.reader.read(READ_SIZE)
            if not data:
                self.eof = True
                cancel.set()
                return
            buffered += len(data)
            self.h11.receive_data(data)

    # -- writing --------------------------------------------------------------------------
    def _headers(self, extra: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
        base = [("Date", formatdate(usegmt=True)), ("Server", "llamay")]
        if self.request_id:
            base.append(("x-request-id", self.request_id))
        return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in base + extra]

    async def _reply(self, reply: Reply, *, close: bool = False) -> int:
        headers = [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body))), *reply.headers]
        if close:
            headers.append(("Connection", "close"))
        self._send(h11.Response(status_code=reply.status, headers=self._headers(headers), reason=_reason(reply.status)))
        if not self.head_only:
            self._send(h11.Data(data=reply.body))
        self._send(h11.EndOfMessage())
        await self._drain()
        return reply.status

    def _send(self, event: Any) -> None:
        data = self.h11.send(event)
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def _drain(self) -> None:
        if self.writer.is_closing():
            raise ConnectionResetError("the client closed the connection")
        await self.writer.drain()


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Overloaded" if status == 529 else b""


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers


def _done_stats(stats: dict[str, Any], dones: list[Any], timing: Any, warnings: list[str]) -> None:
    """The log's and the metrics' numbers: the prompt once, every choice's tokens, the last choice's finish."""
    first, last = dones[0], dones[-1]
    stats.update(prompt=first.usage["prompt_tokens"], completion=sum(d.usage["completion_tokens"] for d in dones),
                 cached=first.usage.get("cached_tokens", 0), forced=sum(d.usage.get("forced_tokens", 0) for d in dones),
                 eval_s=timing.eval_ns / 1e9,
                 first_token_s=timing.first_token_ns / 1e9, finish=last.finish_reason, warnings=list(warnings))


def _log_request(method: str, path: str, status: int, seconds: float, stats: dict[str, Any]) -> None:
    """One line a request: route, status, time, and for generations tokens, tokens/s, constraint, warnings."""
    parts = [f"{method} {path} {status} {seconds * 1000:.0f}ms"]
    if "completion" in stats:
        rate = stats["completion"] / stats["eval_s"] if stats["eval_s"] > 0 else 0.0
        parts.append(f"tokens={stats['prompt']}+{stats['completion']} {rate:.1f} tok/s finish={stats['finish']}")
        if stats.get("forced"):
            parts.append(f"forced={stats['forced']}")
    if "constraint" in stats:
        parts.append(f"constraint={stats['constraint']}")
    if stats.get("warnings"):
        parts.append("warnings=" + "; ".join(stats["warnings"]))
    if stats.get("error"):
        parts.append(f"error={stats['error']}")
    log.info(" ".join(parts))


async def serve(app: App, host: str, port: int, *, on_ready: Any = None, **options: Any) -> None:
    """Serve until SIGINT or SIGTERM, then shut down cleanly (the CLI's main loop); ``options`` go to ``Server``."""
    server = Server(app, host, port, **options)
    await server.start()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
    if on_ready is not None:
        on_ready(server)
    await stopping.wait()
    log.info("shutting down")
    await server.stop()


@contextlib.contextmanager
def running(app: App, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Iterator[Server]:
    """Serve ``app`` on a background thread for the duration of a ``with`` block (tests, benchmarks).

    ``options`` go to ``Server`` (timeouts, connection cap).
    """
    loop = asyncio.new_event_loop()
    server = Server(app, host, port, **options)
    ready = threading.Event()
    failure: list[BaseException] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=main, name="llamay-server", daemon=True)
    thread.start()
    ready.wait()
    if failure:
        raise failure[0]
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=SHUTDOWN_GRACE + 30)
        thread.join()
        loop.close()

