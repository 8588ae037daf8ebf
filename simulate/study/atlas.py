"""The atlas: the studies whose results ship with the workbench, and where they are.

Two atlases ship. ``results/atlas/`` holds the studies of ``examples/studies/atlas/`` trained
long enough that their verdicts hold still: ten times the tokens of the first atlas, the
learning rate tuned per scheme and cell, every model also trained for half the steps
(docs/studies.md#the-atlas): the depth study, and the width study as its models come in
(docs/studies.md#the-atlas-across-width). ``results/atlas-400-steps/`` is the first atlas, the four
studies of ``examples/studies/*.toml`` (depth and learning rate at 400 steps, width at 1600,
steps up to 6400): a valid record of early training, whose depth verdicts flip with the
training length. ``python -m simulate study SPEC... --out DIR --export RESULTS`` regenerates
either (hours on a CPU, resumable; the results' README gives the measured time). The figures
(``paper_figs.studies``) and notebook ``08_studies`` read only what is shipped: each study's
spec as it ran (``NAME/spec.toml``), its report tables and the points' long tables, never a
run directory.

>>> sorted(atlas_studies(EARLY_ATLAS_SPECS_DIR)), sorted(atlas_studies(ATLAS_SPECS_DIR))
(['depth', 'lr_depth', 'steps', 'width'], ['depth', 'width'])
"""

from __future__ import annotations

from pathlib import Path

from simulate.runtime.versions import ROOT
from simulate.study.plan.spec import Study, load_study

__all__ = ["ATLAS_DIR", "ATLAS_SPECS_DIR", "EARLY_ATLAS_DIR", "EARLY_ATLAS_SPECS_DIR", "atlas_studies",
           "atlas_results", "atlas_models"]

ATLAS_DIR = ROOT / "results" / "atlas"
ATLAS_SPECS_DIR = ROOT / "examples" / "studies" / "atlas"
EARLY_ATLAS_DIR = ROOT / "results" / "atlas-400-steps"
EARLY_ATLAS_SPECS_DIR = ROOT / "examples" / "studies"


def atlas_studies(out: Path = ATLAS_DIR) -> dict[str, Study]:
    """The studies by name: ``out/NAME/spec.toml`` (a results folder), else ``out/NAME.toml`` (a folder of specs)."""
    out = Path(out)
    shipped = sorted(out.glob("*/spec.toml"))
    paths = {path.parent.name: path for path in shipped} or {path.stem: path for path in sorted(out.glob("*.toml"))}
    return {name: load_study(path, default_name=name) for name, path in paths.items()}


def atlas_results(name: str, out: Path = ATLAS_DIR):
    """:func:`simulate.study.judge.tables.read_study` of one atlas study (its points, levels, trends, calibration)."""
    from simulate.study.judge.tables import read_study

    return read_study(out, name)


def atlas_models(name: str, out: Path = ATLAS_DIR):
    """The models of one atlas study with their long tables (:func:`simulate.study.read.models.load_models`,
    without recomputing the statistics, which ``points.parquet`` holds); a tuned study's at its chosen rates."""
    from simulate.study.plan.tuning import resolve_tuning
    from simulate.study.read.models import load_models

    return load_models(resolve_tuning(atlas_studies(out)[name], out), out, statistics=False)
