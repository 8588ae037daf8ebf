"""A sweep spec (TOML): parsed, validated as a whole, expanded into points, each keyed by a hash.

The file names a task, a base Setting, axes over Setting fields, seeds and the task's own
options (docs in README "Sweeps")::

    task = "run"                    # predict | run | train | scores
    seeds = [0, 1]                  # or a count: seeds = 2 means 0, 1 (not for predict)

    [setting]                       # the base Setting: a preset and fields
    preset = "llama"
    width = 32

    [axes]                          # crossed with each other, in the order written
    scheme = ["pre", "lns"]         # Setting fields, or options of the task (steps = [400, 1600])
    depth = [8, 16]

    [[zip]]                         # lists of one length, zipped; crossed with the axes
    width = [32, 64]
    init_std = [0.05, 0.025]

    [options]                       # the task's own (simulate.sweep.tasks)
    samples = 8
    metrics = ["var", "angular"]

Every point's Setting and options are built and checked before anything runs: a bad value
names the point and the field (:class:`SpecError`). A point's key is built by the one key
builder (:func:`simulate.runtime.keys.result_key`) from its request (task, every Setting field,
seed, options with defaults filled in) and its versions (the task's code version, the digest
of the corpus it reads, Python and torch), so a spec that spells the same point differently
finds the same result and other code, data or versions do not. A task that is not
*versioned* (:attr:`simulate.sweep.tasks.Task.versioned`, the studies' points) is keyed by its
config alone (:func:`simulate.runtime.keys.config_hash`, the code version ``''``) and records
what made each result with the result instead.

>>> sweep = parse_spec({"task": "predict", "setting": {"block": "linear", "width": 8},
...                     "axes": {"depth": [2, 4]}})
>>> [(p.index, p.setting.depth, p.seed) for p in sweep.points], sweep.axis_fields
([(0, 2, None), (1, 4, None)], ('depth',))
>>> parse_spec({"task": "predict", "axes": {"depth": [2, 0]}})
Traceback (most recent call last):
...
simulate.sweep.spec.SpecError: point 1 (depth=0): depth=0 is not allowed: an integer >= 1
>>> sweep = parse_spec({"task": "train", "axes": {"steps": [20, 40]}})
>>> [p.options["steps"] for p in sweep.points], sweep.axis_fields
([20, 40], ('steps',))
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

from simulate.runtime.keys import config_hash, key_inputs, result_key
from simulate.runtime.versions import closure_version
from simulate.sweep.tasks import TASKS
from theory.constraints import Integer
from theory.setting import Setting, SettingError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (pyproject: tomli; python_version<'3.11')
    import tomli as tomllib

__all__ = ["SpecError", "Point", "Sweep", "read_spec", "load_spec", "parse_spec", "SPEC_KEYS"]

SPEC_KEYS = ("task", "name", "setting", "axes", "zip", "seeds", "options")
_FIELDS = tuple(f.name for f in fields(Setting))


class SpecError(ValueError):
    """A sweep spec that cannot run; the message is one line naming the key (and the point)."""


@dataclass(frozen=True)
class Point:
    """One point of a sweep: a Setting, a seed (None for an unseeded task) and the task's options.

    ``axes`` holds this point's value of each swept field (the summary's config columns);
    ``code`` is the code version of the task's sources ('' for a task that is not
    versioned) and ``versions`` what the point is keyed with
    (:func:`simulate.runtime.keys.key_inputs`: that code version, the corpus digest, Python and
    torch of the process that parsed the spec; empty for a task that is not versioned).
    ``workdir``, not part of the config, is where a task may keep files of its own beside the
    point's record (a study keeps each trained model there).
    """

    index: int
    task: str
    setting: Setting
    seed: int | None
    options: dict
    axes: dict
    code: str
    workdir: str | None = None
    versions: dict = field(default_factory=dict)

    def request(self) -> dict:
        """What the point asks: task, Setting, seed, options."""
        return {"task": self.task, "setting": self.setting.to_dict(), "seed": self.seed, "options": self.options}

    def config(self) -> dict:
        """The full config that names the point: :meth:`request` and the code version."""
        return {**self.request(), "code": self.code}

    @property
    def key(self) -> str:
        """The point's file name: :func:`simulate.runtime.keys.result_key` of :meth:`request` and
        ``versions``; for a task that is not versioned, :func:`simulate.runtime.keys.config_hash` of
        :meth:`config` (the versions left out)."""
        return result_key(self.request(), self.versions) if self.versions else config_hash(self.config())

    def to_dict(self) -> dict:
        """JSON-ready form (what travels to a worker)."""
        return {"index": self.index, "axes": self.axes, "workdir": self.workdir, "versions": self.versions,
                **self.config()}

    @classmethod
    def from_dict(cls, data: dict) -> "Point":
        """Inverse of :meth:`to_dict`."""
        return cls(index=data["index"], task=data["task"], setting=Setting.from_dict(data["setting"]),
                   seed=data["seed"], options=data["options"], axes=data["axes"], code=data["code"],
                   workdir=data.get("workdir"), versions=data.get("versions") or {})


@dataclass(frozen=True)
class Sweep:
    """A validated spec: its task, its points in order, the swept fields and its name."""

    name: str
    task: str
    points: tuple[Point, ...]
    axis_fields: tuple[str, ...]


def read_spec(path: str | Path) -> dict:
    """The parsed TOML of a spec file, not validated (to change it before :func:`parse_spec`)."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except OSError as error:
        raise SpecError(f"{path}: cannot read the spec: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML: {error}") from None


def load_spec(path: str | Path) -> Sweep:
    """Read and validate a TOML spec file (:func:`parse_spec`); errors name the file."""
    path = Path(path)
    data = read_spec(path)
    try:
        return parse_spec(data, default_name=path.stem)
    except SpecError as error:
        raise SpecError(f"{path}: {error}") from None


def _axis_groups(data: dict, option_names) -> list[dict[str, list]]:
    """Each crossed axis as a one-field group, then each zip group; validated shapes.

    An axis names a Setting field or one of ``option_names`` (the task's options).
    """
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise SpecError("axes must be a table of field = [values]")
    zips = data.get("zip", [])
    zips = [zips] if isinstance(zips, dict) else zips
    if not isinstance(zips, list) or not all(isinstance(z, dict) for z in zips):
        raise SpecError("zip must be a table (or [[zip]] tables) of field = [values]")
    groups = [{name: values} for name, values in axes.items()] + [dict(z) for z in zips]
    seen: set[str] = set()
    for group in groups:
        for name, values in group.items():
            if name not in _FIELDS and name not in option_names:
                allowed = ", ".join(_FIELDS + tuple(n for n in option_names if n != "device"))
                raise SpecError(f"axis {name!r} is not a Setting field or an option of the task: choose from "
                                f"{allowed}")
            if name in seen:
                raise SpecError(f"axis {name!r} is given twice")
            seen.add(name)
            if not isinstance(values, list) or not values:
                raise SpecError(f"axis {name}={values!r} must be a non-empty list of values")
        lengths = {len(v) for v in group.values()}
        if len(lengths) > 1:
            raise SpecError(f"zip lists {', '.join(group)} have different lengths {sorted(lengths)}: "
                            "zip needs one length")
    return groups


def _seeds(data: dict, seeded: bool, task: str) -> list[int | None]:
    raw = data.get("seeds")
    if not seeded:
        if raw is not None:
            raise SpecError(f"seeds: task {task!r} is deterministic, leave seeds out")
        return [None]
    if raw is None:
        return [0]
    if Integer(1).accepts(raw):
        return list(range(raw))
    if isinstance(raw, list) and raw and all(Integer(0).accepts(s) for s in raw) and len(set(raw)) == len(raw):
        return list(raw)
    raise SpecError(f"seeds={raw!r} is not allowed: a count >= 1 or a list of distinct integers >= 0")


def _build_setting(base: dict, values: dict) -> Setting:
    fields_ = {**base, **values}
    unknown = sorted(set(fields_) - set(_FIELDS))
    if unknown:
        raise SettingError(unknown[0], fields_[unknown[0]], f"a field of Setting: {', '.join(_FIELDS)}")
    preset = fields_.pop("preset", None)
    return Setting.preset(preset, **fields_) if preset is not None else Setting(**fields_)


def _describe(values: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "the base setting"


def parse_spec(data: dict, default_name: str = "sweep") -> Sweep:
    """Validate a spec (the parsed TOML) as a whole and expand its points.

    Order: the crossed axes as written (the last varies fastest), then each zip group,
    then seeds. Raises :class:`SpecError` at the first problem; nothing runs before.
    """
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise SpecError(f"unknown key {unknown[0]!r}: a spec has {', '.join(SPEC_KEYS)}")
    task_name = data.get("task")
    if task_name not in TASKS:
        raise SpecError(f"task={task_name!r} is not allowed: one of {', '.join(TASKS)}")
    task = TASKS[task_name]
    base = data.get("setting", {})
    if not isinstance(base, dict):
        raise SpecError("setting must be a table of Setting fields")
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise SpecError("options must be a table")
    try:
        options = task.check_options(options)
    except (ValueError, ImportError) as error:
        raise SpecError(f"options: {error}") from None
    groups = _axis_groups(data, [name for name in options if name not in _FIELDS])
    seeds = _seeds(data, task.seeded, task_name)
    code = closure_version(task.module) if task.versioned else ""
    points, keys = [], {}
    combos = itertools.product(*[[dict(zip(g, row)) for row in zip(*g.values())] for g in groups])
    for combo in combos:
        values = {k: v for part in combo for k, v in part.items()}
        setting_values = {k: v for k, v in values.items() if k in _FIELDS}
        option_values = {k: v for k, v in values.items() if k not in _FIELDS}
        try:
            point_options = task.check_options({**options, **option_values}) if option_values else options
            setting = _build_setting(base, setting_values)
            task.check_setting(setting, point_options)
        except (SettingError, ValueError, TypeError) as error:
            raise SpecError(f"point {len(points)} ({_describe(values)}): {error}") from None
        versions = key_inputs(code, task.corpus_digest(point_options)) if task.versioned else {}
        for seed in seeds:
            point = Point(len(points), task_name, setting, seed, point_options, values, code, versions=versions)
            if point.key in keys:
                raise SpecError(f"points {keys[point.key]} and {point.index} have the same config "
                                f"({_describe(values)}, seed={seed}): drop one")
            keys[point.key] = point.index
            points.append(point)
    name = data.get("name", default_name)
    return Sweep(str(name), task_name, tuple(points), tuple(k for g in groups for k in g))
