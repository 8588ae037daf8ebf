"""The explorer of ``notebooks/03_explorer.ipynb``: pick a setting, run the simulator live, see it beside the theory.

:class:`Explorer` holds the widgets (ipywidgets, imported only when it is built) and draws
on its own when shown, so Run All gives a plot; each press of *run* clears the old plot,
shows a progress bar over the blocks, then the new plot and one line per theory curve,
while the status line names the stage (simulating, theory prediction, drawing) and both
buttons wait. A *seed* box picks the Monte-Carlo draw (same seed, same plot) and *new seed*
steps it by one and runs, so a user sees the spread between draws and can type a seed back.
The metric menu offers only the metrics of the chosen block
(:func:`simulate.engine.metrics.metrics_of_block`), and a control that means nothing for the
chosen block (MoE top-k without a MoE sublayer, the GQA group without attention) is disabled,
a line under the controls and its tooltip saying why (:data:`NEEDS`), and left out of the
setting and the title. :func:`explorer_figure` draws one run; its title lists every field the
explorer sets that the block uses, and the seed (:func:`setting_title`), so a screenshot says
which setting and which draw it shows; every law it prints a verdict for is drawn (a law of one
layer as a marker). Under the profile, a second panel shows the Monte-Carlo mean and its 95 %
band relative to a law (:func:`reference_law`), where a new seed's move and the band's width
are seen at any number of samples; where the top panel leaves the band out (a log axis, its
lower end at or below 0) so does this one. With too few samples to estimate a standard error
(:func:`few_samples_note`) the printed verdicts and the band say so. Nothing here uses pyplot:
the plot is rendered to PNG at twice its dpi inside the callback and shown in an image widget at
its own size (see :class:`Explorer`)."""

from __future__ import annotations

import contextlib
import time

import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from paper_figs.notebook import progress_as_output
from paper_figs.style import (Source, annotate_blowup, figure_png, log_bands, log_limits_from_lines, new_figure,
                              place_legend, plot_mc_band, plot_theory, sources)
from simulate.compare import Z_LIMIT, compare, verdict_sentence
from simulate.engine import CONFIDENCE, Z_CONFIDENCE, metrics_of_block

__all__ = ["EXPLORER_FIELDS", "DEFAULTS", "SEED_MAX", "NEEDS", "METRIC_AXES", "FALSE_ALARM", "applies",
           "setting_title", "build_setting", "law_label", "reference_law", "few_samples_note", "band_coverage",
           "explorer_figure", "run_setting", "Explorer"]

# The Setting fields the explorer's widgets set, in the order its title lists them.
EXPLORER_FIELDS = ("scheme", "block", "depth", "width", "tokens", "heads", "kv_heads", "mask_density", "top_k",
                   "experts", "input_std", "alignment")
DEFAULTS = dict(scheme="pre", block="transformer", depth=32, width=64, tokens=16, group=1, mask_density=1.0,
                top_k=2, input_std=1.0, alignment=0.0, metric="var", samples=16, seed=0)
HEADS = 4
SEED_MAX = 2**31 - 1  # the seed box's largest value; *new seed* wraps past it to 0
# The sublayer (theory.architecture.SUBLAYERS) a control or a Setting field acts on: without it, it does nothing.
NEEDS = {"group": "attention", "heads": "attention", "kv_heads": "attention", "top_k": "moe", "experts": "moe"}
# Per metric: its y label (what is plotted, in words, and the metric's name) and whether it grows multiplicatively
# (a log axis); bounded metrics (an angle, a cosine, an entropy, the kurtosis) on a linear axis.
METRIC_AXES = {"var": ("stream variance sigma_l^2 (var)", True),
               "var_attn": ("variance of block l's attention branch (var_attn)", True),
               "var_mlp": ("variance of block l's MLP / linear / MoE branch (var_mlp)", True),
               "angular": ("angular distance arccos cos(x_{l-1}, x_l) / pi (angular)", False),
               "jac_dev": ("||J_l - I||_F / sqrt(T d) (jac_dev)", True),
               "e2e_gain": ("end-to-end gain ||dx_l/dx_0 v|| / ||v|| (e2e_gain)", True),
               "kurtosis": ("feature kurtosis m4 / m2^2, 3 for a Gaussian (kurtosis)", False),
               "token_cos": ("mean cosine between distinct tokens (token_cos)", False),
               "attn_entropy": ("attention row entropy, nats (attn_entropy)", False)}


# A right law lands past Z_LIMIT sem at a layer by chance this often or less when the standard error is trusted.
FALSE_ALARM = 0.01


def _beyond_limit(samples: int) -> float:
    """The chance that a law that is right lies past :data:`~simulate.compare.Z_LIMIT` sem at one layer, the sem
    estimated from ``samples`` draws (Student's t with ``samples - 1`` degrees of freedom)."""
    from scipy.stats import t

    return float(2 * t.sf(Z_LIMIT, samples - 1))


def band_coverage(samples: int) -> float:
    """How often the band ``mean +- 1.96 sem`` of ``samples`` draws holds the true mean (Student's t with
    ``samples - 1`` degrees of freedom): the table's "95 %" is that only for many samples.

    >>> round(band_coverage(2), 2), round(band_coverage(1000), 3)
    (0.7, 0.95)
    """
    from scipy.stats import t

    return float(1 - 2 * t.sf(Z_CONFIDENCE, samples - 1))


def few_samples_note(samples: int) -> str | None:
    """What a reader must know when ``samples`` draws give too rough a standard error to judge a law by its
    ``|z|``: a right law lands past :data:`~simulate.compare.Z_LIMIT` sem at a layer more often than
    :data:`FALSE_ALARM`. None when the samples are enough.

    >>> print(few_samples_note(2))  # doctest: +NORMALIZE_WHITESPACE
    2 samples are too few to judge a law by its |z|: the standard error is itself estimated from 2 draws
    (1 degree of freedom), so a law that is right lies past 4 sem at a given layer 15.6 % of the time, the "95 %"
    band holds the mean 70 % of the time, and where the draws happen to agree the band narrows and |z| can run
    into the hundreds. The verdicts below are no test at this size; 7 samples or more bring that chance under 1 %.
    >>> few_samples_note(16) is None
    True
    """
    chance = _beyond_limit(samples)
    if chance <= FALSE_ALARM:
        return None
    enough = next(n for n in range(samples + 1, 10 * samples + 100) if _beyond_limit(n) <= FALSE_ALARM)
    freedom = samples - 1
    return (f"{samples} samples are too few to judge a law by its |z|: the standard error is itself estimated from "
            f"{samples} draws ({freedom} degree{'s' * (freedom > 1)} of freedom), so a law that is right lies past "
            f"{Z_LIMIT:g} sem at a given layer {chance:.1%} of the time, the \"{CONFIDENCE:.0%}\" band holds the "
            f"mean {band_coverage(samples):.0%} of the time, and where the draws happen to agree the band narrows "
            f"and |z| can run into the hundreds. The verdicts below are no test at this size; {enough} samples or "
            f"more bring that chance under {FALSE_ALARM:.0%}.").replace("%", " %")


def applies(name: str, block: str) -> bool:
    """Whether a control or Setting field ``name`` acts on a ``block`` (:data:`NEEDS`).

    >>> applies("top_k", "transformer"), applies("top_k", "moe"), applies("group", "mlp"), applies("depth", "mlp")
    (False, True, False, True)
    """
    from theory.architecture import SUBLAYERS

    return name not in NEEDS or NEEDS[name] in SUBLAYERS[block]


def build_setting(scheme, block, depth, width, tokens, group, mask_density, top_k, input_std, alignment):
    """The Setting of the explorer's controls (``group`` = query heads per KV head); SettingError if invalid.

    A control that does not act on ``block`` (:func:`applies`) keeps the Setting's default, so the
    setting, its cache entry and its title do not change with a control that does nothing.
    """
    from theory import Setting

    knobs = {"kv_heads": HEADS // group if applies("group", block) else None}
    if applies("top_k", block):
        knobs["top_k"] = top_k
    return Setting(scheme=scheme, block=block, depth=depth, width=width, heads=HEADS, mask_density=mask_density,
                   tokens=tokens, input_std=input_std, alignment=alignment, **knobs)


def setting_title(setting, metric: str, samples: int, seed: int = 0) -> str:
    """Two lines naming the metric and every explorer field of ``setting`` the block uses, defaults included.

    >>> from theory import Setting
    >>> print(setting_title(Setting(depth=4), "var", 8))
    metric=var  scheme=pre  block=transformer  depth=4  width=256  tokens=64
    heads=4  kv_heads=4  mask_density=1  input_std=1  alignment=0  samples=8  seed=0
    >>> "top_k=2  experts=8" in setting_title(Setting(depth=4, block="moe"), "var", 8)
    True
    """
    def word(name):
        value = setting.resolved_kv_heads if name == "kv_heads" else getattr(setting, name)
        return f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"

    first = [f"metric={metric}"] + [word(n) for n in EXPLORER_FIELDS[:5]]
    second = [word(n) for n in EXPLORER_FIELDS[5:] if applies(n, setting.block)]
    return "  ".join(first) + "\n" + "  ".join(second + [f"samples={samples}", f"seed={seed}"])


def reference_law(prediction, metric: str) -> str | None:
    """The law the lower panel measures against: the first law (by id) with exact values of ``metric``, else the
    first with approximate ones; bounds are no reference. None without either.

    >>> import pandas as pd
    >>> p = pd.DataFrame({"metric": "var", "law": ["b", "a", "c"], "kind": ["exact", "approx", "upper"]})
    >>> reference_law(p, "var"), reference_law(p[p.kind == "upper"], "var")
    ('b', None)
    """
    rows = prediction[prediction["metric"] == metric]
    for wanted in ("exact", "approx"):
        laws = sorted(rows.loc[rows["kind"] == wanted, "law"].unique())
        if laws:
            return laws[0]
    return None


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

    Top: the Monte-Carlo mean and its 95 % band over the theory lines, on a log axis for a metric that
    grows multiplicatively and is positive, else linear (:data:`METRIC_AXES`); a law whose every curve has
    one layer (a one-block stack) is drawn as markers, so every law of the verdicts is in the legend. Below:
    the mean and band in percent of the :func:`reference_law` (without a law, the band's half-width in
    percent of the mean), where a band a few percent wide is seen, left out where the top panel leaves it
    out. The figure is not pyplot's
    (:func:`paper_figs.style.new_figure`). Theory values above the plotted range (a curve past a blow-up, a
    bound that overflows to inf) are left out before drawing (``ceiling`` of
    :func:`paper_figs.style.plot_theory`), so drawing warns about nothing.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(nrows=2, width=6.4, height=2.3, sharex=True, gridspec_kw={"height_ratios": (2.3, 1.0)})
    ax, lower = axes[0][0], axes[1][0]
    line = plot_mc_band(ax, table, metric, label="Monte Carlo")
    if line is not None:
        sources(fig).append(Source(line, metric, (setting,), mc={"samples": samples, "metrics": (metric,),
                                                                  "seed": seed, "live": True}))
    measured = table[table["metric"] == metric]["mean"].to_numpy(float)
    # past a blow-up the theory runs off the top: the limits follow the measurement
    ceiling = 1e250 if blowup is None or not len(measured) else 1e3 * np.abs(measured).max()
    drawn = plot_theory(ax, prediction, metric, ceiling=ceiling)
    alone = sorted(set(prediction.loc[prediction["metric"] == metric, "law"]) - {law for law, _, _ in drawn})
    if alone:  # no curve of two layers: markers, so that the law of a printed verdict is drawn
        drawn += plot_theory(ax, prediction, metric, ceiling=ceiling, laws=alone, points=True)
    colours: dict[str, int] = {}  # one colour and one legend entry per law, exact or approximate in parts
    for law, kind, curve in drawn:
        seen = law in colours
        curve.set_color(f"C{colours.setdefault(law, len(colours)) + 1}")
        curve.set_label("_nolegend_" if seen else law_label(prediction, metric, law))
        sources(fig).append(Source(curve, metric, (setting,), law=law, kind=kind))
    ax.set_xlim(0, setting.depth)
    label, log = METRIC_AXES.get(metric, (metric, False))
    cut = 0
    if log and len(measured) and (measured > 0).all():
        ax.set_yscale("log")
        cut = log_bands(ax)
        log_limits_from_lines(ax, ceiling=ceiling)
    annotate_blowup(ax, blowup)
    ax.set_ylabel(label)
    ax.set_title(setting_title(setting, metric, samples, seed), fontsize=7.5)
    handles, labels = ax.get_legend_handles_labels()
    if cut:  # the band stops where its lower end reaches 0 (log axis): say so
        handles.append(Patch(color="C0", alpha=0.25, linewidth=0))
        labels.append(f"95 % band: left out at {cut} layers\n(its lower end reaches 0)")
    if handles:
        place_legend(ax, handles=handles, labels=labels)
    law = reference_law(prediction, metric)
    colour = next((curve.get_color() for name, _, curve in drawn if name == law), "C0")
    _relative_panel(lower, table[table["metric"] == metric].sort_values("layer"), prediction, metric, law, colour,
                    positive=ax.get_yscale() == "log", samples=samples)
    lower.set_xlabel("layer l (block index; 0 = input)")
    lower.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # whole blocks, also at depth 1
    return fig


def _relative_panel(ax, rows, prediction, metric: str, law: str | None, colour, *, positive: bool,
                    samples: int) -> None:
    """The Monte-Carlo mean and its 95 % band in percent of ``law``'s value at each layer (without a law, the
    band about the mean), with the law at 0.

    ``positive``: the metric is drawn on a log axis above, which leaves the band out where its lower end is at
    or below 0 (:func:`paper_figs.style.log_bands`); here too, rather than draw a negative variance below
    -100 %. A band of one layer is an error bar. With too few ``samples`` the title says what the band holds
    (:func:`few_samples_note`)."""
    layers = rows["layer"].to_numpy(float)
    mean, low, high = (rows[c].to_numpy(float) for c in ("mean", "ci_low", "ci_high"))  # (layers,) each
    band, notes = f"{CONFIDENCE:.0%} band".replace("%", " %"), []
    if few_samples_note(samples):
        notes.append(f"at {samples} samples the band holds the mean {band_coverage(samples):.0%} of the time"
                     .replace("%", " %"))
    if law is None:
        base, title = mean, f"{band}, % of the Monte-Carlo mean (no law to compare with)"
    else:
        curve = prediction[(prediction["metric"] == metric) & (prediction["law"] == law)].groupby("layer")["value"]
        base = curve.first().reindex(layers).to_numpy(float)  # (layers,), every kind of the law
        title = f"Monte Carlo and its {band}, % off {law}"
    with np.errstate(divide="ignore", invalid="ignore"):
        offset = [100.0 * (v / base - 1.0) for v in (mean, low, high)]  # (3, layers)
    keep = np.isfinite(offset[0]) & (layers >= 1)
    banded = keep & (low > 0) if positive else keep
    if (keep & ~banded).any():
        notes.append(f"band left out at {int((keep & ~banded).sum())} layers: its lower end reaches 0, as above")
    title += f"\n({'; '.join(notes)})" if notes else ""
    ax.axhline(0.0, color=colour, lw=1.2)
    if law is not None and keep.any():
        ax.plot(layers[keep], offset[0][keep], marker="o", markersize=2, lw=0.8, color="C0")
    if banded.sum() == 1:  # one layer: a bar, not a polygon of no width
        at = np.flatnonzero(banded)
        ax.errorbar(layers[at], offset[0][at], yerr=[offset[0][at] - offset[1][at], offset[2][at] - offset[0][at]],
                    color="C0", alpha=0.6, lw=4, capsize=0, fmt="none", clip_on=False)  # whole at the axis' end
    elif banded.any():
        ax.fill_between(layers, offset[1], offset[2], where=banded, color="C0", alpha=0.35, lw=0)
    ax.set_ylabel("% off the law" if law is not None else "% of the mean")
    ax.set_title(title, fontsize=7.5)


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
        # why a control is disabled, in the page: a dropdown with a description shows no tooltip (ipywidgets 8)
        self.disabled_note = widgets.HTML()
        self.controls["block"].observe(self._block_changed, names="value")
        self._block_changed({"new": values["block"]})
        self.button = widgets.Button(description="run", button_style="primary", icon="play")
        self.button.on_click(lambda _: self.run())
        self.new_seed_button = widgets.Button(description="new seed", icon="random",
                                              tooltip="seed + 1, then run: another Monte-Carlo draw")
        self.new_seed_button.on_click(lambda _: self.new_seed())
        self.status = widgets.HTML()
        # a flex column stretches its children to its width: the image keeps the size set at each draw
        self.image = widgets.Image(format="png", layout=widgets.Layout(display="none", align_self="flex-start"))
        self.output = widgets.Output()
        names = [name for name in self.controls if name != "seed"]  # the seed sits beside the buttons
        rows = [widgets.HBox([self.controls[n] for n in names[i:i + 3]]) for i in range(0, len(names), 3)]
        actions = widgets.HBox([self.button, self.controls["seed"], self.new_seed_button, self.status])
        self.box = widgets.VBox(rows + [self.disabled_note, actions, self.image, self.output])
        self.figure, self.verdicts = None, []

    def _block_changed(self, change) -> None:
        """Offer only the metrics the new block has (keep the metric when it has it, else 'var'); disable each
        control that does nothing for the block, its tooltip and the line under the controls saying why."""
        from theory.architecture import SUBLAYERS

        block = change["new"]
        menu = self.controls["metric"]
        current = menu.value
        menu.options = metrics_of_block(block)
        menu.value = current if current in menu.options else "var"
        reasons = []
        for name in NEEDS:
            if name in self.controls:
                control, acts = self.controls[name], applies(name, block)
                with_it = ", ".join(b for b, kinds in SUBLAYERS.items() if NEEDS[name] in kinds)
                reason = f"a {block} block has no {NEEDS[name]} sublayer (only {with_it} blocks have one)"
                control.disabled = not acts
                control.tooltip = "" if acts else f"no effect: {reason}"
                reasons += [] if acts else [f"<b>{control.description}</b> is disabled: {reason}"]
        self.disabled_note.value = "<br>".join(reasons)

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
            self.image.value = figure_png(self.figure, scale=2)  # sharp on a high-density screen
            self.image.layout.width = f"{_png_width(self.image.value) // 2}px"  # shown at its own size
            self.image.layout.display = None
        with self.output:
            print("setting: " + setting_title(setting, metric, samples, seed).replace("\n", "  "))
            note = few_samples_note(samples)
            if note:  # before the verdicts it qualifies
                print(note)
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


def _png_width(png: bytes) -> int:
    """A PNG's width in pixels (from its header).

    >>> from paper_figs.style import new_figure
    >>> fig, _ = new_figure(width=2.0, height=1.0)
    >>> _png_width(figure_png(fig)) > 0
    True
    """
    return int.from_bytes(png[16:20], "big")
