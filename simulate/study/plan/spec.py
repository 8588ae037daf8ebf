"""A study spec (TOML): a sweep of trained and scored models, the axes its trends run along, its claims.

A study is a sweep whose task is ``study`` (:mod:`simulate.study.train.point`) plus a ``[study]``
table; everything else is a sweep spec (README "Sweeps"), and an axis may name a training
option (``steps``) as well as a Setting field::

    name = "depth"
    seeds = 3                       # at least 2: intervals are over seeds

    [setting]
    preset = "llama"
    width = 64

    [axes]
    scheme = ["pre", "lns"]
    depth = [4, 8, 16, 32, 64]

    [options]                       # simulate.study.train.point: the study recipe by default
    steps = 1600

    [study]
    axes = ["depth"]                # trends along these (numbers > 0, at least two values each)
    claims = ["p2-depth-usefulness"]  # default: every claim the points can test
    stability = 0.5                 # also train every model for half the steps: is each verdict stable?
    tune_lr = [1e-3, 3e-3, 1e-2]    # the peak learning rate tuned per scheme and cell over this grid ...
    tune_seeds = [0]                # ... on these seeds (default: the first), then trained on every seed
    tune_lr_beyond = [3e-2]         # rates past the grid, tried where a cell's best rate is at that edge
    confidence = 0.95               # of every interval and test (default 0.95)
    multiplicity = "bonferroni"     # the family's adjustment: bonferroni, holm or bh (simulate.claims.judgement)
    bootstrap = 200                 # resamples of a bootstrap (at least 100)

``stability = f`` adds the swept option ``steps = [round(f N), N]``: every model is also
trained, with a whole schedule of its own, for ``round(f N)`` steps, and each verdict at ``N``
is tested for a change: the statistic's change between the two lengths, paired by seed, with its
interval (``stable`` where it is within a fraction of the level, :mod:`simulate.claims.along_axes`).
``tune_lr`` adds the swept field ``lr`` over the grid; a study with it is *tuned*: its models
are those at each cell's chosen rate (:mod:`simulate.study.plan.tuning`), and ``lr`` is no cell of
its own (LNS and Pre-LN are compared each at its own rate). ``tune_lr_beyond`` lists rates
outside the grid: a cell whose best rate so far is at an edge of what it tried goes on to the
next of these rates past that edge, one at a time (:func:`simulate.study.plan.tuning.reached_rates`).

Bad input raises :class:`StudyError`, one line naming the key. What each field of the
``[study]`` table may hold is declared once, in :data:`STUDY_FIELDS` (a field left out takes its
default), and the study's ``seeds`` (at least two: every interval is over seeds) in
:data:`STUDY_SEEDS`, with :mod:`theory.constraints`: ``study.FIELD=VALUE is not allowed: <what is
allowed>``. The rules between fields are written where the fields meet: an axis is a swept numeric
field of the spec (not one the study table sweeps itself) with two or more values, each > 0; a
claim needs its schemes among those the study trains; ``stability`` needs ``round(f steps)`` in
``1..steps-1``; ``tune_seeds`` and ``tune_lr_beyond`` come only with ``tune_lr``, the tuning seeds
among the study's seeds and the rates beyond outside the grid; a field the study table sweeps
(``steps``, ``lr``) is not swept by the spec too. An unknown key is refused as well.

>>> study = parse_study({"setting": {"preset": "llama", "width": 16, "heads": 2, "tokens": 16},
...                      "axes": {"scheme": ["pre", "lns"], "depth": [2, 4]}, "seeds": 2,
...                      "options": {"steps": 4, "data": "docs"}, "study": {"axes": ["depth"]}})
>>> study.name, len(study.sweep.points), study.axes, "p1-lns-loss" in study.claims
('study', 8, ('depth',), True)
>>> parse_study({"axes": {"depth": [2]}, "seeds": 2, "study": {"axes": ["depth"]}})
Traceback (most recent call last):
...
simulate.study.plan.spec.StudyError: study.axes: 'depth' has one value (2): a trend needs at least two
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simulate.claims.definitions import CLAIMS, applicable_claims
from simulate.claims.judgement import INFERENCE_FIELDS, Inference
from simulate.study.train.point import STUDY_DEFAULTS  # also registers the sweep task "study"
from simulate.sweep.spec import SPEC_KEYS, SpecError, Sweep, parse_spec, read_spec
from theory.constraints import Choice, ConstraintError, Integer, ListOf, Optional, Real, Text, check_fields

__all__ = ["STUDY_KEYS", "STUDY_FIELDS", "STUDY_SEEDS", "StudyError", "Study", "parse_study", "check_names",
           "load_study"]

STUDY_KEYS = tuple(k for k in SPEC_KEYS if k != "task") + ("study",)

_POSITIVE = Real(0.0, low_open=True)
# What each field of the [study] table may hold (theory.constraints; None: left out, the default). The rules
# between fields are where they meet: the axes against the sweep (_study_axes), the claims against its schemes
# (_claims), stability against steps (_stability), the tuning fields against tune_lr and the seeds (_tuning).
STUDY_FIELDS = {
    "axes": ListOf(Text(), 1, distinct=True, note="swept numeric fields"),
    "claims": Optional(ListOf(Choice(*applicable_claims(("pre", "lns"))), 1, distinct=True,
                              note="a knob claim compares two runs that differ in one field: verify --trained")),
    "stability": Optional(Real(0.0, 1.0, low_open=True, high_open=True, note="a fraction of the steps, e.g. 0.5")),
    "tune_lr": Optional(ListOf(_POSITIVE, 2, distinct=True, note="learning rates")),
    "tune_seeds": Optional(ListOf(Integer(0), 1, distinct=True, note="seeds the study trains")),
    "tune_lr_beyond": Optional(ListOf(_POSITIVE, distinct=True, note="learning rates outside study.tune_lr")),
    **{name: Optional(constraint) for name, constraint in INFERENCE_FIELDS.items()},
}
# A study's seeds (the spec's seeds key): at least two, since every interval of a study is over seeds.
STUDY_SEEDS = Integer(2) | ListOf(Integer(0), 2, distinct=True)


class StudyError(ValueError):
    """A study spec that cannot run; the message is one line naming the key."""


@dataclass(frozen=True)
class Study:
    """A validated study: its name, its points (a sweep of task ``study``), trend axes, claims, TOML text.

    ``linked`` maps a swept field to the fields zipped with it (``heads`` moves with ``width``):
    along an axis those move too, so they are not groups of its own.
    """

    name: str
    sweep: Sweep
    axes: tuple[str, ...]
    claims: tuple[str, ...]
    text: str = ""
    linked: dict = field(default_factory=dict)
    stability: tuple[int, int] | None = None  # (steps of the shorter models, steps N)
    tune_lr: tuple[float, ...] = ()  # the grid of a tuned study
    tune_seeds: tuple[int, ...] = ()
    tune_lr_beyond: tuple[float, ...] = ()  # rates past the grid's edges, tried where a cell's best is at one
    candidates: Sweep | None = None  # a tuned study resolved: every model of its grid (simulate.study.plan.tuning)
    inference: Inference = Inference()  # confidence, multiplicity method, bootstrap resamples of its reports

    @property
    def tuned(self) -> bool:
        return bool(self.tune_lr)

    def group_fields(self, axis: str) -> tuple[str, ...]:
        """The swept fields that stay fixed along ``axis``: one trend per combination of their values."""
        moving = {axis, "scheme", *self.linked.get(axis, ())}
        return tuple(f for f in self.cell_fields() if f not in moving)

    def cell_fields(self) -> tuple[str, ...]:
        """The swept fields but ``scheme`` and a tuned ``lr``: a cell of the study is one value of each."""
        return tuple(f for f in self.sweep.axis_fields if f != "scheme" and not (self.tuned and f == "lr"))

    def schemes(self) -> tuple[str, ...]:
        """The norm schemes the study trains, in first-seen order."""
        return tuple(dict.fromkeys(p.setting.scheme for p in self.sweep.points))

    def axis_values(self, axis: str) -> list:
        """The distinct values of ``axis`` over the points, sorted."""
        return sorted({_point_value(p, axis) for p in self.sweep.points})


def _point_value(point, axis: str):
    return point.axes[axis] if axis in point.axes else getattr(point.setting, axis)


def _declared(data: dict, table: dict) -> dict:
    """The fields of the [study] table (None where left out), each, and the spec's ``seeds``, checked against its
    declaration (:data:`STUDY_FIELDS`, :data:`STUDY_SEEDS`)."""
    fields = {name: table.get(name) for name in STUDY_FIELDS}
    try:
        STUDY_SEEDS.check("seeds", data.get("seeds"))
        check_fields(fields, STUDY_FIELDS, prefix="study.")
    except ConstraintError as error:
        raise StudyError(str(error)) from None
    return fields


def _study_axes(axes: list, sweep: Sweep, own: tuple[str, ...]) -> tuple[str, ...]:
    """``axes``, each a swept numeric field of ``sweep`` with two or more values > 0 and none of ``own`` (the
    fields the study table sweeps itself)."""
    for axis in axes:
        if axis in own:
            raise StudyError(f"study.axes: {axis!r} is swept by the study table itself, not an axis of trends")
        if axis not in sweep.axis_fields or axis == "scheme":
            swept = ", ".join(f for f in sweep.axis_fields if f != "scheme") or "none"
            raise StudyError(f"study.axes: {axis!r} is not a swept numeric field of this study: choose from {swept}")
        values = sorted({_point_value(p, axis) for p in sweep.points})
        if not all(_POSITIVE.accepts(v) for v in values):
            raise StudyError(f"study.axes: {axis!r} has values {values}: trends run against log({axis}), so "
                             "each value must be a number > 0")
        if len(values) < 2:
            raise StudyError(f"study.axes: {axis!r} has one value ({values[0]}): a trend needs at least two")
    return tuple(axes)


def _claims(claims: list | None, schemes: tuple[str, ...]) -> tuple[str, ...]:
    """``claims``, each with its schemes among ``schemes``; left out, every claim those schemes can test."""
    if claims is None:
        return applicable_claims(schemes)
    for name in claims:
        missing = [s for s in CLAIMS[name].schemes if s not in schemes]
        if missing:
            raise StudyError(f"study.claims: {name!r} needs scheme {missing[0]!r}, which this study does not "
                             f"train (schemes: {', '.join(schemes)})")
    return tuple(claims)


def _add_axis(data: dict, key: str, name: str, values: list) -> dict:
    """``data`` with ``name`` swept over ``values``; StudyError when the spec sweeps it already."""
    axes = data.get("axes", {})
    if name in axes:
        raise StudyError(f"study.{key} is not allowed with {name} among the axes: {key} sweeps {name} itself")
    return {**data, "axes": {**axes, name: values}}


def _stability(fraction: float | None, data: dict) -> tuple[dict, tuple[int, int] | None]:
    """The spec with ``steps = [round(f N), N]`` swept for ``stability = f`` (module docstring)."""
    if fraction is None:
        return data, None
    steps = data.get("options", {}).get("steps", STUDY_DEFAULTS["steps"])
    shorter = round(fraction * steps) if Integer(2).accepts(steps) else 0
    if not 1 <= shorter < steps:
        raise StudyError(f"study.stability={fraction!r} is not allowed with steps={steps!r}: round(fraction x steps) "
                         "must be a whole number of steps in 1..steps-1")
    return _add_axis(data, "stability", "steps", [shorter, steps]), (shorter, steps)


def _tuning(fields: dict, data: dict) -> tuple[dict, tuple[float, ...], tuple[int, ...], tuple[float, ...]]:
    """The spec with ``lr`` swept over ``tune_lr`` and ``tune_lr_beyond``; the grid, the tuning seeds and the
    rates beyond the grid (module docstring)."""
    grid = fields["tune_lr"]
    if grid is None:
        for key in ("tune_seeds", "tune_lr_beyond"):
            if fields[key] is not None:
                raise StudyError(f"study.{key} is allowed only with study.tune_lr (the grid they tune)")
        return data, (), (), ()
    beyond = fields["tune_lr_beyond"] or []
    if any(min(grid) <= rate <= max(grid) for rate in beyond):
        raise StudyError(f"study.tune_lr_beyond={beyond!r} is not allowed: learning rates below {min(grid):g} or "
                         f"above {max(grid):g} (outside study.tune_lr)")
    seeds = data["seeds"]
    trained = list(range(seeds)) if isinstance(seeds, int) else seeds
    chosen = trained[:1] if fields["tune_seeds"] is None else fields["tune_seeds"]
    if missing := [s for s in chosen if s not in trained]:
        raise StudyError(f"study.tune_seeds: seed {missing[0]} is not allowed: the study trains seeds "
                         f"{', '.join(map(str, trained))}")
    return (_add_axis(data, "tune_lr", "lr", sorted(grid + beyond)), tuple(sorted(grid)), tuple(chosen),
            tuple(sorted(beyond)))


def parse_study(data: dict, default_name: str = "study", text: str = "") -> Study:
    """Validate a study spec (the parsed TOML) and expand its points (module docstring)."""
    unknown = sorted(set(data) - set(STUDY_KEYS))
    if unknown:
        hint = "; a study's points are all of task 'study'" if "task" in unknown else ""
        raise StudyError(f"unknown key {unknown[0]!r}: a study spec has {', '.join(STUDY_KEYS)}{hint}")
    table = data.get("study")
    if not isinstance(table, dict):
        raise StudyError("a [study] table is needed (axes = [...], optionally claims = [...])")
    extra = sorted(set(table) - set(STUDY_FIELDS))
    if extra:
        raise StudyError(f"unknown key study.{extra[0]}: the [study] table has {', '.join(STUDY_FIELDS)}")
    fields = _declared(data, table)
    data, stability = _stability(fields["stability"], data)
    data, grid, tune_seeds, beyond = _tuning(fields, data)
    try:
        sweep = parse_spec({**{k: v for k, v in data.items() if k != "study"}, "task": "study"}, default_name)
    except SpecError as error:
        raise StudyError(str(error)) from None
    own = tuple(name for name, swept in (("steps", stability), ("lr", grid)) if swept)
    axes = _study_axes(fields["axes"], sweep, own)
    schemes = tuple(dict.fromkeys(p.setting.scheme for p in sweep.points))
    zips = data.get("zip", [])
    linked = {name: tuple(n for n in group if n != name)
              for group in ([zips] if isinstance(zips, dict) else zips) for name in group}
    inference = Inference(**{name: fields[name] for name in INFERENCE_FIELDS if fields[name] is not None})
    return Study(sweep.name, sweep, axes, _claims(fields["claims"], schemes), text, linked, stability, grid,
                 tune_seeds, beyond, inference=inference)


def check_names(studies) -> None:
    """Each study needs its own name (its reports go to ``DIR/NAME``): :class:`StudyError` naming a repeated one."""
    names = [study.name for study in studies]
    for name in names:
        if names.count(name) > 1:
            raise StudyError(f"two studies are named {name!r}: each study needs its own name (the name key, or the "
                             "file name)")


def load_study(path: str | Path, default_name: str | None = None) -> Study:
    """Read and validate a study spec file (named by its ``name`` key, else ``default_name`` or the file's stem)."""
    path = Path(path)
    try:
        data = read_spec(path)  # its errors name the file already
    except SpecError as error:
        raise StudyError(str(error)) from None
    try:
        return parse_study(data, default_name=default_name or path.stem, text=path.read_text())
    except (SpecError, StudyError) as error:
        raise StudyError(f"{path}: {error}") from None
