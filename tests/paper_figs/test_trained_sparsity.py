"""The trained_sparsity figure promises only the intervals it draws and never zooms onto noise.

One seed (the quick build): no interval over seeds, so no error bars and no promise of them;
each point carries its measurement band instead. Two seeds: the 95 % t intervals the title
promises, as error bars. Near-constant values: the y axis spans the noise band, not the
1e-7 differences between the points, and carries no offset text.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from paper_figs.layout import layout_problems
from paper_figs.trained_sparsity import KNOBS, sparsity_figure
from simulate.engine import Z_CONFIDENCE
from simulate.claims import t_interval


def _means(usefulness: float, causal: float, sem: float = np.nan) -> dict:
    return {"usefulness": usefulness, "usefulness_sem": sem, "causal": causal, "causal_sem": sem}


def _bars(ax) -> list:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_quick_figure_with_one_seed_promises_no_intervals(built):
    _, fig = built("trained_sparsity")
    title = fig.get_suptitle()
    assert "1 seed each" in title and "interval" in title and "t interval" not in title, title
    for ax in fig.axes:
        assert not _bars(ax), (ax.get_title(), "error bars drawn for one seed")
        assert len(ax.collections) == 2, (ax.get_title(), "each point needs its shaded measurement band")


def test_two_seeds_draw_the_t_intervals_the_title_promises():
    rng = np.random.default_rng(0)
    reference = [_means(*rng.normal([0.0, 0.1], 0.01), sem=1e-3) for _ in range(2)]
    sparse = {knob: [_means(*rng.normal([0.0, 0.2], 0.01), sem=1e-3) for _ in range(2)] for knob in KNOBS}
    fig = sparsity_figure(reference, sparse)
    assert "2 seeds each" in fig.get_suptitle() and "95 % t intervals" in fig.get_suptitle(), fig.get_suptitle()
    axes = np.asarray(fig.axes).reshape(2, len(KNOBS))  # (scores, knobs)
    for col, knob in enumerate(KNOBS):
        for row, score in enumerate(("usefulness", "causal")):
            ax = axes[row, col]
            bars = _bars(ax)
            assert len(bars) == 2 and not ax.collections[2:], (knob, score, bars)
            for bar, runs in zip(bars, (reference, sparse[knob])):
                interval = t_interval([v[score] for v in runs])
                mean, low, high = interval.estimate, interval.low, interval.high
                (segment,) = bar.lines[2][0].get_segments()  # (2, 2): the bar's two ends
                np.testing.assert_allclose(sorted(segment[:, 1]), [low, high], rtol=1e-12, err_msg=f"{knob} {score}")
    assert not layout_problems(fig), layout_problems(fig)


@pytest.mark.parametrize("sem, noise", [(1e-5, Z_CONFIDENCE * 1e-5), (np.nan, 1e-3 * 0.05)],
                         ids=["standard error", "relative floor"])
def test_near_constant_values_show_their_noise_not_a_zoom(sem, noise):
    """Points 1e-7 apart with a noise of ``noise``: the axis spans at least the band of each point."""
    reference = [_means(0.05, 0.05, sem)]
    sparse = {knob: [_means(0.05 + 1e-7, 0.05 - 1e-7, sem)] for knob in KNOBS}
    fig = sparsity_figure(reference, sparse)
    fig.canvas.draw()
    for ax in fig.axes:
        low, high = ax.get_ylim()
        assert low <= 0.05 - noise and high >= 0.05 + noise, (ax.get_title(), low, high, noise)
        assert high - low < 10 * noise, ("the band is lost in a far wider axis", low, high, noise)
        assert ax.yaxis.get_offset_text().get_text() == "", ax.yaxis.get_offset_text().get_text()
    assert not layout_problems(fig), layout_problems(fig)
