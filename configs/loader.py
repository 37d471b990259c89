"""Load and validate task YAML files: unknown keys and bad values are errors, never skipped."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from configs.paths import CONFIG_DIR, TASKS_DIR
from configs.schema import (
    BootstrapSpec,
    ConfigError,
    DatasetSpec,
    Limits,
    PerturbationSpec,
    ProfilingSpec,
    QuotaSpec,
    RoundSpec,
    SpecValueError,
    TaskSpec,
)
from configs.vocabulary.axes import AXES
from configs.vocabulary.registry import UnknownName
from configs.yamltext import parse_yaml

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
BLOB_PREFIX = "blob:"  # a dataset path naming a blob-store key instead of a file
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ROUND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TASK_KEYS = {
    "name",
    "version",
    "description",
    "input_fields",
    "output",
    "metric",
    "rounds",
    "slices",
    "perturbations",
    "weights",
    "limits",
    "instance_memory_gib",
    "batch_size",
    "perturb_fields",
    "profiling",
    "bootstrap",
    "min_slice_size",
    "quotas",
    "publish_results",
}


class ScoresOutput(Protocol):
    """What the loader needs to know of a metric: the output type it scores."""

    @property
    def output_type(self) -> str: ...


class DeclaresOutput(Protocol):
    """What the loader needs to know of an output type: its default key, whether a task
    lists labels for it and whether a task may rename its key."""

    @property
    def key(self) -> str: ...

    @property
    def takes_labels(self) -> bool: ...

    @property
    def renamable(self) -> bool: ...

    @property
    def extra_gold_fields(self) -> tuple[str, ...]: ...

    @property
    def threshold_range(self) -> tuple[float, float] | None: ...


class DeclaresPerturbation(Protocol):
    """What the loader needs to know of a perturbation: the kind of field it changes and
    whether it swaps terms (which change every input field of its kind, not only the
    task's ``perturb_fields``)."""

    @property
    def field_kind(self) -> str: ...

    @property
    def swaps_terms(self) -> bool: ...


FIELD_KINDS = ("text", "image")


@dataclass(frozen=True)
class _FieldKinds:
    """A task's input fields by kind, as far as the perturbation check needs them."""

    fields: tuple[str, ...]
    images: tuple[str, ...]
    perturbed: tuple[str, ...]

    def any_to_perturb(self, kind: str, every_field: bool) -> bool:
        candidates = self.fields if every_field else self.perturbed
        return any((f in self.images) == (kind == "image") for f in candidates)


_Entry = TypeVar("_Entry", covariant=True)


class Lookup(Protocol[_Entry]):
    """A registry as the loader uses it: ``get`` returns the entry or raises UnknownName."""

    def get(self, name: str) -> _Entry: ...


@dataclass(frozen=True)
class Plugins:
    """The registries a task's short names are checked against. The spec layer imports no
    plugin package; the layer that loads tasks for an engine passes them in."""

    metrics: Lookup[ScoresOutput]
    perturbations: Lookup[DeclaresPerturbation]
    outputs: Lookup[DeclaresOutput]


def load_defaults(config_dir: Path = CONFIG_DIR) -> dict[str, Any]:
    """The shared defaults file every task inherits."""
    return _read_yaml(config_dir / "defaults.yaml")


def load_task(path: str | Path, plugins: Plugins, config_dir: Path | None = None) -> TaskSpec:
    """Read one task file, merged over the defaults, into a validated TaskSpec."""
    path = Path(path)
    config_dir = config_dir or path.resolve().parent.parent
    return parse_task(read_task(path, config_dir), plugins, config_dir, str(path))


def with_defaults(raw: Mapping[str, Any], config_dir: Path) -> dict[str, Any]:
    """A task mapping (a file's or an uploaded one) merged over the shared defaults."""
    defaults = load_defaults(config_dir) if (config_dir / "defaults.yaml").exists() else {}
    return _merge(defaults, raw)


def read_task(path: Path, config_dir: Path) -> dict[str, Any]:
    """One task file merged over the defaults, not yet validated (the form a stored spec
    keeps, so the database and the files are checked by the same parser)."""
    return with_defaults(_read_yaml(path), config_dir)


def parse_task(
    merged: Mapping[str, Any],
    plugins: Plugins,
    config_dir: Path,
    source: str,
    resolve: Callable[[str], Path] | None = None,
) -> TaskSpec:
    """A merged spec mapping (a file's or a stored one) validated into a TaskSpec.
    ``resolve`` maps a dataset path with the ``blob:`` prefix to a local file; without it
    such a path is an error."""
    return _TaskParser(source, config_dir, plugins, resolve).parse(copy.deepcopy(dict(merged)))


def load_tasks(plugins: Plugins, tasks_dir: Path = TASKS_DIR) -> dict[str, TaskSpec]:
    """Every task under ``tasks_dir`` by name; a broken file raises, duplicates raise."""
    tasks: dict[str, TaskSpec] = {}
    # .yml files count too: a task file must never be skipped because of its suffix.
    for path in sorted([*tasks_dir.glob("*.yaml"), *tasks_dir.glob("*.yml")]):
        task = load_task(path, plugins, tasks_dir.parent)
        if task.name in tasks:
            raise ConfigError(str(path), "name", f"duplicate task name {task.name!r}")
        if path.stem != task.name:
            raise ConfigError(str(path), "name", f"must match the file name {path.stem!r}")
        tasks[task.name] = task
    return tasks


def _finite_number(value: Any) -> bool:
    """A real number (YAML's .nan and .inf are not; neither are booleans)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(str(path), "-", "file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), "-", f"not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "-", "top level must be a mapping")
    return data


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Override wins; mappings merge one level deep (so a task may change one limit)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


class _TaskParser:
    """Turns a merged mapping into a TaskSpec, raising ConfigError naming the field."""

    def __init__(
        self,
        source: str,
        config_dir: Path,
        plugins: Plugins,
        resolve: Callable[[str], Path] | None = None,
    ) -> None:
        self.source = source
        self.config_dir = config_dir
        self.plugins = plugins
        self.resolve = resolve

    def fail(self, field: str, problem: str) -> ConfigError:
        return ConfigError(self.source, field, problem)

    def parse(self, raw: dict[str, Any]) -> TaskSpec:
        unknown = sorted(set(raw) - _TASK_KEYS)
        if unknown:
            raise self.fail(unknown[0], f"unknown key (allowed: {', '.join(sorted(_TASK_KEYS))})")
        for key in ("name", "version", "input_fields", "output", "metric", "rounds"):
            if key not in raw:
                raise self.fail(key, "missing")
        name = self.text(raw["name"], "name")
        if not _NAME.match(name):
            raise self.fail("name", "must be lower-case letters, digits and '_'")
        fields, image_fields = self.input_fields(raw["input_fields"])
        output_type, labels, output_field = self.output(raw["output"])
        fooled_threshold = self.fooled_threshold(raw["output"], output_type)
        self.no_gold_among_inputs(fields, output_type, output_field)
        perturb_fields = self.names(raw.get("perturb_fields", list(fields)), "perturb_fields")
        if not set(perturb_fields) <= set(fields):
            raise self.fail("perturb_fields", "must be a subset of input_fields")
        perturbations = self.mapping(raw.get("perturbations", {}), "perturbations")
        extra = set(perturbations) - {"robustness", "fairness"}
        if extra:
            raise self.fail(f"perturbations.{sorted(extra)[0]}", "unknown axis")
        kinds = _FieldKinds(fields, image_fields, perturb_fields)
        slices = self.names(raw.get("slices", []), "slices", allow_empty=True)
        pictures = [s for s in slices if s in image_fields]
        if pictures:
            raise self.fail("slices", f"{pictures[0]!r} is an image field, not a group label")
        return TaskSpec(
            name=name,
            version=self.integer(raw["version"], "version", minimum=1),
            description=self.description(raw.get("description", "")),
            input_fields=fields,
            output_type=output_type,
            labels=labels,
            metric=self.metric(raw["metric"], output_type),
            rounds=self.rounds(raw["rounds"]),
            robustness=self.perturbations(perturbations.get("robustness", []), "robustness", kinds),
            fairness=self.perturbations(perturbations.get("fairness", []), "fairness", kinds),
            slices=slices,
            weights=self.weights(raw.get("weights", {})),
            limits=self.dataclass_of(Limits, raw.get("limits", {}), "limits"),
            instance_memory_gib=self.number(
                raw.get("instance_memory_gib", 2.0), "instance_memory_gib"
            ),
            batch_size=self.integer(raw.get("batch_size", 32), "batch_size", minimum=1),
            perturb_fields=perturb_fields,
            profiling=self.dataclass_of(ProfilingSpec, raw.get("profiling", {}), "profiling"),
            bootstrap=self.dataclass_of(BootstrapSpec, raw.get("bootstrap", {}), "bootstrap"),
            min_slice_size=self.integer(raw.get("min_slice_size", 10), "min_slice_size", minimum=1),
            source=self.source,
            quotas=self.quotas(raw.get("quotas", {})),
            publish_results=self.flag(raw.get("publish_results", False), "publish_results"),
            output_field=output_field,
            image_fields=image_fields,
            fooled_threshold=fooled_threshold,
        )

    def description(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail("description", "must be text")
        return value

    def input_fields(self, value: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Every input field's name, and those of them that carry an image. A field is a
        name (text) or ``{name: ..., kind: text | image}``."""
        if not isinstance(value, list) or not value:
            raise self.fail("input_fields", "must be a non-empty list of names")
        names: list[str] = []
        images: list[str] = []
        for i, item in enumerate(value):
            where = f"input_fields[{i}]"
            kind = "text"
            if isinstance(item, dict):
                if set(item) - {"name", "kind"}:
                    raise self.fail(where, "takes only 'name' and 'kind'")
                kind = item.get("kind", "text")
                if kind not in FIELD_KINDS:
                    raise self.fail(f"{where}.kind", f"must be one of {', '.join(FIELD_KINDS)}")
                item = item.get("name")
                where += ".name"
            name = self.text(item, where)
            if not _FIELD.match(name):
                raise self.fail(where, "must be a field name (letters, digits, '_')")
            names.append(name)
            if kind == "image":
                images.append(name)
        if len(set(names)) != len(names):
            raise self.fail("input_fields", "has duplicates")
        if len(images) == len(names):
            raise self.fail("input_fields", "needs at least one text field besides the images")
        return tuple(names), tuple(images)

    def no_gold_among_inputs(self, fields: tuple[str, ...], kind: str, key: str) -> None:
        """What a model is sent never holds the gold or the row's uid."""
        gold = {key, "uid", *self.plugins.outputs.get(kind).extra_gold_fields}
        leaked = [f for f in fields if f in gold]
        if leaked:
            raise self.fail("input_fields", f"{leaked[0]!r} is the gold or the uid, never an input")

    def flag(self, value: Any, field: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(field, "must be true or false")
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(field, "must be a non-empty string")
        return value

    def integer(self, value: Any, field: str, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(field, f"must be an integer >= {minimum}")
        return int(value)

    def number(self, value: Any, field: str) -> float:
        if not _finite_number(value) or value <= 0:
            raise self.fail(field, "must be a positive number")
        return float(value)

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, "must be a mapping")
        return value

    def names(self, value: Any, field: str, allow_empty: bool = False) -> tuple[str, ...]:
        if not isinstance(value, list) or (not value and not allow_empty):
            raise self.fail(field, "must be a non-empty list of names")
        items = tuple(self.text(item, f"{field}[{i}]") for i, item in enumerate(value))
        if len(set(items)) != len(items):
            raise self.fail(field, "has duplicates")
        return items

    def output(self, value: Any) -> tuple[str, tuple[str, ...], str]:
        """The output type's name, the task's labels and the key answers come under."""
        spec = self.mapping(value, "output")
        kind = spec.get("type")
        try:
            declared = self.plugins.outputs.get(str(kind))
        except UnknownName as exc:
            raise self.fail("output.type", str(exc)) from None
        allowed = {"type"}
        allowed |= {"labels"} if declared.takes_labels else set()
        allowed |= {"key"} if declared.renamable else set()
        allowed |= {"fooled_threshold"} if declared.threshold_range else set()
        if set(spec) - allowed:
            extra = sorted(set(spec) - allowed)[0]
            raise self.fail(f"output.{extra}", f"the {kind!r} output takes no {extra!r} key")
        key = declared.key
        if "key" in spec:
            key = self.text(spec["key"], "output.key")
            if not _FIELD.match(key):
                raise self.fail("output.key", "must be a field name (letters, digits, '_')")
        if not declared.takes_labels:
            return str(kind), (), key
        labels = self.names(spec.get("labels"), "output.labels")
        if len(labels) < 2:
            raise self.fail("output.labels", "needs at least two labels")
        return str(kind), labels, key

    def fooled_threshold(self, value: Any, kind: str) -> float | None:
        """The task's own threshold for its type's fooled rule (checked by ``output``
        to be a key the type takes), within the type's range."""
        if "fooled_threshold" not in value:
            return None
        low, high = self.plugins.outputs.get(kind).threshold_range or (0.0, 0.0)
        given = value["fooled_threshold"]
        if not _finite_number(given) or not low <= given <= high:
            raise self.fail("output.fooled_threshold", f"must be a number from {low:g} to {high:g}")
        return float(given) + 0.0  # -0.0 is 0

    def metric(self, value: Any, output_type: str) -> str:
        try:
            metric = self.plugins.metrics.get(value)
        except UnknownName as exc:
            raise self.fail("metric", str(exc)) from None
        if metric.output_type != output_type:
            raise self.fail("metric", f"{value!r} does not fit output type {output_type!r}")
        return str(value)

    def rounds(self, value: Any) -> tuple[RoundSpec, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail("rounds", "must be a non-empty list")
        rounds = tuple(self.round(item, f"rounds[{i}]") for i, item in enumerate(value))
        names = [r.name for r in rounds]
        if len(set(names)) != len(names):
            raise self.fail("rounds", "round names must be unique")
        return rounds

    def round(self, value: Any, field: str) -> RoundSpec:
        spec = self.mapping(value, field)
        if set(spec) - {"name", "datasets", "weight"}:
            raise self.fail(
                field, f"unknown key {sorted(set(spec) - {'name', 'datasets', 'weight'})[0]!r}"
            )
        name = self.text(spec.get("name"), f"{field}.name")  # a string: 012 is not 10
        if not _ROUND.match(name):
            raise self.fail(
                f"{field}.name", "must be a short name (letters, digits, '_', '-', '.')"
            )
        datasets = spec.get("datasets")
        if not isinstance(datasets, list) or not datasets:
            raise self.fail(f"{field}.datasets", "must be a non-empty list")
        parsed = tuple(self.dataset(d, f"{field}.datasets[{i}]") for i, d in enumerate(datasets))
        if len({d.name for d in parsed}) != len(parsed):
            raise self.fail(f"{field}.datasets", "dataset names must be unique within a round")
        return RoundSpec(name, parsed, self.number(spec.get("weight", 1.0), f"{field}.weight"))

    def dataset(self, value: Any, field: str) -> DatasetSpec:
        spec = self.mapping(value, field)
        if not {"name", "path"} <= set(spec) <= {"name", "path", "public"}:
            raise self.fail(field, "needs 'name' and 'path' (and may say 'public')")
        path = self.text(spec["path"], f"{field}.path")
        name = self.text(spec["name"], f"{field}.name")
        public = self.flag(spec.get("public", False), f"{field}.public")
        if path.startswith(BLOB_PREFIX):
            return DatasetSpec(name, self.blob_path(path, f"{field}.path"), public)
        if not (self.config_dir / path).is_file():
            raise self.fail(f"{field}.path", f"no such file {path!r} under {self.config_dir}")
        return DatasetSpec(name, path, public)

    def blob_path(self, path: str, field: str) -> str:
        """The local file of a blob-backed dataset (an absolute path: joined to the config
        folder it stays itself, so every reader of ``DatasetSpec.path`` finds it)."""
        if self.resolve is None:
            raise self.fail(field, "a blob-backed dataset needs a blob store")
        try:
            return str(self.resolve(path[len(BLOB_PREFIX) :]))
        except (KeyError, ValueError, OSError) as exc:
            raise self.fail(field, f"cannot read {path!r} ({exc})") from None

    def perturbations(
        self, value: Any, axis: str, kinds: _FieldKinds
    ) -> tuple[PerturbationSpec, ...]:
        if not isinstance(value, list):
            raise self.fail(f"perturbations.{axis}", "must be a list")
        specs = tuple(
            self.dataclass_of(PerturbationSpec, item, f"perturbations.{axis}[{i}]")
            for i, item in enumerate(value)
        )
        for i, spec in enumerate(specs):
            try:
                declared = self.plugins.perturbations.get(spec.name)
            except UnknownName as exc:
                raise self.fail(f"perturbations.{axis}[{i}].name", str(exc)) from None
            if not kinds.any_to_perturb(declared.field_kind, declared.swaps_terms):
                raise self.fail(
                    f"perturbations.{axis}[{i}].name",
                    f"{spec.name!r} changes {declared.field_kind} fields, and the task "
                    f"perturbs none (see input_fields and perturb_fields)",
                )
        return specs

    def weights(self, value: Any) -> dict[str, float]:
        spec = self.mapping(value, "weights")
        unknown = set(spec) - set(AXES)
        if unknown:
            raise self.fail(
                f"weights.{sorted(unknown)[0]}", f"unknown axis (axes: {', '.join(AXES)})"
            )
        weights = {axis: spec.get(axis, 0) for axis in AXES}
        for axis, weight in weights.items():
            if not _finite_number(weight) or weight < 0:
                raise self.fail(f"weights.{axis}", "must be a number >= 0")
        if not any(weights.values()):
            raise self.fail("weights", "at least one weight must be positive")
        return {axis: float(w) for axis, w in weights.items()}

    def quotas(self, value: Any) -> QuotaSpec:
        """Each limit a whole number >= 1, or null for none (0 would refuse every submission:
        a task closed to submissions is a different thing)."""
        spec = self.mapping(value, "quotas")
        known = [f.name for f in dataclasses.fields(QuotaSpec)]
        for key, item in spec.items():
            if key not in known:
                raise self.fail(f"quotas.{key}", f"unknown key (allowed: {', '.join(known)})")
            if item is not None:
                self.integer(item, f"quotas.{key}", minimum=1)
        return QuotaSpec(**spec)

    def dataclass_of(self, cls: type, value: Any, field: str) -> Any:
        spec = self.mapping(value, field)
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key, known_field in known.items():
            if known_field.default is dataclasses.MISSING and key not in spec:
                raise self.fail(f"{field}.{key}", "missing")
        for key, item in spec.items():
            if key not in known:
                raise self.fail(f"{field}.{key}", f"unknown key (allowed: {', '.join(known)})")
            default = known[key].default
            expected = type(default) if default is not dataclasses.MISSING else str
            # Limits and durations must be > 0: a 0 s timeout or a 0 MiB tmpfs means no limit.
            positive = cls is Limits or expected is float
            if expected is float and isinstance(item, int) and not isinstance(item, bool):
                item = float(item)
            if (
                not isinstance(item, expected)
                or isinstance(item, bool)
                or (isinstance(item, int | float) and not math.isfinite(item))
                or (isinstance(item, int | float) and (item <= 0 if positive else item < 0))
            ):
                bound = "> 0" if positive else ">= 0"
                raise self.fail(f"{field}.{key}", f"must be a {expected.__name__} {bound}")
        try:
            return cls(**spec)
        except SpecValueError as exc:  # a rule between fields, checked by the spec itself
            raise self.fail(f"{field}.{exc.field}", exc.problem) from None
