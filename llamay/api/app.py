"""Routes, API keys and model names: what a request is before any token is generated.

No sockets here. ``App.handle`` turns (method, path, headers, body) into a ``Reply`` (a
complete response) or a ``Generation`` (a ``GenerateRequest`` and the renderer for its
answer), which the server then runs. Errors are rendered in the shape of the API the
path belongs to, whatever went wrong: an unknown route under ``/api/`` answers in
Ollama's shape, under ``/v1/messages`` in Anthropic's, anywhere else in OpenAI's.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..engine import Model
from . import anthropic, ollama, openai
from .errors import RETRY_AFTER_SECONDS, ApiError, api_error
from .fields import Body, GenerateRequest, dumps, warning_headers
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .metrics import Metrics
from .render import Renderer
from .worker import Worker

try:
    VERSION = metadata.version("llamay")
except metadata.PackageNotFoundError:  # a checkout that is not installed
    VERSION = "0.0.0"

#: Request bodies larger than this are refused with 413 from their Content-Length, before they are read.
DEFAULT_MAX_BODY = 16 << 20

#: Requests allowed to wait while one generates; one more is refused with 503 (529 for Anthropic).
DEFAULT_QUEUE = 32

JSON = "application/json"


@dataclass
class Reply:
    """A complete response."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Generation:
    """A request to run through ``Model.chat``, and how to answer it."""

    request: GenerateRequest
    renderer: Renderer
    api: str


@dataclass(frozen=True)
class Route:
    api: str  # "openai" | "anthropic" | "ollama" | "llamay": the error shape
    handler: Callable[[App, Route, bytes], Reply | Generation]  # an App method, called with the app
    auth: bool = True
    arg: str = ""  # a path parameter (the model id of /v1/models/{id})


_ERROR_BODIES: dict[str, Callable[[ApiError], dict[str, Any]]] = {
    "openai": openai.error_body, "anthropic": anthropic.error_body, "ollama": ollama.error_body,
    "llamay": openai.error_body,
}


def api_of(path: str) -> str:
    """Which API's error shape a path gets when it matches no route."""
    if path.startswith("/api/"):
        return "ollama"
    if path.startswith("/v1/messages"):
        return "anthropic"
    return "openai"


class App:
    """One served model under its names, with an optional API key and the server's lexicon."""

    def __init__(self, model: Model, *, aliases: tuple[str, ...] = (), api_key: str | None = None,
                 lexicon: list[str] | None = None, max_body: int = DEFAULT_MAX_BODY, queue: int = DEFAULT_QUEUE,
                 info: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.names = list(dict.fromkeys([model.model_id, *aliases, "default"]))
        self.api_key = api_key or None
        self.lexicon = lexicon
        self.max_body = max_body
        self.queue = queue
        self.created = int(time.time())
        self.info = dict(info or model_info(model))
        self.metrics = Metrics([*(path for _, path in ROUTES), "/v1/models"])
        self.worker: Worker | None = None

    def watch(self, worker: Worker) -> None:
        """The worker the server runs generations on: ``/health`` and ``/metrics`` report its slots."""
        self.worker = worker
        self.metrics.watch(worker.running, lambda: worker.generating, lambda: worker.waiting)

    # -- dispatch -------------------------------------------------------------------------
    def route(self, method: str, path: str, headers: Mapping[str, str] | None = None) -> Route:
        """The route for ``method`` and ``path`` (HEAD as GET); 404 or 405 ``ApiError`` otherwise.

        ``/v1/models`` is both OpenAI's and Anthropic's: the ``anthropic-version`` header,
        which Anthropic's clients always send, picks the shape.
        """
        method = "GET" if method == "HEAD" else method
        if path == "/v1/models" or path.startswith("/v1/models/"):
            if method != "GET":
                raise ApiError(405, f"{method} is not allowed on {path}; use GET")
            api = "anthropic" if "anthropic-version" in (headers or {}) else "openai"
            name = path[len("/v1/models/"):]
            return Route(api, App._model if name else App._models, arg=name)
        found = ROUTES.get((method, path))
        if found is not None:
            return found
        allowed = sorted(m for m, p in ROUTES if p == path)
        if allowed:
            raise ApiError(405, f"{method} is not allowed on {path}; use {', '.join(allowed)}")
        raise ApiError(404, f"no route for {method} {path}", code="unknown_route")

    def authorized(self, route: Route, headers: Mapping[str, str]) -> bool:
        """``Authorization: Bearer KEY`` or ``x-api-key: KEY``, compared in constant time."""
        if self.api_key is None or not route.auth:
            return True
        bearer = headers.get("authorization", "")
        offered = bearer[7:].strip() if bearer[:7].lower() == "bearer " else headers.get("x-api-key", "")
        return hmac.compare_digest(offered.encode(), self.api_key.encode())

    def handle(self, route: Route, body: bytes) -> Reply | Generation:
        """Run the route's handler; any refusal becomes an error ``Reply`` in the route's API shape."""
        try:
            return route.handler(self, route, body)
        except Exception as exc:  # rendered for the client; api_error logs what is our bug
            return self.error_reply(route.api, api_error(exc))

    def error_reply(self, api: str, error: ApiError) -> Reply:
        status = anthropic.error_status(error) if api == "anthropic" else error.status
        headers = [("Retry-After", str(RETRY_AFTER_SECONDS))] if error.code in ("overloaded", "shutting_down") else []
        if status == 401:
            headers.append(("WWW-Authenticate", 'Bearer realm="llamay"'))
        return Reply(status, dumps(_ERROR_BODIES[api](error)).encode(), headers=headers)

    def _check_model(self, name: str) -> None:
        """A named model must be one of the served model's names; none named means the served model."""
        if name and name not in self.names:
            raise ApiError(404, f"model {name!r} not found; this server serves {', '.join(self.names)}",
                           param="model", code="model_not_found")

    def _generation(self, request: GenerateRequest, renderer: type[Renderer], api: str) -> Generation:
        self._check_model(request.model)
        request.model = request.model or self.model.model_id
        if request.chat.get("lexicon") is True and self.lexicon is not None:
            request.chat["lexicon"] = self.lexicon
        return Generation(request, renderer(request), api)

    # -- generation routes ----------------------------------------------------------------
    def _chat_completions(self, route: Route, body: bytes) -> Generation:
        return self._generation(openai.chat_request(Body.parse(body)), openai.ChatRenderer, "openai")

    def _completions(self, route: Route, body: bytes) -> Generation:
        return self._generation(openai.completion_request(Body.parse(body)), openai.CompletionRenderer, "openai")

    def _messages(self, route: Route, body: bytes) -> Generation:
        return self._generation(anthropic.messages_request(Body.parse(body)), anthropic.MessageRenderer,
                                "anthropic")

    def _ollama_chat(self, route: Route, body: bytes) -> Generation:
        return self._generation(ollama.chat_request(Body.parse(body)), ollama.OllamaRenderer, "ollama")

    def _ollama_generate(self, route: Route, body: bytes) -> Generation:
        return self._generation(ollama.generate_request(Body.parse(body)), ollama.OllamaRenderer, "ollama")

    # -- model routes ---------------------------------------------------------------------
    def _models(self, route: Route, body: bytes) -> Reply:
        if route.api == "anthropic":
            return _json(anthropic.model_list(self.names, self.created))
        return _json(openai.model_list(self.names, self.created))

    def _model(self, route: Route, body: bytes) -> Reply:
        self._check_model(route.arg)
        if route.api == "anthropic":
            return _json(anthropic.model_object(route.arg, self.created))
        return _json(openai.model_object(route.arg, self.created))

    def _tags(self, route: Route, body: bytes) -> Reply:
        return _json(ollama.tags(self.names, self.info))

    def _show(self, route: Route, body: bytes) -> Reply:
        request = Body.parse(body)
        self._check_model(ollama.show_request(request))
        return _json(ollama.show(self.info), warning_headers(request.unknown_warnings()))

    def _version(self, route: Route, body: bytes) -> Reply:
        return _json({"version": VERSION})

    def _root(self, route: Route, body: bytes) -> Reply:
        return Reply(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _health(self, route: Route, body: bytes) -> Reply:
        health: dict[str, Any] = {"status": "ok", "model": self.model.model_id}
        if self.worker is not None:
            health["slots"] = {"total": self.worker.running, "busy": self.worker.generating,
                               "waiting": self.worker.waiting}
        return _json(health)

    def _metrics(self, route: Route, body: bytes) -> Reply:
        return Reply(200, self.metrics.render(), METRICS_CONTENT_TYPE)



ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/chat/completions"): Route("openai", App._chat_completions),
    ("POST", "/v1/completions"): Route("openai", App._completions),
    ("POST", "/v1/messages"): Route("anthropic", App._messages),
    ("POST", "/api/chat"): Route("ollama", App._ollama_chat),
    ("POST", "/api/generate"): Route("ollama", App._ollama_generate),
    ("GET", "/api/tags"): Route("ollama", App._tags),
    ("POST", "/api/show"): Route("ollama", App._show),
    ("GET", "/api/version"): Route("ollama", App._version),
    ("GET", "/"): Route("ollama", App._root, auth=False),
    ("GET", "/health"): Route("llamay", App._health, auth=False),
    ("GET", "/metrics"): Route("llamay", App._metrics),
}

def _json(value: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    return Reply(200, dumps(value).encode(), headers=headers or [])


def model_info(model: Model) -> dict[str, Any]:
    """What ``/api/tags`` and ``/api/show`` report: file size and time, format, template, tool dialect."""
    backend = model.backend
    info: dict[str, Any] = {"template": model.template.source if not model.template.is_default else "",
                            "model_info": {"general.name": model.model_id,
                                           "llamay.tool_dialect": model.dialect.name}}
    path = getattr(backend, "path", None)
    if isinstance(path, Path) and path.exists():
        stat = path.stat()
        info.update(size=stat.st_size, modified=stat.st_mtime, format=path.suffix.lstrip(".").lower())
    return info


def read_lexicon(path: str | Path) -> list[str]:
    """A word list file: one word a line (or a JSON array); blank lines and ``#`` comments skipped."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        words = json.loads(text)
    else:
        words = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not words or not all(isinstance(w, str) and w for w in words):
        raise ValueError(f"{path}: no words, or an entry that is not a non-empty string")
    return words
