"""Every paper figure builds at the quick size and draws the numbers it says it draws; the CLI works.

Files: a PNG and a PDF per figure, nothing half-written. Content: every line a figure records
(:func:`paper_figs.style.sources`) is checked against the table it came from, the simulator's
(through the same cache) or a fresh :func:`theory.predict`; the heatmaps against the
simulator's own metrics and :func:`simulate.block_jacobian`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import theory
from paper_figs import FIGURES
from paper_figs.__main__ import main
from paper_figs.style import sources
from simulate.compare import run_monte_carlo

REPO = Path(__file__).resolve().parents[2]
# Figures drawn from per-layer profiles or knob sweeps: every one records MC and theory lines.
PROFILE_OR_SWEEP = ("variance_by_scheme", "jac_dev_by_scheme", "token_cosine", "masked_linear", "moe_topk",
                    "gqa_groups", "sequence_length", "regime_map")


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_builds_png_and_pdf(name, built):
    paths, _ = built(name)
    paths = [Path(p) for p in paths]
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"], paths
    for path in paths:
        assert path.is_file() and path.stat().st_size > 0, path
    folder = paths[0].parent
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "temporary files left behind"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_is_not_pyplots(name, built):
    """A figure nobody else can draw or close: pyplot holds none (a notebook's inline backend draws pyplot's)."""
    import matplotlib.pyplot as plt

    _, fig = built(name)
    assert fig.canvas.manager is None and plt.get_fignums() == [], (name, plt.get_fignums())


def _measured_points(source):
    """What the source's numbers should be, from the simulator's table: (x, y)."""
    if len(source.settings) == 1 and source.xs is None:  # a per-layer profile
        table, _ = run_monte_carlo(source.settings[0], **source.mc)
        rows = table[table["metric"] == source.metric].sort_values("layer")
        return rows["layer"].to_numpy(float), rows["mean"].to_numpy(float)
    ys = []
    for setting, layer in zip(source.settings, source.layers):
        table, _ = run_monte_carlo(setting, **source.mc)
        ys.append(float(table[(table["metric"] == source.metric) & (table["layer"] == layer)]["mean"].iloc[0]))
    return np.asarray(source.xs, float), np.asarray(ys)


def _predicted_points(source):
    """What the source's theory line should be, from a fresh theory.predict: (x, y)."""
    def rows_of(setting, law=source.law):
        p = theory.predict(setting)
        return p[(p["law"] == law) & (p["kind"] == source.kind) & (p["metric"] == source.metric)]

    if source.xs is None:
        rows = rows_of(source.settings[0]).sort_values("layer")
        return rows["layer"].to_numpy(float), rows["value"].to_numpy(float)
    laws = source.point_laws or (source.law,) * len(source.settings)  # the id theory.predict gives each point
    ys = [float(rows_of(s, law).query("layer == @layer")["value"].iloc[0])
          for s, layer, law in zip(source.settings, source.layers, laws)]
    return np.asarray(source.xs, float), np.asarray(ys)


@pytest.mark.parametrize("name", PROFILE_OR_SWEEP)
def test_plotted_lines_are_the_tables_they_came_from(name, built):
    _, fig = built(name)
    recorded = sources(fig)
    assert any(s.law is None for s in recorded) and any(s.law is not None for s in recorded), \
        f"{name}: needs Monte-Carlo and theory lines, recorded {[(s.law, s.metric) for s in recorded]}"
    for source in recorded:
        x, y = (np.asarray(v, float) for v in source.artist.get_data())
        want_x, want_y = _measured_points(source) if source.law is None else _predicted_points(source)
        what = f"{name}: {source.law or 'Monte Carlo'} of {source.metric} ({len(want_y)} points)"
        assert len(want_y) >= 2 or source.artist.get_marker() not in ("", " ", "None", None), \
            f"{what}: a single point drawn without a marker is invisible"
        np.testing.assert_allclose(x, want_x, err_msg=what)
        np.testing.assert_allclose(y, want_y, rtol=1e-9, err_msg=what)
        assert np.isfinite(y).all(), what


def test_gqa_theory_lines_start_at_group_size_one(built):
    """Issue 39: theory.predict calls the GQA laws by plain attention's ids at G = 1; the lines still start there."""
    _, fig = built("gqa_groups")
    laws = [s for s in sources(fig) if s.law is not None]
    assert {s.law for s in laws} == {"gqa-init", "p2-gqa"}, {s.law for s in laws}
    for source in laws:
        assert min(source.artist.get_xdata()) == 1 and source.point_laws[0] != source.law, source.point_laws


def test_angular_heatmap_neighbours_are_the_simulators_angular_metric(built):
    """The replayed stacks' d(x_l, x_{l+1}) equals the simulator's own ``angular`` of block l+1 (same seed)."""
    from paper_figs.measure import llama_like, mc_sizes
    from simulate import simulate

    _, fig = built("angular_heatmap")
    size = mc_sizes(True)
    meshes = [ax.collections[0] for ax in fig.axes if ax.collections and ax.get_title()]
    assert len(meshes) == 2, meshes
    for mesh, scheme in zip(meshes, ("pre", "lns")):
        shown = np.ma.filled(mesh.get_array(), np.nan).reshape(size.depth, size.depth + 1)  # (n, l)
        setting = llama_like(size.width, scheme=scheme, tokens=size.tokens, heads=4, depth=size.depth)
        table = simulate(setting, samples=4, seed=0, metrics=("angular",))
        angular = table[table["metric"] == "angular"].sort_values("layer")["mean"].to_numpy(float)  # layers 1..L
        np.testing.assert_allclose(shown[0, :size.depth], angular, rtol=1e-5, err_msg=f"{scheme}: row n = 1")
        assert np.isnan(shown[size.depth - 1, 1]), "d(x_l, x_{l+L}) exists only for l = 0"


def test_block_jacobian_heatmaps_show_j_minus_identity(built):
    import simulate
    from paper_figs.measure import llama_like, mc_sizes

    _, fig = built("block_jacobians")
    size = mc_sizes(True)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 4, images
    for image, (scheme, layer) in zip(images, [(s, l) for s in ("pre", "lns") for l in (1, size.depth)]):
        setting = llama_like(32, scheme=scheme, tokens=size.tokens, heads=4, depth=size.depth)
        jacobian = np.asarray(simulate.block_jacobian(setting, layer, seed=0), dtype=float)
        np.testing.assert_allclose(image.get_array(), jacobian - np.eye(32), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{scheme}, block {layer}")


def test_weight_decay_figure_draws_its_runs():
    from paper_figs.regimes import weight_decay_figure

    fig, runs = weight_decay_figure(((0.1, 1.0, 1.0),), steps=20, groups=4)
    lines = fig.axes[0].get_lines()
    run = runs[0]
    np.testing.assert_allclose(lines[0].get_ydata(), run["table"]["mean"])
    args = dict(steps=20, lr=0.1, weight_decay=1.0, grad_noise_std=1.0, init_var=run["setting"].resolved_init_std**2)
    np.testing.assert_allclose(lines[1].get_ydata(), theory.weight_decay_variance(**args))
    np.testing.assert_allclose(lines[2].get_ydata(), theory.weight_decay_bound(**args))


def test_cli_builds_one_figure(tmp_path, shared_cache):
    env = {**os.environ, "DEPTH_WORKBENCH_CACHE": str(shared_cache), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "paper_figs", "--quick", "--only", "weight_decay", "--out",
                           str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = sorted(p.suffix for p in tmp_path.iterdir())
    assert written == [".pdf", ".png"], written


def test_cli_unknown_figure_exits_2_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--quick", "--only", "no_such_figure", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no_such_figure" in lines[0] and "variance_by_scheme" in lines[0], lines
    assert not (tmp_path / "out").exists()
