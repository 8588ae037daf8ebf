"""The atlas's figures say what each panel is: titles, one y range for the two variance panels, a phase key.

Built from the shipped results (``results/atlas``) by the registry (``conftest.built``).
"""

from __future__ import annotations

import numpy as np


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
            box = text.get_bbox_patch().get_window_extent(renderer)
            inside = (box.x0 >= cell[0, 0] and box.x1 <= cell[1, 0] and box.y0 >= cell[0, 1] and box.y1 <= cell[1, 1])
            assert inside, (ax.get_title(), text.get_text(), box.bounds, np.round(cell, 1).tolist())
    keys = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any(key.startswith("grey:") and "not polynomial" in key for key in keys), keys
    assert all(ax.get_title().strip() for ax in fig.axes if not ax.get_label() == "<colorbar>"), \
        [ax.get_title() for ax in fig.axes]
