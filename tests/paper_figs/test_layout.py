"""Every figure is readable as rendered: no text runs into another panel, legends readable and off the data.

The registry figures are built at the quick size (once per session, ``conftest.built``); the
explorer's figure and the notebooks' profile figures are built by the same package functions
the notebooks call. :func:`paper_figs.layout.layout_problems` renders each and compares the
window extents of its texts, legends and axes; the first tests show that it does catch each
kind of problem, on figures made wrong on purpose.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from paper_figs import FIGURES
from paper_figs.layout import layout_problems


def _assert_readable(name: str, fig) -> None:
    problems = layout_problems(fig)
    assert not problems, f"{name}: {len(problems)} layout problems:\n" + "\n".join(problems[:20])


def test_checker_finds_text_running_into_the_next_panel():
    fig, (left, right) = plt.subplots(1, 2, figsize=(4, 2))  # no layout engine: the label hangs over `left`
    right.set_ylabel("a y label far too long for the gap between the two panels", labelpad=0)
    right.yaxis.label.set_fontsize(9)
    right.set_yticks([0, 0.5, 1], ["zero point zero", "zero point five", "one point zero"])
    problems = layout_problems(fig)
    plt.close(fig)
    assert any("overlaps axes 0" in p for p in problems), problems


def test_checker_finds_a_crowded_legend_over_the_data_and_small_text():
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    for k in range(6):
        ax.plot(range(10), [k * 0.1 + 0.01 * i for i in range(10)], label=f"line {k}")
    ax.legend(fontsize=5, loc="center")
    problems = layout_problems(fig)
    plt.close(fig)
    assert any("legend inside the axes with 6 entries" in p for p in problems), problems
    assert any("covers" in p and "data points" in p for p in problems), problems
    assert any("is 5 pt" in p for p in problems), problems


def test_checker_finds_a_legend_wider_than_its_axes_and_text_a_notebook_shrinks():
    fig, ax = plt.subplots(figsize=(3, 2))  # no layout engine: the legend hangs off the figure as drawn
    ax.plot([0, 1], [0, 1], label="a legend entry far longer than the narrow panel it explains, beside it")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    problems = layout_problems(fig)
    assert any("legend is" in p and "wider than its axes" in p for p in problems), problems
    ax.get_legend().remove()
    assert not layout_problems(fig), layout_problems(fig)
    fig.set_size_inches(25, 2)  # 7 pt tick labels in a figure a notebook shows at 10 in of its 25
    problems = layout_problems(fig)
    plt.close(fig)
    assert any("as shown" in p and "(< 7 pt)" in p for p in problems), problems


def test_checker_finds_colliding_tick_labels():
    fig, ax = plt.subplots(figsize=(2, 1.5), layout="constrained")
    ax.set_xticks(range(8), [f"label number {i}" for i in range(8)])
    problems = layout_problems(fig)
    plt.close(fig)
    assert any("x ticks" in p and "overlaps x ticks" in p for p in problems), problems


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_registry_figure_is_readable(name, built):
    _, fig = built(name)
    _assert_readable(name, fig)


def _explorer_cases():
    from theory import Setting
    from paper_figs.explorer import build_setting

    return {"transformer/var": (build_setting("pre", "transformer", 8, 32, 8, 1, 1.0, 2, 1.0, 0.0), "var"),
            "mlp/var_mlp": (build_setting("lns", "mlp", 8, 16, 4, 1, 1.0, 2, 1.0, 0.0), "var_mlp"),
            "attention/attn_entropy": (build_setting("pre", "attention", 8, 16, 4, 2, 1.0, 2, 1.0, 0.0),
                                       "attn_entropy"),
            # a numerical blow-up early in a deep stack: the x axis still spans every block
            "blow-up": (Setting(scheme="none", block="linear", width=16, tokens=4, depth=128, init_std=100.0), "var")}


@pytest.mark.parametrize("case", sorted(_explorer_cases()))
def test_explorer_figure_is_readable_and_shows_the_setting(case):
    import theory
    from paper_figs.explorer import explorer_figure, run_setting

    setting, metric = _explorer_cases()[case]
    table, blowup = run_setting(setting, metric, 4)
    fig = explorer_figure(setting, metric, table, theory.predict(setting), blowup, 4)
    ax = fig.axes[0]
    title = ax.get_title()
    for word in (f"metric={metric}", f"scheme={setting.scheme}", f"block={setting.block}", f"depth={setting.depth}",
                 f"width={setting.width}", "samples=4"):
        assert word in title, (word, title)
    assert ax.get_xlim() == (0.0, float(setting.depth)), ax.get_xlim()
    assert (blowup is not None) == (case == "blow-up"), blowup
    if blowup is not None:
        low, high = ax.get_ylim()
        measured = table[table["metric"] == metric]["mean"]
        assert low >= measured.min() / 10 and high <= measured.max() * 1e4, (low, high, measured.min())
    _assert_readable(case, fig)


def _notebook_figures():
    """The profile figures of notebooks 01 and 05, at a tiny size, as those notebooks lay them out."""
    from paper_figs.profiles import Panel
    from paper_figs.regimes import regime_cases
    from paper_figs.measure import llama_like

    def llama(scheme, **kw):
        return llama_like(16, scheme=scheme, depth=8, tokens=4, heads=4, **kw)

    schemes = ("pre", "lns", "scaled-init", "depth-scaled-init", "sandwich", "deepnorm")
    metrics = ("var", "jac_dev", "angular", "e2e_gain", "token_cos")
    return {
        "01 variance by scheme": dict(panels=[Panel(s, "var", {s: llama(s)}, ylabel="stream variance sigma_l^2")
                                              for s in schemes],
                                      reference=("Pre-LN, measured (for comparison)", llama("pre")), ncols=3,
                                      sharey=True, labels="none", panel_size=(3.0, 2.4), metrics=metrics),
        "01 pre vs lns": dict(panels=[Panel(t, m, {s: llama(s) for s in ("pre", "lns")}, ylabel=label)
                                      for m, t, label in (
                                          ("angular", "angular distance between layers",
                                           "arccos cos(x_{l-1}, x_l) / pi"),
                                          ("jac_dev", "block Jacobian's distance from I", "||J_l - I||_F / sqrt(T d)"),
                                          ("e2e_gain", "end-to-end gain of a probe", "||dx_l/dx_0 v|| / ||v||"))],
                              panel_size=(3.0, 2.6), metrics=metrics),
        "01 token cosine": dict(panels=[Panel(s, "token_cos", {f"input std {v:g}": llama(s, input_std=v)
                                                               for v in (1.0, 0.02)}, log_y=False)
                                        for s in ("pre", "lns")], sharey=True, panel_size=(3.6, 2.6), metrics=metrics),
        "05 regimes": dict(panels=[Panel("linear block", "var", regime_cases(16, 4, 16), ylabel="sigma_l^2")],
                           panel_size=(6.5, 3.6)),
    }


@pytest.mark.parametrize("name", sorted(_notebook_figures()))
def test_notebook_profile_figure_is_readable(name):
    from paper_figs.profiles import profile_figure

    from paper_figs.style import sources

    fig = profile_figure(samples=4, suptitle=f"{name}: a figure title as long as the notebooks give",
                         **_notebook_figures()[name])
    _assert_readable(name, fig)
    for source in sources(fig):  # shared y limits fit every panel's measurement
        if source.law is None:
            low, high = source.artist.axes.get_ylim()
            y = source.artist.get_ydata()
            assert low <= min(y) and max(y) <= high, (name, source.artist.axes.get_title(), low, high, min(y), max(y))


def test_accuracy_map_is_readable_as_a_notebook_shows_it():
    """Issue 39: notebook 04's map was 16 in wide, shown shrunk, its cell text about 5 px high; now stacked."""
    from simulate.accuracy.figure import plot_map
    from theory.accuracy import shipped_map

    table = shipped_map()
    if table is None:
        pytest.skip("no shipped accuracy map")
    fig = plot_map(table)
    try:
        _assert_readable("accuracy map", fig)
    finally:
        plt.close(fig)
