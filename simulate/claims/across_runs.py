"""``verify --trained``'s judge: the trained claims on groups of training runs, at step 0 and after training.

Runs are grouped by everything but their seed (the Setting and the training options). Each
run is measured at two stages, its step 0 (the model at its seed's initialisation) and its
last step, by :func:`simulate.claims.statistics.model_statistics` on the scores of
:data:`VERIFY_OPTIONS` (cached, :func:`simulate.scores.training_cache.cached_scores`). Then, at
each stage (:mod:`simulate.claims.definitions` says what each claim states):

- a signed claim on one scheme: the statistic's t interval over the group's seeds;
- a growth claim: :func:`simulate.claims.growth.judge_growth` on the group's profiles;
- a claim on two schemes: for two groups that differ only in their scheme, the first
  scheme's statistic minus the second's (:func:`~simulate.claims.judgement.difference_interval`:
  paired by seed where the groups have the same seeds, Welch otherwise);
- a knob claim: for a group that differs from a Pre-LN group only in the claim's knob and is
  its sparser side, the same difference against that reference.

The angular claims (the angular scores are not among :data:`VERIFY_GROUPS`) and the claims
that speak only of a trend along an axis are left to studies. A claim whose statistic is
undefined for every run of a group (the logarithm of a pruning drop that is not positive, as
at initialisation) gives a row ``not measured`` that says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulate.claims.definitions import CLAIMS, KNOBS, Claim, Kind, sparser
from simulate.claims.growth import growth_summary, judge_growth
from simulate.claims.judgement import (NO_INTERVAL, Judgement, claimed_sign_verdict, difference_interval,
                                       t_interval)
from simulate.claims.statistics import ModelEvidence, model_statistics
from simulate.engine import CONFIDENCE
from simulate.scores.compute import ScoreOptions
from theory.verdicts import Verdict

__all__ = ["VERIFY_OPTIONS", "VERIFY_GROUPS", "JudgedRun", "RunJudgement", "judged_run", "judge_runs"]

# The scores verify computes for each run, at step 0 and at its end: small and fast.
VERIFY_OPTIONS = ScoreOptions(sequences=16, batch_size=16, pairs=1, jac_sequences=4, probes=2, iterations=5)
VERIFY_GROUPS = ("prune", "usefulness", "jacobian")
_IGNORED_TRAIN_FIELDS = ("seed",)


@dataclass(frozen=True)
class JudgedRun:
    """One run as the claims read it: its Setting, seed, group key, last step and statistics per stage."""

    path: Path
    setting: object
    seed: int
    group: str
    last_step: int
    evidence: dict  # {stage step: ModelEvidence}
    stats: dict  # {stage step: ModelStatistics}

    def stage(self, first: bool) -> int:
        return 0 if first else self.last_step


@dataclass(frozen=True)
class RunJudgement:
    """A judgement of ``verify --trained``: at which step, on which runs (``where``), at which layer."""

    judgement: Judgement
    stage: int
    where: str
    layer: int


def judged_run(path) -> JudgedRun:
    """Read one finished run directory and measure it at step 0 and at its last step (its files read once)."""
    from simulate.scores.training_cache import cached_scores
    from simulate.training import RunDirectory

    run = RunDirectory(path)
    run.require_finished()
    train = {k: v for k, v in run.train_options.items() if k not in _IGNORED_TRAIN_FIELDS}
    group = json.dumps({"setting": run.setting.to_dict(), "train": train}, sort_keys=True)
    profiles, loss = run.var_profiles(), run.loss()
    train_loss = loss[loss["split"] == "train"].sort_values("step")

    def scores(at_init: bool):
        return cached_scores(run.path, at_init=at_init, groups=VERIFY_GROUPS, options=VERIFY_OPTIONS)[0]

    evidence = {0: ModelEvidence(run.setting.depth, {0: profiles[0]}, scores(True)),
                run.last_step: ModelEvidence(run.setting.depth, profiles, scores(False),
                                             train_loss["step"].to_numpy(float), train_loss["loss"].to_numpy(float))}
    return JudgedRun(run.path, run.setting, run.seed, group, run.last_step, evidence,
                     {step: model_statistics(e) for step, e in evidence.items()})


def _describe(runs: list[JudgedRun]) -> str:
    s = runs[0].setting
    words = [f"{s.scheme}/{s.block}", f"d={s.width}", f"L={s.depth}", f"T={s.tokens}"]
    if s.block == "moe":
        words.append(f"top-{s.top_k}/{s.experts}")
    if s.resolved_kv_heads != s.heads:
        words.append(f"G={s.group_size}")
    words.append(f"wd={s.weight_decay:g}")
    return " ".join(words) + f", {len(runs)} seeds"


def _by_seed(runs: list[JudgedRun], first: bool, statistic: str) -> dict[int, float]:
    return {r.seed: r.stats[r.stage(first)].value(statistic) for r in runs}


def _measured(values) -> bool:
    return bool(np.isfinite(list(values)).any())


_UNSCORED = ("angular_deep", "angular_deep_last", "angular_deep_log", "angular_deep_last_log")  # no angular scores


def _not_measured(claim: Claim, n: int) -> Judgement:
    return Judgement(claim, claim.statistic, NO_INTERVAL, Verdict.NOT_MEASURED, n,
                     comment=f"{claim.statistic} is undefined for every run (a logarithm of a value that is not "
                             "positive, or a score that is missing)")


def _claim_words(claim: Claim, estimate, means: str = "") -> str:
    side = "> 0" if claim.sign > 0 else "< 0"
    return f"{claim.statistic} ({claim.describe_sides}) = {estimate.format()}{means}; claim: {side}"


def _group_judgements(runs: list[JudgedRun], first: bool, confidence: float) -> list[tuple[Judgement, int]]:
    """The claims on one scheme judged on one group at one stage: ``(judgement, layer)``."""
    scheme, depth = runs[0].setting.scheme, runs[0].setting.depth
    out = []
    for claim in CLAIMS.values():
        if claim.schemes != (scheme,) or claim.knob is not None:
            continue
        if claim.kind is Kind.GROWTH:
            curves = np.stack([r.evidence[r.stage(first)].last_profile() for r in runs])  # (S, L+1)
            out += [(j, depth) for j in judge_growth(claim, growth_summary(curves, confidence))]
        elif claim.kind is Kind.SIGNED and claim.sign is not None:
            values = _by_seed(runs, first, claim.statistic)
            if not _measured(values.values()):
                out.append((_not_measured(claim, len(values)), depth))
                continue
            estimate = t_interval(list(values.values()), confidence)
            verdict, detectable = claimed_sign_verdict(claim, estimate, 1 - confidence)
            out.append((Judgement(claim, claim.statistic, estimate, verdict, len(values),
                                  comment=_claim_words(claim, estimate), detectable=detectable), depth))
    return out


def _difference(claim: Claim, first_runs, second_runs, first: bool, confidence: float) -> Judgement | None:
    """The claim's statistic, ``first_runs`` minus ``second_runs`` (None for a statistic verify does not score)."""
    if claim.statistic in _UNSCORED:
        return None
    a, b = _by_seed(first_runs, first, claim.statistic), _by_seed(second_runs, first, claim.statistic)
    if not (_measured(a.values()) and _measured(b.values())):
        return _not_measured(claim, len(a) + len(b))
    estimate, n = difference_interval(a, b, confidence)
    means = f" ({np.nanmean(list(a.values())):.4g} against {np.nanmean(list(b.values())):.4g}, {estimate.method})"
    verdict, detectable = claimed_sign_verdict(claim, estimate, 1 - confidence)
    return Judgement(claim, claim.statistic, estimate, verdict, n, comment=_claim_words(claim, estimate, means),
                     detectable=detectable)


def _differing_fields(a: JudgedRun, b: JudgedRun) -> list[str]:
    da, db = a.setting.to_dict(), b.setting.to_dict()
    fields = [k for k in da if da[k] != db[k]]
    ta, tb = (json.loads(r.group)["train"] for r in (a, b))
    fields += [f"train.{k}" for k in ta if ta.get(k) != tb.get(k)]
    if "block" in fields:  # a mixture of experts brings its own fields
        fields = [f for f in fields if f not in ("experts", "top_k")]
    return fields


def _pair_judgements(a: list[JudgedRun], b: list[JudgedRun], first: bool, confidence: float) -> list[Judgement]:
    """The claims comparing group ``a`` with group ``b`` (two schemes, or a knob's sparse side and the
    Pre-LN reference)."""
    fields = _differing_fields(a[0], b[0])
    out = []
    for claim in CLAIMS.values():
        if claim.paired and fields == ["scheme"] and (a[0].setting.scheme, b[0].setting.scheme) == claim.schemes:
            wanted = True
        else:
            wanted = (claim.knob is not None and fields == [claim.knob] and b[0].setting.scheme == "pre"
                      and sparser(claim.knob, a[0].setting, b[0].setting))
        judgement = _difference(claim, a, b, first, confidence) if wanted else None
        if judgement is not None:
            out.append(judgement)
    return out


def judge_runs(paths, progress: bool = False, confidence: float = CONFIDENCE) -> list[RunJudgement]:
    """Every trained claim the given runs can test, at step 0 and after training (module docstring), with
    intervals at ``confidence``."""
    from tqdm.auto import tqdm

    runs = [judged_run(path) for path in tqdm(list(paths), desc="trained runs", unit="run", disable=not progress,
                                              leave=False)]
    groups: dict[str, list[JudgedRun]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    out: list[RunJudgement] = []
    for members in groups.values():
        for first in (True, False):
            where = _describe(members)
            out += [RunJudgement(j, members[0].stage(first), where, layer) for j, layer in
                    _group_judgements(members, first, confidence)]
    for a in groups.values():
        for b in groups.values():
            if a is b:
                continue
            for first in (True, False):
                field = _differing_fields(a[0], b[0])
                versus = (f"{_describe(a)} vs {b[0].setting.scheme}" if field == ["scheme"] else
                          f"{KNOBS.get(field[0], field[0]) if field else ''}: {_describe(a)} vs {_describe(b)}")
                out += [RunJudgement(j, a[0].stage(first), versus, 0 if j.statistic == "val_loss" else
                                     a[0].setting.depth) for j in _pair_judgements(a, b, first, confidence)]
    return out
