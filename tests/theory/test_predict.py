"""predict(): each exact law against a direct iteration of its recursion; bounds; CLI."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from theory.meanfield.gaussian import second_moment
from theory.setting import Setting

import theory.meanfield.prediction as predict_module
from theory.meanfield.plan import moe_gate_square_sum
from theory.symbolic.bounds import iterate_p1_lemma_3_2

predict = predict_module.predict


def _curve(table, metric, law=None, kind=None):
    rows = table[table.metric == metric]
    if law is not None:
        rows = rows[rows.law == law]
    if kind is not None:
        rows = rows[rows.kind == kind]
    return rows.sort_values("layer").value.to_numpy()


def _setting(**kw):
    return Setting(preset=None, **{"width": 64, "depth": 20, **kw})


def _iterate(v0, depth, step):
    out = [v0]
    for layer in range(1, depth + 1):
        out.append(step(out[-1], layer))
    return np.array(out)


@pytest.mark.parametrize("scheme,step", [
    ("pre", lambda v, l: v + 0.8),
    ("lns", lambda v, l: v + 0.8 / l),
    ("scaled-init", lambda v, l: v + 0.8 / 40),
    ("depth-scaled-init", lambda v, l: v + 0.8 / l),
    ("layerscale", lambda v, l: v + 0.8 * 0.01),
    ("none", lambda v, l: v * (1 + 0.8 * 0.5)),
    ("skipinit", lambda v, l: v),
    ("sandwich", lambda v, l: v + 0.5),
    ("post", lambda v, l: 1.0),
])
def test_linear_block_variance_laws(scheme, step):
    setting = _setting(block="linear", scheme=scheme, init_std=math.sqrt(0.8 / 64), mask_density=0.5
                       if scheme in ("none", "sandwich") else 1.0, input_std=1.3)
    table = predict(setting)
    got = _curve(table, "var", kind="exact")
    assert len(got) == setting.depth + 1
    np.testing.assert_allclose(got, _iterate(1.69, setting.depth, step), rtol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "swiglu"])
@pytest.mark.parametrize("scheme", ["pre", "lns"])
def test_mlp_block_variance_laws(activation, scheme):
    setting = _setting(block="mlp", activation=activation, scheme=scheme, ffn_width=96, init_std=0.15)
    alpha, ratio = setting.alpha, 96 / 64

    def step(v, layer):
        g2 = 1 / layer if scheme == "lns" else 1.0
        return v + ratio * alpha * float(second_moment(activation, alpha * g2))

    table = predict(setting)
    np.testing.assert_allclose(_curve(table, "var", kind="exact"), _iterate(1.0, setting.depth, step), rtol=1e-10)
    np.testing.assert_allclose(_curve(table, "var_mlp"), np.diff(_iterate(1.0, setting.depth, step)), rtol=1e-10)


def test_relu_without_norm_is_exact_geometric():
    setting = _setting(block="mlp", activation="relu", scheme="none", ffn_width=128, mask_density=0.7)
    factor = 1 + 0.7 * 2 * setting.alpha**2 / 2
    np.testing.assert_allclose(_curve(predict(setting), "var", kind="exact"),
                               factor ** np.arange(setting.depth + 1), rtol=1e-12)


def test_p2_theorem_1_bound_is_above_exact_law():
    setting = _setting(block="linear", scheme="none", mask_density=0.3)
    table = predict(setting)
    exact, upper = _curve(table, "var", "masked-linear"), _curve(table, "var", "p2-thm-1", "upper")
    np.testing.assert_allclose(exact, 1.3 ** np.arange(21), rtol=1e-12)
    np.testing.assert_allclose(upper, (1 + math.sqrt(0.3)) ** (2 * np.arange(21)), rtol=1e-12)
    assert np.all(upper[1:] > exact[1:])


def test_p1_recursion_rows():
    table = predict(_setting(block="mlp", activation="relu", depth=3))
    np.testing.assert_allclose(_curve(table, "var", "p1-lemma-3.2"),
                               iterate_p1_lemma_3_2(1.0, 1.0, 3), rtol=1e-14)


def test_moe_uniform_gates_factor_and_thm5():
    setting = Setting.preset("llama", block="moe", depth=4, width=64, heads=4, tokens=8, experts=8, top_k=4,
                             uniform_gates=True)
    table = predict(setting)
    moe = _curve(table, "var_mlp", "moe-gates")
    thm5 = _curve(table, "var_mlp", "p2-thm-5")
    np.testing.assert_allclose(moe, thm5, rtol=1e-12)  # uniform gates: P2 Theorem 5 is exact
    dense = predict(setting.replace(block="transformer"))
    np.testing.assert_allclose(moe, _curve(dense, "var_mlp") / 4, rtol=1e-3)


def test_moe_softmax_gate_square_sum_monte_carlo_bounds():
    value = moe_gate_square_sum(8, 2, 1.0)
    assert 0.5 < value < 1.0


def test_gqa_equals_mha_at_init():
    base = Setting.preset("llama", block="attention", depth=3, width=64, heads=8, tokens=16)
    mha = _curve(predict(base), "var_attn", "causal-attention")
    gqa_table = predict(base.replace(kv_heads=2))
    np.testing.assert_allclose(_curve(gqa_table, "var_attn", "gqa-init"), mha)
    assert len(_curve(gqa_table, "var_attn", "p2-gqa")) == 3


def test_single_token_attention_and_no_token_cos():
    setting = Setting.preset("llama", block="attention", depth=3, width=64, heads=4, tokens=1)
    table = predict(setting)
    assert "token_cos" not in set(table.metric)
    np.testing.assert_allclose(_curve(table, "var_attn"), setting.alpha**2, rtol=1e-12)


def test_alignment_bridge():
    setting = _setting(block="linear", alignment=0.3, init_std=0.1)
    b2 = setting.alpha
    expected = _iterate(1.0, setting.depth, lambda v, l: (math.sqrt(v) + 0.3) ** 2 + b2)
    np.testing.assert_allclose(_curve(predict(setting), "var", "bridge-aligned"), expected, rtol=1e-12)


def test_jacobian_and_angular_for_linear_preln():
    setting = _setting(block="linear")
    table = predict(setting)
    var = _curve(table, "var", kind="exact")
    jac = _curve(table, "jac_dev", "jacobian-init")
    np.testing.assert_allclose(jac, np.sqrt(setting.alpha * (63 / 62) / var[:-1]), rtol=1e-12)
    np.testing.assert_allclose(_curve(table, "angular"), np.arccos(np.sqrt(var[:-1] / var[1:])) / np.pi)


def test_weight_decay_exact_and_bound():
    steps, lr, lam, noise, init = 200, 0.05, 0.3, 0.7, 2.0
    exact = predict_module.weight_decay_variance(steps, lr, lam, noise, init)
    direct = [init]
    for _ in range(steps):
        direct.append((1 - lr * lam) ** 2 * direct[-1] + lr**2 * noise**2)
    np.testing.assert_allclose(exact, direct, rtol=1e-12)
    assert np.all(predict_module.weight_decay_bound(steps, lr, lam, noise, init) >= exact)


def test_depth_one_million_shape():
    setting = Setting.preset("llama", scheme="lns", depth=10**6)
    table = predict(setting)
    var = _curve(table, "var", "lns-init")
    assert len(var) == 10**6 + 1 and np.all(np.isfinite(var)) and np.all(np.diff(var) > 0)
    assert set(table.columns) == {"layer", "metric", "law", "kind", "value"}


def _rows_at(whole, chosen, layers):
    """The rows of ``whole`` at ``layers``, checked to name the same curves as ``chosen``."""
    expected = whole[whole.layer.isin(layers)].reset_index(drop=True)
    assert len(chosen) == len(expected) > 0
    for column in ("layer", "metric", "law", "kind"):
        assert chosen[column].astype(str).tolist() == expected[column].astype(str).tolist()
    return expected


@pytest.mark.parametrize("setting, layers", [
    (Setting(scheme="lns", depth=300, width=32, tokens=8), [0, 1, 7, 300]),
    (Setting(scheme="post", block="mlp", depth=20, width=16), [20, 3]),
    # past MAX_MATRIX_STEPS blocks with a stride tail only the blocks read are planned (finite-width law: landings)
    (Setting(scheme="lns", depth=3000, width=32, tokens=8), [0, 1, 7, 64, 65, 66, 1000, 2999, 3000]),
    (Setting(scheme="pre", block="mlp", activation="gelu", depth=2000, width=64, tokens=4), [0, 700, 1999]),
    (Setting(scheme="mix", depth=1000, width=32, tokens=4), [0, 600, 1000])])  # pairs tail: every block planned
def test_layers_are_the_rows_of_the_whole_table(setting, layers):
    """The same numbers to rounding carried along the stack: numpy's vectorised exp and log may round a value one
    ulp apart in arrays of other lengths (a plan of some blocks evaluates its moments and splines at fewer points)."""
    whole = predict(setting)
    chosen = predict(setting, layers=layers)
    expected = _rows_at(whole, chosen, layers)
    np.testing.assert_allclose(chosen.value.to_numpy(), expected.value.to_numpy(), rtol=1e-10, atol=0)


def test_planned_layers_differ_only_by_the_moment_spline():
    """Above 4096 MLP steps the whole plan's static moments are read off many_moments' spline (relative error
    < 5e-9), while a plan of the blocks read evaluates them one by one: the rows agree to that error carried along
    the stack (1e-6 relative), not bit for bit."""
    setting = Setting(preset="llama", scheme="lns", depth=6000, width=32, tokens=4)
    layers = [0, 1, 63, 64, 65, 100, 4321, 5999, 6000]
    whole, chosen = predict(setting), predict(setting, layers=layers)
    expected = _rows_at(whole, chosen, layers)
    np.testing.assert_allclose(chosen.value.to_numpy(), expected.value.to_numpy(), rtol=1e-6, atol=0,
                               err_msg="rows of a plan of the blocks read against the whole plan's, depth 6000")


def test_first_non_finite_rows_cover_layers_left_out():
    """A blow-up between the chosen layers is still found: each curve's first non-finite row over all layers."""
    setting = Setting(scheme="none", block="mlp", activation="relu", depth=300, width=64, tokens=2, init_std=0.5)
    whole = predict(setting)
    table, first_bad = predict_module.predict_with_first_non_finite(setting, layers=[0, 300])
    assert set(table.layer) == {0, 300} and not first_bad.empty
    bad = whole[~np.isfinite(whole.value.to_numpy())]
    expected = bad.groupby(["metric", "law"], observed=True)["layer"].min()
    got = first_bad.set_index(["metric", "law"])["layer"]
    assert {key: int(value) for key, value in got.items()} == {key: int(value) for key, value in expected.items()}


def test_predict_imports_no_sympy():
    """theory predict needs neither sympy, the lemma registry nor scipy (their import is most of a quick run's time,
    docs/design.md#speed-of-the-theory); a deep transformer reads many_moments' spline, the finite-width law's
    attention table the key-norm rule, a SwiGLU MLP the logistic."""
    code = ("import sys, theory; theory.predict(theory.Setting(block='linear', depth=2, width=16)); "
            "theory.predict(theory.Setting(preset='llama', scheme='lns', depth=5000, tokens=4), 'mean-field'); "
            "theory.predict(theory.Setting(width=32, tokens=8, depth=3), 'finite-width'); "
            "print(sorted(name for name in ('sympy', 'theory.symbolic.lemmas', 'scipy') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.stdout.strip() == "[]", result.stdout


def _cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "theory", "predict", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_cli_small_depth(tmp_path):
    result = _cli(["--preset", "llama", "--depth", "5", "--width", "64", "--heads", "4", "--out", "p.csv"], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "layer,metric,law,kind,value" and len(lines) > 30


@pytest.mark.slow  # 9e6 rows: a few seconds as a whole process
def test_cli_writes_csv(tmp_path):
    result = _cli(["--preset", "llama", "--scheme", "lns", "--depth", "1000000", "--out", "p.csv"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.csv").read_text().startswith("layer,metric,law,kind,value")
    assert len(result.stdout.strip().splitlines()) == 1


def test_cli_bad_depth(tmp_path):
    result = _cli(["--depth", "-3", "--out", "p.csv"], tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "depth" in result.stderr
    assert not (tmp_path / "p.csv").exists() and not list(tmp_path.iterdir())


def test_preln_relu_mlp_jacobian_monte_carlo():
    """jac_dev^2 = (d_ff/d) alpha^2 E[relu'^2] (d-1)/((d-2) sigma^2) for a Gaussian stream."""
    rng = np.random.default_rng(5)
    samples, width, ffn, sigma2 = 400, 128, 256, 3.0
    setting = _setting(block="mlp", activation="relu", width=width, ffn_width=ffn, depth=1, input_std=math.sqrt(sigma2))
    predicted = _curve(predict(setting), "jac_dev", "jacobian-init")[0] ** 2
    s = 1 / math.sqrt(width)
    values = []
    for _ in range(samples):
        x, v = rng.standard_normal(width) * math.sqrt(sigma2), rng.standard_normal(width)
        rms = math.sqrt((x**2).mean())
        h = x / rms
        u = (v - h * (h @ v) / width) / rms  # RMSNorm Jacobian applied to v
        w1, w2 = rng.standard_normal((width, ffn)) * s, rng.standard_normal((ffn, width)) * s
        values.append(((((h @ w1) > 0) * (u @ w1)) @ w2) @ ((((h @ w1) > 0) * (u @ w1)) @ w2) / width)
    values = np.array(values)
    assert abs(values.mean() - predicted) < 4 * values.std() / math.sqrt(samples)


@pytest.mark.parametrize("block", ["linear", "mlp", "attention", "transformer", "moe"])
def test_law_ids_and_kinds_agree(block):
    """No law id that says exact labels a curve approximate, in any scheme; every derived law that labels a curve
    approximate says in ``theory list`` which of its curves are exact."""
    from theory.setting import SCHEMES
    from theory.symbolic.lemmas import LEMMAS

    for scheme in SCHEMES:
        table = predict(Setting(scheme=scheme, block=block, depth=4, width=16, heads=2, tokens=4), "mean-field")
        exact_named = table[table["law"].astype(str).str.startswith("exact-")]
        assert (exact_named["kind"] == "exact").all(), exact_named.drop_duplicates(["law", "metric", "kind"])
        approximate = set(table.loc[table["kind"] == "approx", "law"].astype(str))
        for law in approximate:
            assert LEMMAS[law].kind == "paper" or LEMMAS[law].exact_for, (scheme, block, law)
