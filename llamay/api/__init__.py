"""The HTTP layer: OpenAI, Anthropic and Ollama APIs over one ``Model``. Re-exports only.

``server.py`` is the only module with sockets; ``openai.py``, ``anthropic.py`` and
``ollama.py`` translate requests and events with pure functions; ``app.py`` routes.
"""

from .app import App, Generation, Reply
from .errors import ApiError
from .server import Server, running, serve

__all__ = ["ApiError", "App", "Generation", "Reply", "Server", "running", "serve"]
