"""The atlas's figures say what each panel is: titles, units (a log ratio as such), one y range for the two variance
panels with their bands, every depth drawn, a phase key, the models and seeds each draws; each panel's axes show
every depth and drop over its whole range.

Built from the shipped results (``results/atlas``) by the registry (``conftest.built``), the first atlas's
(``results/atlas-400-steps``) by the figure functions notebook 08 calls (:func:`early`); the depths, cells, seeds
and counts expected are read from the same shipped files or docs/studies.md, never typed in.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from theory.verdicts import PointStatus, RateStatus

REPO = Path(__file__).resolve().parents[2]


@cache
def early(name: str):
    """Figure ``name`` (``depth``, ``pruning``, ``lns_gain``, ``phase``) of the first atlas, as notebook 08 draws it."""
    from paper_figs import studies, study_phase
    from simulate.study.atlas import EARLY_ATLAS_DIR

    module = study_phase if name == "phase" else studies
    return getattr(module, f"{name}_figure")(EARLY_ATLAS_DIR)


def _figure(built, name: str, atlas: str):
    """Figure ``study_NAME`` of ``atlas`` (``atlas``: the registry's build; ``atlas-400-steps``: :func:`early`)."""
    return built(f"study_{name}")[1] if atlas == "atlas" else early(name)


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
    assert any(key.startswith("grey:") and "no class" in key for key in keys), keys
    assert all(ax.get_title().strip() for ax in fig.axes if not ax.get_label() == "<colorbar>"), \
        [ax.get_title() for ax in fig.axes]


def _shipped_depths(name: str = "depth", scheme: str | None = None) -> list[int]:
    """The depths of a shipped study's models, finished or pending; with ``scheme``, its finished ones at the
    study's full length alone (what a figure of the full length draws)."""
    from simulate.study.atlas import atlas_results

    points = atlas_results(name).points  # one row per model of the study
    if scheme is not None:
        points = points[(points["scheme"] == scheme) & (points["status"] == PointStatus.OK)
                        & (points["steps"] == points["steps"].max())]
    return sorted(int(d) for d in points["depth"].unique())


def test_phase_draws_every_depth_of_the_atlas_and_no_unplanned_cell_reads_pending(built):
    """Each scheme's loss panel draws every depth with a finished tuning model (a deeper cell still tuning too)."""
    from simulate.study.atlas import ATLAS_DIR, atlas_results

    _, fig = built("study_phase")
    loss_panels = [ax for ax in fig.axes if not ax.images and ax.get_label() != "<colorbar>"]
    assert len(loss_panels) == 2, [ax.get_title() for ax in fig.axes]
    judgement = atlas_results("depth")
    tuning = judgement.tuning
    for ax in loss_panels:
        scheme = {"Pre-LN": "pre", "LNS": "lns"}[ax.get_title().split(":")[0]]
        finished = tuning[(tuning.scheme == scheme) & (tuning.status == RateStatus.OK)]
        tuned = sorted(int(d) for d in finished.depth.unique())
        drawn = sorted(int(bars.get_label().removeprefix("L=")) for bars in ax.containers  # one errorbar per depth
                       if bars.get_label().startswith("L=") and len(bars.lines[0].get_xdata()))
        assert drawn == tuned and set(_shipped_depths()) <= set(drawn), (ax.get_title(), drawn, tuned)
    points = judgement.points
    texts = [t.get_text() for ax in fig.axes if ax.images for t in ax.texts]
    if (points["status"] == PointStatus.OK).all() and (tuning["status"] == RateStatus.OK).all():  # every model done
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
                                             ("study_lns_gain", False), ("study_width", True)])
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


def test_the_width_figure_draws_every_finished_cell_at_its_width_and_counts_its_models(built):
    """Issue 50: loss, log var_L and the pruning ratio against width, a line per depth and scheme; every point is a
    finished cell of the shipped width study at the full length, its mean over that cell's models."""
    from simulate.study.atlas import atlas_results

    _, fig = built("study_width")
    points = atlas_results("width").points  # one row per model of the study
    full = points[points["steps"] == points["steps"].max()]
    ok = full[full["status"] == PointStatus.OK]
    assert f"{len(ok)} of {len(full)} full-length models finished" in fig.get_suptitle(), fig.get_suptitle()
    panels = fig.axes[:3]
    for ax, statistic in zip(panels, ("val_loss", "var_last", "prune_log_ratio")):
        assert ax.get_title() and ax.get_xlabel() == "width d", ax.get_title()
        assert [float(t) for t in ax.get_xticks()] == sorted(float(w) for w in full["width"].unique())
        lines = [line for line in ax.get_lines() if line.get_linestyle() in ("-", "--") and len(line.get_xdata())]
        drawn = {(float(x), round(float(y), 9)) for line in lines for x, y in zip(line.get_xdata(), line.get_ydata())}
        means = ok.groupby(["scheme", "depth", "width"])[statistic].mean()  # (cells,)
        expected = {(float(w), round(float(v), 9)) for (_, _, w), v in means.items() if np.isfinite(v)}
        assert expected <= drawn, (statistic, sorted(expected - drawn))


def _heatmaps(fig) -> list:
    return [ax for ax in fig.axes if ax.images]


@pytest.mark.parametrize("atlas", ["atlas", "atlas-400-steps"])
def test_phase_cells_are_filled_by_what_they_say_and_each_fill_is_keyed(built, atlas):
    """Issue 52: grey filled both "exp" and "n.i." cells under a key "grey: not polynomial"; now a cell with no
    exponent to colour it is filled by what it says, and the key names that fill with the cell's word."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch, Rectangle

    from paper_figs.study_phase import NOT_TRIED

    fig = _figure(built, "phase", atlas)
    keyed = {to_rgba(handle.get_facecolor()): text.get_text() for legend in fig.legends
             for handle, text in zip(legend.legend_handles, legend.get_texts()) if isinstance(handle, Patch)}
    key_word = {"exp": "exponential", "n.i.": "n.i.", "undet.": "undet.", "pending": "pending", "failed": "failed",
                NOT_TRIED: "never planned"}
    fill_of = {}
    for ax in _heatmaps(fig):
        fills = {(round(p.get_x() + 0.5), round(p.get_y() + 0.5)): to_rgba(p.get_facecolor())
                 for p in ax.patches if isinstance(p, Rectangle)}  # a filled cell's patch, by its centre
        for text in ax.texts:
            word, centre = text.get_text(), tuple(round(v) for v in text.get_position())
            if word.startswith("p="):
                assert centre not in fills, (atlas, word)  # coloured by its exponent on the colour bar
                continue
            word = word.split("\n")[0] if word.startswith("exp") else word
            assert centre in fills and key_word[word] in keyed.get(fills[centre], ""), (atlas, word, keyed)
            fill_of[word] = fills[centre]
    assert "exp" not in fill_of or "n.i." not in fill_of or fill_of["exp"] != fill_of["n.i."], fill_of


def _docs_identifiable_blocks() -> tuple[int, int]:
    """From docs/studies.md#growth-across-depth: the fewest blocks at which its synthetic table finds every class
    right in at least 95 % of studies, and the ``IDENTIFIABLE_BLOCKS`` its text states."""
    text = (REPO / "docs" / "studies.md").read_text()
    section = text[text.index("### Growth across depth"):]
    section = section[:section.index("\n### ", 1)]
    rows = re.findall(r"^\| (\d+) ((?:\| [\d.]+ )+)\|$", section, re.M)  # | blocks | share | share | ...
    right = [int(blocks) for blocks, shares in rows if min(float(v) for v in shares.strip("| ").split(" | ")) >= 0.95]
    stated = re.search(r"`IDENTIFIABLE_BLOCKS = (\d+)`", section)
    assert rows and right and stated, section[:400]
    return min(right), int(stated.group(1))


@pytest.mark.parametrize("atlas", ["atlas", "atlas-400-steps"])
def test_a_growth_class_is_shown_only_where_the_docs_table_finds_it_right(built, atlas):
    """Issue 52: notebook 08 said "from 64 blocks", docs/studies.md 64, the code 32, and the phase figure showed
    classes at L = 32, where the docs' own table finds them right 56-82 % of the time. One number: the code's,
    the one the docs state, the first the table finds right; and the figure shows no class below it."""
    from paper_figs.study_phase import NOT_TRIED
    from simulate.claims.along_axes import IDENTIFIABLE_BLOCKS

    right_from, stated = _docs_identifiable_blocks()
    assert IDENTIFIABLE_BLOCKS == stated == right_from, (IDENTIFIABLE_BLOCKS, stated, right_from)
    fig = _figure(built, "phase", atlas)
    for ax in _heatmaps(fig):
        depths = [int(label.get_text()) for label in ax.get_yticklabels()]  # row i is depths[i]
        shown = [(depths[round(t.get_position()[1])], t.get_text()) for t in ax.texts]
        below = [(depth, word) for depth, word in shown if depth < right_from
                 and word not in ("n.i.", "pending", "failed", NOT_TRIED)]
        assert not below, (atlas, ax.get_title(), below)
    keys = " ".join(t.get_text() for legend in fig.legends for t in legend.get_texts())
    if "n.i." in {t.get_text() for ax in _heatmaps(fig) for t in ax.texts}:
        assert f"fewer than {right_from} blocks" in keys, keys


def test_the_phase_caption_names_the_models_it_draws(built):
    """Issue 52: "3 seeds, lr tuned per scheme and cell" stood over a diagram drawn from the tuning seed at every
    rate tried; the caption names the tuning seeds, and no seed count or tuning of the study's own models."""
    from simulate.study.atlas import ATLAS_DIR, atlas_studies

    _, fig = built("study_phase")
    caption = fig.get_suptitle()
    seeds = atlas_studies(ATLAS_DIR)["depth"].tune_seeds
    assert f"tuning models: seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}," in caption, caption
    assert not re.search(r"\d+ seeds", caption) and "tuned per scheme" not in caption, caption
    assert ("one model per cell" in caption) == (len(seeds) == 1), caption


@pytest.mark.parametrize("atlas", ["atlas", "atlas-400-steps"])
def test_every_depth_profile_spans_the_variance_panels(built, atlas):
    """Issue 52: against the layer index, L = 2..8 took the left tenth of an axis 64 blocks wide; against the
    relative depth every profile spans the panel."""
    fig = _figure(built, "depth", atlas)
    for ax in fig.axes[:2]:
        low, high = ax.get_xlim()
        for line in ax.get_lines():
            if line.get_label().startswith("L="):
                x = np.asarray(line.get_xdata(), float)  # (L+1,)
                assert np.ptp(x) >= 0.9 * (high - low), (atlas, ax.get_title(), line.get_label(), np.ptp(x))


@pytest.mark.parametrize("atlas", ["atlas", "atlas-400-steps"])
def test_the_pruning_axis_fits_its_drops(built, atlas):
    """Issue 52: a symmetric log axis left about 40 % of each panel to an empty range below 0 while the first
    block's deletion cost sat on the top edge. Now the lowest drop is near the bottom and the highest clear of the
    top (in axes fractions: the marker's own size is about 1 % of the panel)."""
    fig = _figure(built, "pruning", atlas)
    for ax in fig.axes[:2]:
        drops = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.get_lines()
                                if line.get_label().startswith("L=")])  # every drop drawn
        to_axes = ax.transScale + ax.transLimits  # data -> axes fraction
        height = to_axes.transform(np.column_stack([np.zeros_like(drops), drops]))[:, 1]
        assert 0.0 <= height.min() <= 0.06 and height.max() <= 0.97, (atlas, ax.get_title(), height.min(),
                                                                       height.max(), ax.get_ylim())


def test_a_point_on_one_model_is_hollow_and_says_so():
    """Issue 52: the first atlas's L = 64 pruning point rests on one model (the others' log drop is undefined)
    and was drawn as any other, with no interval and no note."""
    from simulate.study.atlas import EARLY_ATLAS_DIR

    fig = early("lns_gain")
    alone = []  # (study, claim, x, mean) of every level on fewer than two models, from the shipped levels
    for study in ("depth", "width", "steps"):
        levels = pd.read_csv(EARLY_ATLAS_DIR / study / "levels.csv")
        rows = levels[(levels.scheme == "lns-pre") & (levels.n < 2) & levels.claim.isin(
            ["p1-lns-loss", "p1-lns-angular", "p1-lns-prune"])]
        alone += [(study, r.claim, float(getattr(r, study)), float(r.mean)) for r in rows.itertuples()]
    assert alone, "the first atlas has a level on one model (its L = 64 pruning drop)"
    for _, _, x, mean in alone:
        hollow = [line for ax in fig.axes for line in ax.get_lines()
                  if line.get_markerfacecolor() == "white" and np.allclose(line.get_xydata(), [[x, mean]])]
        noted = [text for ax in fig.axes for text in ax.texts
                 if text.get_text() == "n=1" and np.allclose(text.xy, (x, mean))]
        assert hollow and noted, (x, mean)
    keys = " ".join(t.get_text() for legend in fig.legends for t in legend.get_texts())
    assert "hollow, n=1: one model" in keys and "no interval" in keys, keys


def test_the_gain_caption_names_the_seeds_its_levels_rest_on(built):
    """The tuned study's levels leave the tuning seed out (its models chose the rates): the caption said
    "3 seeds" over points of 2 seed pairs."""
    from simulate.study.atlas import ATLAS_DIR

    _, fig = built("study_lns_gain")
    levels = pd.read_csv(ATLAS_DIR / "depth" / "levels.csv")
    pairs = int(levels[levels.scheme == "lns-pre"].n.max())
    line = next(line for line in fig.get_suptitle().splitlines() if "study depth" in line)
    assert re.search(r"(\d+) seeds", line).group(1) == str(pairs) and "the tuned line" in line, line
