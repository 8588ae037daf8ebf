"""The atlas: the four studies of ``examples/studies/`` and their results shipped in ``results/atlas/``.

``python -m simulate study examples/studies/*.toml --out results/atlas`` regenerates them
(hours on a CPU, resumable; docs/studies.md gives the measured time). The figures
(``paper_figs.studies``) and notebook ``08_studies`` read only what is shipped: each study's
spec as it ran (``NAME/spec.toml``), its report tables and the points' long tables, never a
run directory.

>>> sorted(atlas_studies(ATLAS_SPECS_DIR))
['depth', 'lr_depth', 'steps', 'width']
"""

from __future__ import annotations

from pathlib import Path

from simulate.study.spec import Study, load_study
from simulate.runtime.versions import ROOT

__all__ = ["ATLAS_DIR", "ATLAS_SPECS_DIR", "ATLAS_NAMES", "atlas_studies", "atlas_results", "atlas_models"]

ATLAS_DIR = ROOT / "results" / "atlas"
ATLAS_SPECS_DIR = ROOT / "examples" / "studies"
ATLAS_NAMES = ("depth", "width", "steps", "lr_depth")


def atlas_studies(out: Path = ATLAS_DIR) -> dict[str, Study]:
    """The atlas studies by name: ``out/NAME/spec.toml`` (a results folder), or ``out/NAME.toml`` (the specs)."""
    out = Path(out)
    shipped = {name: out / name / "spec.toml" for name in ATLAS_NAMES}
    return {name: load_study(path if path.is_file() else out / f"{name}.toml", default_name=name)
            for name, path in shipped.items()}


def atlas_results(name: str, out: Path = ATLAS_DIR):
    """:func:`simulate.study.report.read_study` of one atlas study (its points, levels, trends)."""
    from simulate.study.report import read_study

    return read_study(out, name)


def atlas_models(name: str, out: Path = ATLAS_DIR):
    """The models of one atlas study with their long tables (:func:`simulate.study.analysis.load_models`,
    without recomputing the statistics, which ``points.parquet`` holds)."""
    from simulate.study.analysis import load_models

    return load_models(atlas_studies(out)[name], out, statistics=False)
