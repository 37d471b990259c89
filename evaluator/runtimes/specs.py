"""Runtime specs: how to reach a model, as frozen typed objects that validate on
construction. A spec is stored with the model row as a small JSON object (``to_dict``) and
read back with :func:`parse_runtime_spec`.

``process``: a trusted local command (``cwd`` relative to the checkout).
``url``: a model that already listens at ``http://host:port``.
``docker``: an image by source. ``upload`` loads only the tarball stored under ``blob``;
``registry`` always pulls ``image`` by reference (never a local image, file or directory);
``local`` is for trusted local use (CLI ``evaluate``, the embedded example models) and may
name any server file, directory or local image. A stored docker spec without ``source`` is
``local`` (rows the CLI stored before sources existed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, cast

from configs.vocabulary.registry import Registry
from configs.vocabulary.runtimes import StoredRuntime
from evaluator.runtimes.docker.references import check_registry_reference
from evaluator.transport.dialects import DEFAULT_DIALECT, get_dialect
from store.blobs import check_key


class DockerSource(StrEnum):
    """Where a docker runtime's image comes from."""

    UPLOAD = "upload"
    REGISTRY = "registry"
    LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class _Spec:
    """Shared by every runtime spec: its kind and the dialect its model speaks."""

    kind: ClassVar[str]
    protocol: str = DEFAULT_DIALECT

    def __post_init__(self) -> None:
        get_dialect(self.protocol)  # an unknown dialect is refused with a suggestion

    def to_dict(self) -> StoredRuntime:
        """The stored JSON form: ``kind`` first, fields left unset omitted."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        stored = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
        # the fields are StoredRuntime's keys (a test holds them): built by name, so cast
        return cast(
            StoredRuntime, {"kind": self.kind, **{k: v for k, v in stored.items() if v is not None}}
        )


@dataclass(frozen=True, kw_only=True)
class ProcessSpec(_Spec):
    """A local command serving the protocol on ``$PORT`` (trusted use only: no sandbox)."""

    kind: ClassVar[str] = "process"
    command: str | tuple[str, ...]
    cwd: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.command, list):
            object.__setattr__(self, "command", tuple(self.command))
        if not self.command or not all(isinstance(part, str) for part in _parts(self.command)):
            raise ValueError("a process runtime needs 'command'")


@dataclass(frozen=True, kw_only=True)
class UrlSpec(_Spec):
    """A model already listening at ``url``."""

    kind: ClassVar[str] = "url"
    url: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.url or not isinstance(self.url, str):
            raise ValueError("a url runtime needs 'url'")


@dataclass(frozen=True, kw_only=True)
class DockerSpec(_Spec):
    """A container image, by source; ``image_id`` pins what an upload was submitted as."""

    kind: ClassVar[str] = "docker"
    source: DockerSource = DockerSource.LOCAL
    image: str | None = None
    blob: str | None = None
    image_id: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            object.__setattr__(self, "source", DockerSource(self.source))
        except ValueError:
            known = ", ".join(DockerSource)
            raise ValueError(f"a docker runtime's source must be one of {known}") from None
        if self.source is DockerSource.REGISTRY:
            self._check_registry()
        else:
            self._check_stored()

    def _check_registry(self) -> None:
        if self.blob:
            raise ValueError("a registry docker runtime takes no 'blob'")
        check_registry_reference(self.image)  # type: ignore[arg-type]  # None is refused there

    def _check_stored(self) -> None:
        if self.source is DockerSource.UPLOAD and not self.blob:
            raise ValueError("an upload docker runtime needs 'blob'")
        if self.blob is not None:
            if not isinstance(self.blob, str):
                raise ValueError("'blob' must be a blob key")
            check_key(self.blob)
        elif not self.image:
            raise ValueError("a docker runtime needs 'image'")

    def to_dict(self) -> StoredRuntime:
        stored = super().to_dict()
        stored["source"] = self.source.value
        return stored


RuntimeSpec = ProcessSpec | UrlSpec | DockerSpec
RUNTIME_SPECS: Registry[type[RuntimeSpec]] = Registry("runtime kind")
for _spec in (DockerSpec, ProcessSpec, UrlSpec):
    RUNTIME_SPECS.add(_spec.kind, _spec)


def parse_runtime_spec(raw: Mapping[str, Any] | RuntimeSpec) -> RuntimeSpec:
    """The typed spec of a stored or submitted runtime object; ValueError with a sentence."""
    if isinstance(raw, ProcessSpec | UrlSpec | DockerSpec):
        return raw
    if not isinstance(raw, Mapping):
        raise ValueError("a runtime must be a JSON object")
    cls = RUNTIME_SPECS.get(raw.get("kind"))  # type: ignore[arg-type]  # UnknownName otherwise
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - allowed - {"kind"})
    if unknown:
        raise ValueError(
            f"a {cls.kind} runtime takes no {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    for field in fields(cls):
        if field.default is MISSING and field.name not in raw:
            raise ValueError(f"a {cls.kind} runtime needs {field.name!r}")
    return cls(**{k: v for k, v in raw.items() if k != "kind"})


def _parts(command: str | tuple[str, ...]) -> tuple[str, ...]:
    return (command,) if isinstance(command, str) else command
