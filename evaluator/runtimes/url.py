"""The ``url`` runtime: a model that already runs at an HTTP address (nothing to start)."""

from __future__ import annotations

from urllib.parse import urlsplit

from evaluator.runtimes.runtime import Runtime, RuntimeInfo
from evaluator.transport.dialects import DEFAULT_DIALECT, get_dialect
from evaluator.transport.endpoint import Endpoint


class UrlRuntime(Runtime):
    """Talk to ``url`` (``http://host:port``); start and stop leave the model alone."""

    kind = "url"

    def __init__(self, url: str, protocol: str = DEFAULT_DIALECT) -> None:
        self.dialect = get_dialect(protocol)
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"expected an http://host:port URL, got {url!r}")
        if parts.path not in ("", "/"):
            raise ValueError(f"the URL must not carry a path, got {parts.path!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or self.dialect.default_port

    def start(self) -> Endpoint:
        return Endpoint(self.host, self.port, self.dialect)

    def stop(self) -> None:
        """The model is not ours to stop."""

    def info(self) -> RuntimeInfo:
        return RuntimeInfo(self.kind, {"url": self.url})
