"""The atlas's figures say what each panel is: titles, units (a log ratio as such), one y range for the two variance
panels with their bands, every depth drawn, a phase key.

Built from the shipped results (``results/atlas``) by the registry (``conftest.built``); the depths and cells
expected are read from the same shipped files, never typed in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def test_every_study_depth_panel_has_a_title_and_the_variance_panels_share_y(built):
    _, fig = built("study_depth")
    untitled = [i for i, ax in enumerate(fig.axes) if not ax.get_title().strip()]
    assert not untitled, f"axes {untitled} of study_depth have no title"
    pre, lns = fig.axes[:2]
    assert pre.get_ylim() == lns.get_ylim() and "shared" in lns.get_title(), (pre.get_ylim(), lns.get_ylim())


def test_phase_cell_labels_fit_their_cells_and_grey_has_a_key(built):
    _, fig = built("study_phase")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 2, heatmaps
    for ax in heatmaps:
        assert ax.texts, ax.get_title()
        for text in ax.texts:
            column, row = text.get_position()  # the cell's centre, in data coordinates
            cell = ax.transData.transform([(column - 0.5, row - 0.5), (column + 0.5, row + 0.5)])  # (2, 2) pixels
            patch = text.get_bbox_patch()  # a boxed word, or the bare text of a cell never planned
            box = (patch or text).get_window_extent(renderer)
            inside = (box.x0 >= cell[0, 0] and box.x1 <= cell[1, 0] and box.y0 >= cell[0, 1] and box.y1 <= cell[1, 1])
            assert inside, (ax.get_title(), text.get_text(), box.bounds, np.round(cell, 1).tolist())
    keys = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any(key.startswith("grey:") and "not polynomial" in key for key in keys), keys
    assert all(ax.get_title().strip() for ax in fig.axes if not ax.get_label() == "<colorbar>"), \
        [ax.get_title() for ax in fig.axes]


def _shipped_depths(name: str = "depth", scheme: str | None = None) -> list[int]:
    """The depths of a shipped study's models, finished or pending; with ``scheme``, its finished ones at the
    study's full length alone (what a figure of the full length draws)."""
    from simulate.study.atlas import atlas_results

    points = atlas_results(name).points  # one row per model of the study
    if scheme is not None:
        points = points[(points["scheme"] == scheme) & (points["status"] == "ok")
                        & (points["steps"] == points["steps"].max())]
    return sorted(int(d) for d in points["depth"].unique())


def test_phase_draws_every_depth_of_the_atlas_and_no_unplanned_cell_reads_pending(built):
    """Each scheme's loss panel draws every depth with a finished tuning model (a deeper cell still tuning too)."""
    from simulate.study.atlas import ATLAS_DIR, atlas_results

    _, fig = built("study_phase")
    loss_panels = [ax for ax in fig.axes if not ax.images and ax.get_label() != "<colorbar>"]
    assert len(loss_panels) == 2, [ax.get_title() for ax in fig.axes]
    tuning = pd.read_csv(ATLAS_DIR / "depth" / "tuning.csv")
    for ax in loss_panels:
        scheme = {"Pre-LN": "pre", "LNS": "lns"}[ax.get_title().split(":")[0]]
        tuned = sorted(int(d) for d in tuning[(tuning.scheme == scheme) & (tuning.status == "ok")].depth.unique())
        drawn = sorted(int(bars.get_label().removeprefix("L=")) for bars in ax.containers  # one errorbar per depth
                       if bars.get_label().startswith("L=") and len(bars.lines[0].get_xdata()))
        assert drawn == tuned and set(_shipped_depths()) <= set(drawn), (ax.get_title(), drawn, tuned)
    points = atlas_results("depth").points
    texts = [t.get_text() for ax in fig.axes if ax.images for t in ax.texts]
    if (points["status"] == "ok").all() and (tuning["status"] == "ok").all():  # every planned model finished
        assert "pending" not in texts, texts
    assert "results/atlas" in fig.get_suptitle() and str(ATLAS_DIR.name) in fig.get_suptitle(), fig.get_suptitle()


def test_lns_gain_labels_log_ratios_as_such(built):
    _, fig = built("study_lns_gain")
    panels = {ax.get_title().splitlines()[0]: ax for ax in fig.axes}
    for what in ("deep-half angular distance", "deep-half pruning drop"):
        ax = panels[what]
        assert "log(LNS / Pre-LN)" in ax.get_ylabel() and "log(LNS / Pre-LN)" in ax.get_title(), ax.get_ylabel()
        assert "−" not in ax.get_title() and "minus" not in ax.get_title(), ax.get_title()
    loss = panels["held-out loss"]
    assert "LNS − Pre-LN" in loss.get_title() and "nats/byte" in loss.get_ylabel(), (loss.get_title(),
                                                                                    loss.get_ylabel())
    from simulate.study.atlas import ATLAS_DIR

    levels = pd.read_csv(ATLAS_DIR / "depth" / "levels.csv")
    compared = sorted(float(d) for d in levels[(levels.claim == "p1-lns-loss") & (levels.n > 0)].depth.unique())
    for ax in fig.axes:  # every depth of the atlas with models to compare (the tuning seeds left out) is a point
        x = sorted({float(v) for line in ax.get_lines() for v in line.get_xdata() if line.get_marker() == "o"})
        assert x == compared and len(x) >= 4, (ax.get_title(), x)
    width, _ = fig.get_size_inches()
    assert width > 6, "one row of panels side by side, not a narrow column"


def test_variance_profiles_draw_their_interval_for_every_depth(built):
    """Each scheme's profiles: one line and band per depth with a finished model (a cell still tuning has none)."""
    _, fig = built("study_depth")
    for ax, scheme in zip(fig.axes[:2], ("pre", "lns")):
        lines = [line for line in ax.get_lines() if line.get_label().startswith("L=")]
        assert sorted(int(line.get_label()[2:]) for line in lines) == _shipped_depths(scheme=scheme), ax.get_title()
        assert len(ax.collections) == len(lines), ("one 95 % band per depth", ax.get_title())
    assert "95 % t band" in fig.get_suptitle() and "results/atlas" in fig.get_suptitle(), fig.get_suptitle()


@pytest.mark.parametrize("name", ["study_depth", "study_pruning", "study_phase"])
def test_the_depth_legend_names_every_depth_either_scheme_drew(built, name):
    """One legend for both schemes' panels: a depth only one scheme has trained (a cell still tuning) is named."""
    _, fig = built(name)
    panels = [ax for ax in fig.axes if any(label.startswith("L=") for label in ax.get_legend_handles_labels()[1])]
    assert len(panels) == 2, (name, [ax.get_title() for ax in panels])  # Pre-LN's and LNS's, an artist per depth
    drawn = {label for ax in panels for label in ax.get_legend_handles_labels()[1] if label.startswith("L=")}
    legend = [text.get_text() for text in panels[1].get_legend().get_texts()]
    assert legend == sorted(drawn, key=lambda label: int(label[2:])), (name, legend, sorted(drawn))


@pytest.mark.parametrize("name, only_full", [("study_depth", True), ("study_pruning", True),
                                             ("study_lns_gain", False)])
def test_the_caption_names_the_training_lengths_each_figure_draws(built, name, only_full):
    """The atlas trains every model at 4000 steps and a 2000-step twin: a figure that draws the full length only
    says the twins are not drawn; one that draws both lengths (``study_lns_gain``) names both as such."""
    from simulate.study.atlas import ATLAS_DIR

    _, fig = built(name)
    steps = sorted(int(s) for s in pd.read_csv(ATLAS_DIR / "summary.csv")["steps"].unique())  # (lengths,)
    caption = fig.get_suptitle()
    assert f"{steps[-1]} steps" in caption, caption
    twins = f"the {steps[0]}-step twins not drawn"
    assert (twins in caption) == only_full and (f"and {steps[0]}: stability" in caption) != only_full, caption
