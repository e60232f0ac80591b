"""One error type for the HTTP layer: a status, a message, and the request field at fault.

Request parsing raises ``ApiError`` directly; engine errors (``SchemaError``,
``GrammarError``, ``UsageError``, the chat layer's) become one through ``api_error``,
which keeps their ``http_status`` and names the field that carried the constraint. Each
API module renders an ``ApiError`` in its own JSON shape; the status is shared.
"""

from __future__ import annotations

import logging

from ..errors import GrammarError, LlamayError, SchemaError

log = logging.getLogger("llamay.server")

#: Seconds a client should wait before retrying a request refused because the queue is full.
RETRY_AFTER_SECONDS = 1


class ApiError(Exception):
    """A request the server refuses; ``param`` is the request field at fault (OpenAI's ``param``)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


def bad_field(field: str, problem: str) -> ApiError:
    """400 naming ``field``: the message starts with the field so every shape carries it."""
    return ApiError(400, f"{field}: {problem}", param=field)


def unsupported(field: str, what: str) -> ApiError:
    """400 for a known field asking for something llamay does not do: refused by name, never silently ignored."""
    return ApiError(400, f"{field}: {what} is not supported by llamay", param=field, code="unsupported_parameter")


def overloaded(queue: int) -> ApiError:
    return ApiError(503, f"the server is busy: {queue} requests are already waiting; retry later", code="overloaded")


def shutting_down() -> ApiError:
    return ApiError(503, "the server is shutting down; retry later", code="shutting_down")


def api_error(exc: BaseException, constraint_field: str | None = None) -> ApiError:
    """Any exception raised while serving a request, as an ``ApiError`` with the right status.

    A refused schema or grammar names the request field that carried it, then the
    keyword and JSON Pointer (or rule, line and column) from the compiler. Anything not
    a ``LlamayError`` is our bug: 500, logged with its traceback, message kept generic.
    """
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, SchemaError):
        where = constraint_field or "schema"
        return ApiError(exc.http_status, f"{where}: {exc} (keyword {exc.keyword!r})", param=where,
                        code="invalid_schema" if exc.http_status == 400 else None)
    if isinstance(exc, GrammarError):
        where = constraint_field or "grammar"
        return ApiError(exc.http_status, f"{where}: {exc}", param=where,
                        code="invalid_grammar" if exc.http_status == 400 else None)
    if isinstance(exc, LlamayError):
        if exc.http_status >= 500:
            log.error("%s: %s", type(exc).__name__, exc)
        return ApiError(exc.http_status, str(exc))
    log.exception("internal error while serving a request", exc_info=exc)
    return ApiError(500, f"internal error: {type(exc).__name__}")
