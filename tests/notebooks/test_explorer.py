"""The explorer of notebook 03: it offers only the metrics a block has, and every offered pair plots.

Built without a notebook front end (ipywidgets works without one); ``run`` is what the
*run* button and Run All call.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from simulate.metrics import metrics_of_block
from theory.setting import BLOCKS

TINY = dict(depth=3, width=16, tokens=4, samples=2)


@pytest.fixture
def explorer():
    pytest.importorskip("ipywidgets")
    from paper_figs.explorer import Explorer

    made = Explorer(**TINY)
    yield made
    if made.figure is not None:
        plt.close(made.figure)


def test_metric_menu_follows_the_block(explorer):
    menu = explorer.controls["metric"]
    menu.value = "var_attn"
    for block in BLOCKS:
        explorer.controls["block"].value = block
        assert tuple(menu.options) == metrics_of_block(block), block
        assert menu.value in menu.options
    explorer.controls["block"].value = "mlp"
    assert menu.value == "var", "a metric the block lacks falls back to var"


@pytest.mark.parametrize("block", BLOCKS)
def test_every_offered_metric_plots(explorer, block):
    """The pairs that crashed (mlp/var_attn, ...) are no longer offered; every offered one draws finite lines."""
    explorer.controls["block"].value = block
    for metric in explorer.controls["metric"].options:
        explorer.controls["metric"].value = metric
        table = explorer.run()
        assert table is not None and len(table) and set(table.metric) == {metric}, (block, metric)
        line = explorer.figure.axes[0].get_lines()[0]
        assert np.isfinite(np.asarray(line.get_ydata(), float)).all(), (block, metric)
        for drawn in explorer.figure.axes[0].get_lines():  # nothing in the legend that draws nothing
            if not drawn.get_label().startswith("_"):
                assert len(drawn.get_xdata()) >= 2 or drawn.get_marker() not in ("", "None"), drawn.get_label()
        title = explorer.figure.axes[0].get_title()
        assert f"metric={metric}" in title and f"block={block}" in title and "scheme=pre" in title, title
        plt.close(explorer.figure)


def test_run_reports_what_was_compared(explorer):
    explorer.run()
    assert explorer.verdicts, "a transformer's var has theory curves"
    assert {row["id"] for row in explorer.verdicts} >= {"exact-preln-init", "p1-lemma-3.2"}
    assert "done in" in explorer.status.value


def test_invalid_setting_is_one_line_not_a_traceback(explorer, monkeypatch):
    import paper_figs.explorer
    from theory import SettingError

    def refuse(**values):
        raise SettingError("width", values["width"], "a multiple of heads")

    monkeypatch.setattr(paper_figs.explorer, "build_setting", refuse)
    assert explorer.run() is None and explorer.figure is None
    assert explorer.status.value.startswith("<b>not a valid setting:</b>") and "width" in explorer.status.value
    assert "\n" not in explorer.status.value
