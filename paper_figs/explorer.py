"""The explorer of ``notebooks/03_explorer.ipynb``: pick a setting, run the simulator live, see it beside the theory.

:class:`Explorer` holds the widgets (ipywidgets, imported only when it is built) and draws
on its own when shown, so Run All gives a plot; each press of *run* clears the old plot,
shows a progress bar over the blocks, then the new plot and one line per theory curve,
while the status line names the stage (simulating, theory prediction, drawing) and both
buttons wait. A *seed* box picks the Monte-Carlo draw (same seed, same plot) and *new seed*
steps it by one and runs, so a user sees the spread between draws and can type a seed back.
The metric menu offers only the metrics of the chosen block
(:func:`simulate.engine.metrics.metrics_of_block`). :func:`explorer_figure` draws one run; its
title lists every field the explorer sets and the seed (:func:`setting_title`), so a screenshot
says which setting and which draw it shows. Nothing here uses pyplot: the plot is rendered to
PNG inside the callback and shown in an image widget (see :class:`Explorer`)."""

from __future__ import annotations

import contextlib
import time

import numpy as np

from paper_figs.notebook import progress_as_output
from paper_figs.style import (Source, annotate_blowup, figure_png, log_limits_from_lines, new_figure, place_legend,
                              plot_mc_band, plot_theory, sources)
from simulate.compare import compare, verdict_sentence
from simulate.engine import metrics_of_block

__all__ = ["EXPLORER_FIELDS", "DEFAULTS", "SEED_MAX", "setting_title", "build_setting", "law_label", "explorer_figure",
           "run_setting", "Explorer"]

# The Setting fields the explorer's widgets set, in the order its title lists them.
EXPLORER_FIELDS = ("scheme", "block", "depth", "width", "tokens", "heads", "kv_heads", "mask_density", "top_k",
                   "experts", "input_std", "alignment")
DEFAULTS = dict(scheme="pre", block="transformer", depth=32, width=64, tokens=16, group=1, mask_density=1.0,
                top_k=2, input_std=1.0, alignment=0.0, metric="var", samples=16, seed=0)
HEADS = 4
SEED_MAX = 2**31 - 1  # the seed box's largest value; *new seed* wraps past it to 0


def build_setting(scheme, block, depth, width, tokens, group, mask_density, top_k, input_std, alignment):
    """The Setting of the explorer's controls (``group`` = query heads per KV head); SettingError if invalid."""
    from theory import Setting

    return Setting(scheme=scheme, block=block, depth=depth, width=width, heads=HEADS, kv_heads=HEADS // group,
                   mask_density=mask_density, top_k=top_k, tokens=tokens, input_std=input_std, alignment=alignment)


def setting_title(setting, metric: str, samples: int, seed: int = 0) -> str:
    """Two lines naming the metric and every explorer field of ``setting``, defaults included.

    >>> from theory import Setting
    >>> print(setting_title(Setting(depth=4), "var", 8))
    metric=var  scheme=pre  block=transformer  depth=4  width=256  tokens=64
    heads=4  kv_heads=4  mask_density=1  top_k=2  experts=8  input_std=1  alignment=0  samples=8  seed=0
    """
    def word(name):
        value = setting.resolved_kv_heads if name == "kv_heads" else getattr(setting, name)
        return f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"

    first = [f"metric={metric}"] + [word(n) for n in EXPLORER_FIELDS[:5]]
    second = [word(n) for n in EXPLORER_FIELDS[5:]] + [f"samples={samples}", f"seed={seed}"]
    return "  ".join(first) + "\n" + "  ".join(second)


def run_setting(setting, metric: str, samples: int, *, seed: int = 0, progress: bool = False):
    """One live simulation (no cache) of ``metric`` with Monte-Carlo ``seed``: ``(table, blow-up layer or None)``."""
    import simulate

    try:
        return simulate.simulate(setting, samples=samples, seed=seed, metrics=(metric,), device="cpu",
                                 progress=progress), None
    except simulate.NumericalBlowUp as stop:
        return stop.table, stop.layer


def law_label(prediction, metric: str, law: str) -> str:
    """The legend entry of one law's curve of ``metric``: its id and its kinds in layer order (a law whose curve
    changes kind along the depth, e.g. Mix-LN's, is one entry: ``exact, then approx``).

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "law": "preln-init", "kind": ["exact", "exact",
    ...                      "approx"], "value": 1.0})
    >>> law_label(rows, "var", "preln-init")
    'preln-init (exact, then approx)'
    """
    rows = prediction[(prediction["metric"] == metric) & (prediction["law"] == law)].sort_values("layer")
    kinds = list(dict.fromkeys(rows["kind"].astype(str)))
    return f"{law} ({', then '.join(kinds)})"


def explorer_figure(setting, metric: str, table, prediction, blowup, samples: int, seed: int = 0):
    """One run drawn over every theory curve of ``metric``: x from 0 to the depth, the whole setting in the title.

    The figure is not pyplot's (:func:`paper_figs.style.new_figure`). Theory values above the
    plotted range (a curve past a blow-up, a bound that overflows to inf) are left out before
    drawing (``ceiling`` of :func:`paper_figs.style.plot_theory`), so drawing warns about nothing.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(width=6.4, height=3.6)
    ax = axes[0][0]
    line = plot_mc_band(ax, table, metric, label="Monte Carlo")
    if line is not None:
        sources(fig).append(Source(line, metric, (setting,), mc={"samples": samples, "metrics": (metric,),
                                                                  "seed": seed, "live": True}))
    measured = table[table["metric"] == metric]["mean"].to_numpy(float)
    # past a blow-up the theory runs off the top: the limits follow the measurement
    ceiling = 1e250 if blowup is None or not len(measured) else 1e3 * np.abs(measured).max()
    colours: dict[str, int] = {}
    for law, kind, drawn in plot_theory(ax, prediction, metric, ceiling=ceiling):
        seen = law in colours
        drawn.set_color(f"C{colours.setdefault(law, len(colours)) + 1}")
        drawn.set_label("_nolegend_" if seen else law_label(prediction, metric, law))
        sources(fig).append(Source(drawn, metric, (setting,), law=law, kind=kind))
    ax.set_xlim(0, setting.depth)
    if len(measured) and (measured > 0).all():
        ax.set_yscale("log")
        log_limits_from_lines(ax, ceiling=ceiling)
    annotate_blowup(ax, blowup)
    ax.set(xlabel="layer l (block index; 0 = input)", ylabel=metric)
    ax.set_title(setting_title(setting, metric, samples, seed), fontsize=7.5)
    if ax.get_legend_handles_labels()[0]:
        place_legend(ax)
    return fig


class Explorer:
    """Widgets for a setting, a metric and a seed, *run* and *new seed* buttons, a status line, the last plot, verdicts.

    A run happens in a widget callback, which ipykernel 7 may handle on a thread of its own
    while something else runs. So the plot is a figure no other code can reach
    (:func:`paper_figs.style.new_figure`, not pyplot's), rendered to PNG inside :meth:`run` and
    shown in an image widget; no callback here touches pyplot or a notebook's display hooks.

    Parameters
    ----------
    **defaults
        Initial values of the controls (keys of :data:`DEFAULTS`); ``seed`` from 0 to :data:`SEED_MAX`.

    Attributes
    ----------
    figure : Figure or None
        The last plot drawn; ``image.value`` holds it as PNG bytes. ``verdicts``: the rows of
        :func:`simulate.compare.compare` of the last run.
    """

    def __init__(self, **defaults):
        import ipywidgets as widgets
        import theory.setting

        values = {**DEFAULTS, **defaults}
        self.controls = dict(
            scheme=widgets.Dropdown(options=theory.setting.SCHEMES, value=values["scheme"], description="scheme"),
            block=widgets.Dropdown(options=theory.setting.BLOCKS, value=values["block"], description="block"),
            depth=widgets.IntSlider(value=values["depth"], min=1, max=512, description="depth L",
                                    continuous_update=False),
            width=widgets.Dropdown(options=[16, 32, 64, 128, 256], value=values["width"], description="width d"),
            tokens=widgets.Dropdown(options=[2, 4, 8, 16, 32, 64], value=values["tokens"], description="tokens T"),
            group=widgets.Dropdown(options=[1, 2, 4], value=values["group"], description="GQA group"),
            mask_density=widgets.FloatSlider(value=values["mask_density"], min=0.05, max=1.0, step=0.05,
                                             description="mask rho", continuous_update=False),
            top_k=widgets.IntSlider(value=values["top_k"], min=1, max=8, description="MoE top-k",
                                    continuous_update=False),
            input_std=widgets.FloatLogSlider(value=values["input_std"], base=10, min=-2, max=1,
                                             description="input std", continuous_update=False),
            alignment=widgets.FloatSlider(value=values["alignment"], min=0.0, max=3.0, step=0.1,
                                          description="alignment a", continuous_update=False),
            metric=widgets.Dropdown(options=metrics_of_block(values["block"]), value=values["metric"],
                                    description="metric"),
            samples=widgets.IntSlider(value=values["samples"], min=2, max=128, description="samples S",
                                      continuous_update=False),
            seed=widgets.BoundedIntText(value=values["seed"], min=0, max=SEED_MAX, description="seed",
                                        style={"description_width": "initial"}, layout=widgets.Layout(width="150px")),
        )
        self.controls["block"].observe(self._block_changed, names="value")
        self.button = widgets.Button(description="run", button_style="primary", icon="play")
        self.button.on_click(lambda _: self.run())
        self.new_seed_button = widgets.Button(description="new seed", icon="random",
                                              tooltip="seed + 1, then run: another Monte-Carlo draw")
        self.new_seed_button.on_click(lambda _: self.new_seed())
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(display="none"))
        self.output = widgets.Output()
        names = [name for name in self.controls if name != "seed"]  # the seed sits beside the buttons
        rows = [widgets.HBox([self.controls[n] for n in names[i:i + 3]]) for i in range(0, len(names), 3)]
        actions = widgets.HBox([self.button, self.controls["seed"], self.new_seed_button, self.status])
        self.box = widgets.VBox(rows + [actions, self.image, self.output])
        self.figure, self.verdicts = None, []

    def _block_changed(self, change) -> None:
        """Offer only the metrics the new block has; keep the metric when it has it, else 'var'."""
        menu = self.controls["metric"]
        current = menu.value
        menu.options = metrics_of_block(change["new"])
        menu.value = current if current in menu.options else "var"

    def values(self) -> dict:
        """The controls' current values."""
        return {name: control.value for name, control in self.controls.items()}

    def run(self):
        """Clear the old plot, simulate with a progress bar, predict, draw, print one line per theory curve.

        Both buttons are disabled meanwhile (a press during a run would queue another) and the
        status line names the stage. Returns the measured table (None for an invalid setting).
        """
        self.button.disabled = self.new_seed_button.disabled = True
        try:
            return self._run()
        finally:
            self.button.disabled = self.new_seed_button.disabled = False

    def new_seed(self):
        """Step the seed by one (past :data:`SEED_MAX`: 0) and :meth:`run`: a reproducible sequence of draws."""
        box = self.controls["seed"]
        box.value = (box.value + 1) % (SEED_MAX + 1)
        return self.run()

    def _run(self):
        import theory

        values = self.values()
        metric, samples, seed = values.pop("metric"), values.pop("samples"), values.pop("seed")
        self.output.clear_output()
        self.image.layout.display = "none"
        self.figure, self.verdicts = None, []
        try:
            setting = build_setting(**values)
        except theory.SettingError as error:
            self.status.value = f"<b>not a valid setting:</b> {error}"
            return None
        started, timings = time.perf_counter(), {}

        @contextlib.contextmanager
        def stage(name: str, words: str):
            self.status.value = words
            begun = time.perf_counter()
            yield
            timings[name] = time.perf_counter() - begun

        with stage("simulation", f"simulating {setting.depth} blocks x {samples} samples of {setting.scheme}/"
                                 f"{setting.block} ... (the bar below counts blocks)"):
            with self.output, progress_as_output():
                table, blowup = run_setting(setting, metric, samples, seed=seed, progress=True)
            self.output.clear_output()  # the bar's last line (leave=False blanks it: a line of spaces)
        with stage("theory", "theory prediction ..."):
            prediction = theory.predict(setting)
        with stage("drawing", "drawing ..."):
            self.figure = explorer_figure(setting, metric, table, prediction, blowup, samples, seed)
            self.image.value = figure_png(self.figure)
            self.image.layout.display = None
        with self.output:
            print("setting: " + setting_title(setting, metric, samples, seed).replace("\n", "  "))
            curves = prediction[prediction["metric"] == metric]
            for law in sorted(curves["law"].unique()):
                rows = compare(law, "", table, curves[curves["law"] == law], blowup)
                self.verdicts += rows
                for row in rows:
                    print(f"{law}: {verdict_sentence(row)}")
            if curves.empty:
                print(f"theory.predict has no curve of {metric} for this setting")
        split = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
        self.status.value = (f"done in {time.perf_counter() - started:.1f} s ({split}); change the settings and "
                             "press <b>run</b> again, or <b>new seed</b> for another draw")
        return table

    def show(self):
        """Display the widgets and draw the current setting once (so Run All shows a plot)."""
        from IPython.display import display

        display(self.box)
        return self.run()
