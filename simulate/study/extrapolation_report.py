"""``DIR/extrapolation.md`` and ``DIR/extrapolation.csv``: the bridge laws of a set of studies, tested and extrapolated.

With a study whose axes include ``depth`` (the atlas's ``depth``), the laws of
:mod:`simulate.study.extrapolation` are fitted per scheme on every model of the given
studies trained with that study's recipe (the same Setting and options but for depth, width
and its linked fields, and training length), except the deepest depth, which is predicted
without being used (the extrapolation test, on the depth study's own models of that depth;
while the study is unfinished, the deepest depth with two finished models of each scheme).
Then the laws are run at the papers' sizes
(:data:`simulate.study.extrapolation.PAPER_SIZES`), labelled as extrapolations.
``extrapolation.csv`` has one row per scheme and quantity (columns ``scheme, kind, name,
value, low, high, detail``; kinds ``alpha``, ``beta``, ``gamma`` for the coefficients,
``test`` for the held-out models' errors, ``fit`` for the same on the fitted models of the
deepest fitted depth, ``paper`` for the extrapolations).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from simulate.study.analysis import distinct_models
from simulate.study.extrapolation import LawError, bridge_samples, extrapolation_test, paper_predictions
from theory.cli import atomic_write, markdown_table

__all__ = ["recipe_models", "write_extrapolation"]

_FREE_SETTING = ("depth", "width", "heads", "ffn_width")
_FREE_OPTIONS = ("steps", "log_every", "warmup")


def _recipe(model) -> tuple:
    setting = {k: v for k, v in model.point.setting.to_dict().items() if k not in _FREE_SETTING + ("scheme",)}
    options = {k: v for k, v in model.point.options.items() if k not in _FREE_OPTIONS}
    return repr(sorted(setting.items())), repr(sorted(options.items()))


def recipe_models(studies, out) -> tuple[object, list]:
    """(the depth study, the distinct models of ``studies`` trained with its recipe); (None, []) without one."""
    depth_study = next((s for s in studies if "depth" in s.axes), None)
    if depth_study is None:
        return None, []
    models = distinct_models(studies, out)
    reference = {_recipe(m) for m in models.values() if m.point.key in {p.key for p in depth_study.sweep.points}}
    return depth_study, [m for m in models.values() if _recipe(m) in reference]


def _held_out_depth(depth_study, models, keys: set) -> tuple[int, int]:
    """(the depth the test predicts, the deepest depth of the study, whose points have ``keys``): the deepest
    depth at which every scheme has two finished models (an interval needs two), the deepest planned before any."""
    planned = max(p.setting.depth for p in depth_study.sweep.points)
    schemes = {p.setting.scheme for p in depth_study.sweep.points}
    finished = Counter((m.point.setting.depth, m.point.setting.scheme) for m in models
                       if m.status == "ok" and m.point.key in keys)
    tested = [depth for depth in sorted({d for d, _ in finished}, reverse=True)
              if all(finished[depth, scheme] >= 2 for scheme in schemes)]
    return (tested[0] if tested else planned), planned


def _interval(estimate) -> str:
    mean, low, high = estimate
    return f"{mean:.3g} [{low:.3g}, {high:.3g}]" if math.isfinite(low) else f"{mean:.3g}"


def write_extrapolation(studies, out) -> Path | None:
    """Fit, test and extrapolate the bridge laws (module docstring); the Markdown's path (None: no depth study)."""
    depth_study, models = recipe_models(studies, out)
    if depth_study is None:
        return None
    depth_keys = {p.key for p in depth_study.sweep.points}
    held_out, planned = _held_out_depth(depth_study, models, depth_keys)
    # fitted: every recipe model shallower than the held-out depth; tested: the depth study's own models at
    # that depth (a width or steps model of the same depth lies outside the fitted range of d or steps)
    samples = bridge_samples([m for m in models if m.point.setting.depth < held_out
                              or (m.point.setting.depth == held_out and m.point.key in depth_keys)])
    fitted = samples[samples["depth"] < held_out].groupby(["scheme", "depth", "width", "steps", "seed"]).ngroups \
        if len(samples) else 0
    lines = ["# Theory meets training: bridge laws, their extrapolation test, the papers' sizes", "",
             f"Laws fitted on {fitted} trained models of {', '.join(s.name for s in studies)} (the recipe of study "
             f"`{depth_study.name}`) without depth L={held_out}, which is predicted"
             + ("" if held_out == planned else f" (the deepest depth with two finished models of each scheme: "
                f"L={planned} is not trained yet)") + ". Definitions: docs/studies.md#extrapolation.", ""]
    rows = []
    for scheme in sorted(samples["scheme"].unique()) if len(samples) else []:
        try:
            result = extrapolation_test(samples[samples["scheme"] == scheme], held_out)
        except LawError as error:
            lines += [f"## {scheme}", "", f"No law: {error} (the shallower models are not trained yet?).", ""]
            continue
        law, errors = result["law"], result["errors"]
        rows += [{"scheme": scheme, "kind": kind, "name": term, "value": float(value)}
                 for kind, terms, values in (("alpha", law.terms, law.alpha), ("beta", law.terms, law.beta),
                                             ("gamma", law.first_terms, law.gamma))
                 for term, value in zip(terms, values)]
        lines += [f"## {scheme}", "", "Law (least squares over blocks l >= 2): a/sigma = "
                  + " + ".join(f"{v:.3g} {t}" for t, v in zip(law.terms, law.alpha)) + "; log(b/sigma) = "
                  + " + ".join(f"{v:.3g} {t}" for t, v in zip(law.terms, law.beta)) + "; log var_1 = "
                  + " + ".join(f"{v:.3g} {t}" for t, v in zip(law.first_terms, law.gamma)) + ".", ""]
        fit_errors = result["fit_errors"]
        for kind, table, depth, label in (
                ("test", errors, held_out, f"Extrapolation test, L={held_out} ({len(errors)} models, never used in "
                                           "the fit)"),
                ("fit", fit_errors, result["fit_depth"], f"The law on its own data, L={result['fit_depth']} "
                                                         f"({len(fit_errors)} fitted models, each at its width and "
                                                         "steps)")):
            if not len(table):
                continue
            intervals = result[kind]
            rows += [{"scheme": scheme, "kind": kind, "name": name, "value": estimate[0], "low": estimate[1],
                      "high": estimate[2], "detail": f"L={depth}, {len(table)} models"}
                     for name, estimate in intervals.items()]
            lines += [f"{label}: log(predicted var_L / measured) = {_interval(intervals['last_log_error'])}; mean "
                      f"over layers of |log ratio| = {_interval(intervals['mean_abs_log_error'])} (95 % t intervals "
                      "over models).", "", markdown_table(table), ""]
        papers = paper_predictions(law)
        rows += [{"scheme": scheme, "kind": "paper", "name": r.model, "value": r.exponent if r.growth_class
                  == "polynomial" else r.rate, "detail": r.description} for r in papers.itertuples()]
        lines += ["**Extrapolation** far outside the fitted range (d <= 128, L <= 64, steps <= 6400, T = 64), "
                  "at the papers' sizes:", "",
                  markdown_table(papers[["model", "width", "depth", "steps", "var_1", "var_L", "growth_class",
                                         "description"]]), ""]
    table = pd.DataFrame(rows, columns=["scheme", "kind", "name", "value", "low", "high", "detail"])
    out = Path(out)
    atomic_write(out / "extrapolation.csv", lambda temp: table.to_csv(temp, index=False))
    return atomic_write(out / "extrapolation.md", lambda temp: Path(temp).write_text("\n".join(lines) + "\n"))
