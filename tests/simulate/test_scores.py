"""Layer-effectiveness scores: exact values on toy stacks, agreement with the trainer's forward, the CLI.

Toy stacks whose answers are known in closed form (an identity block, commuting blocks, a
linear model, a diagonal or token-shift Jacobian) check each definition exactly or within
a stated Monte-Carlo tolerance; the trainer's own ``forward(skip=..., replace=...)`` checks
the adapter; a tiny cached training checks the command line and its bad input.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from simulate.scores import definitions as sd
from simulate.scores.compute import SCORE_GROUPS, ROW_SCORES, ScoreOptions, compute_scores, parse_scores
from simulate.scores.jacobian import jacobian_scores
from simulate.scores.stack import CallableStack

REPO = Path(__file__).resolve().parents[2]
VOCAB, WIDTH, TOKENS, DEPTH = 11, 6, 5, 4


def _toy(branch, depth=DEPTH, seed=0):
    """A residual toy LM: x_l = x_{l-1} + branch(x_{l-1}, params, position); linear head, CE loss."""
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(VOCAB, WIDTH, generator=gen, dtype=torch.float64)
    head = torch.randn(WIDTH, VOCAB, generator=gen, dtype=torch.float64)

    def loss(x, targets):
        return torch.nn.functional.cross_entropy((x @ head).transpose(1, 2), targets, reduction="none").mean(-1)

    return CallableStack(lambda ids: embed[ids], lambda x, p, q: x + branch(x, p, q), loss, depth)


def _batches(n=3, batch=4, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, VOCAB, (batch, TOKENS), generator=gen), torch.randint(0, VOCAB, (batch, TOKENS),
                                                                                      generator=gen))
            for _ in range(n)]


def _tanh_branch(seed=2, zero=()):
    gen = torch.Generator().manual_seed(seed)
    weights = [torch.randn(WIDTH, WIDTH, generator=gen, dtype=torch.float64) / WIDTH**0.5 for _ in range(DEPTH)]
    return lambda x, p, q: torch.zeros_like(x) if p in zero else torch.tanh(x @ weights[p - 1]) / math.sqrt(q)


def _values(rows, score):
    return {r["layer"]: r["value"] for r in rows if r["score"] == score}


def test_ratio_pseudo_values_average_to_the_ratio_of_means():
    num, den = np.array([1.0, 4.0, 2.5]), np.array([2.0, 3.0, 1.0])
    pseudo = sd.ratio_pseudo(num, den)
    assert math.isclose(pseudo.mean(), num.mean() / den.mean(), rel_tol=1e-12), (pseudo.mean(), num.mean() / den.mean())


def test_an_identity_block_scores_zero_everywhere():
    stack, batches = _toy(_tanh_branch(zero=(2,))), _batches()
    base = sd.base_run(stack, batches)
    prune = _values(sd.prune_scores(stack, batches, base, progress=False), "prune")
    useful = _values(sd.usefulness_scores(stack, batches, base, progress=False), "usefulness")
    causal, _ = sd.causal_scores(stack, base, progress=False)
    angular, _ = sd.angular_scores(base)
    assert abs(prune[2]) < 1e-12, f"prune of the identity block = {prune[2]}, target 0"
    assert abs(useful[2] - 1.0) < 1e-9, f"usefulness of the identity block = {useful[2]}, target 1"
    assert abs(_values(causal, "causal")[2]) < 1e-12, "skipping an identity block changes nothing downstream"
    assert abs(_values(angular, "angular_all")[2]) < 1e-6, "an identity block turns no direction"
    assert all(abs(prune[l]) > 1e-6 for l in (1, 3, 4)), f"the other blocks matter: {prune}"


def test_a_linear_model_is_its_own_affine_fit():
    gen = torch.Generator().manual_seed(3)
    mats = [torch.randn(WIDTH, WIDTH, generator=gen, dtype=torch.float64) / WIDTH for _ in range(DEPTH)]
    stack, batches = _toy(lambda x, p, q: x @ mats[p - 1]), _batches()
    rows = sd.usefulness_scores(stack, batches, sd.base_run(stack, batches), progress=False)
    ratios = np.array(list(_values(rows, "usefulness").values()))
    assert np.abs(ratios - 1.0).max() < 1e-8, f"L_lin/L of linear blocks = {ratios}, target 1"
    assert _values(rows, "usefulness_fraction")[0] == 0.0


def test_commuting_blocks_have_zero_permutation_score_and_position_factors_stay():
    gen = torch.Generator().manual_seed(4)
    shifts = [torch.randn(WIDTH, generator=gen, dtype=torch.float64) for _ in range(DEPTH)]
    commuting = _toy(lambda x, p, q: shifts[p - 1].expand_as(x))  # x + b_p: the order cannot matter
    batches = _batches()
    _, pairs = sd.permutation_scores(commuting, batches, sd.base_run(commuting, batches), progress=False)
    assert max(p["value"] for p in pairs) < 1e-12, pairs
    # the same shifts scaled by the *position*: swapping parameters changes the sum
    scaled = _toy(lambda x, p, q: shifts[p - 1].expand_as(x) / q)
    _, pairs = sd.permutation_scores(scaled, batches, sd.base_run(scaled, batches), progress=False)
    assert min(p["value"] for p in pairs) > 1e-6, pairs
    assert len(pairs) == DEPTH * (DEPTH - 1) // 2 and len(sd.select_pairs(DEPTH, 1)) == DEPTH - 1


def test_causal_score_averages_later_blocks_only():
    stack, batches = _toy(_tanh_branch()), _batches()
    rows, pairs = sd.causal_scores(stack, sd.base_run(stack, batches), progress=False)
    for s in range(1, DEPTH):
        row = [p["value"] for p in pairs if p["layer"] == s]
        assert len(row) == DEPTH - s and math.isclose(_values(rows, "causal")[s], np.mean(row), rel_tol=1e-9)
    assert math.isnan(_values(rows, "causal")[DEPTH]), "the last block has no later block"


def test_jacobian_statistics_of_a_diagonal_map_are_exact():
    diag = torch.tensor([0.5, 1.0, 1.5, 2.0, -3.0, 0.25], dtype=torch.float64)
    x = torch.randn(3, TOKENS, WIDTH, dtype=torch.float64)
    rows = jacobian_scores(lambda h, layer: h * diag, [x], depth=1, probes=3, iterations=60)
    got = {r["score"]: r["value"] for r in rows}
    target = {"jac_dev": float(((diag - 1) ** 2).mean().sqrt()), "jac_diag_mean": float(diag.mean()),
              "jac_diag_std": float(diag.repeat(TOKENS).std(unbiased=True)), "jac_offdiag": 0.0, "jac_spectral": 3.0}
    for name, value in target.items():
        assert abs(got[name] - value) < 1e-6, f"{name}: statistic {got[name]:.8g}, target {value:.8g}"


def test_jacobian_off_diagonal_counts_cross_token_terms(mc_close):
    alpha, probes, batch = 0.7, 64, 16
    shift = lambda h, layer: h + alpha * torch.nn.functional.pad(h, (0, 0, 1, 0))[:, :-1]  # noqa: E731  x_t += a x_{t-1}
    x = torch.randn(batch, TOKENS, WIDTH, dtype=torch.float64)
    got = {r["score"]: r for r in jacobian_scores(shift, [x], depth=1, probes=probes, iterations=30)}
    target_sq = alpha**2 * (TOKENS - 1) / TOKENS  # ||J - I||_F^2 / (T d) = ||alpha S||_F^2 / (T d), all off-diagonal
    assert abs(got["jac_dev"]["value"] - math.sqrt(target_sq)) < 1e-12, "(J - I) v = alpha S v exactly"
    for name, target in (("jac_offdiag", math.sqrt(target_sq)), ("jac_diag_mean", 1.0), ("jac_diag_std", 0.0)):
        row = got[name]
        mc_close(name, row["value"], row["sem"], target, z=4, floor=0.02 if name == "jac_diag_std" else 0.0)
    # ||I + alpha S||_2 lies in [1, 1 + alpha] and above the largest column norm sqrt(1 + alpha^2)
    assert math.sqrt(1 + alpha**2) - 1e-6 <= got["jac_spectral"]["value"] <= 1 + alpha + 1e-9


def test_parse_scores_and_its_errors():
    assert parse_scores("all") == SCORE_GROUPS
    assert parse_scores("causal,angular_last,jac_spectral") == ("angular", "causal", "jacobian")
    with pytest.raises(ValueError, match="scores='nope' is not allowed"):
        parse_scores("prune,nope")


def test_compute_scores_writes_every_score_for_every_block():
    stack, batches = _toy(_tanh_branch()), _batches()
    scores, pairs = compute_scores(stack, batches, options=ScoreOptions(probes=2, iterations=3), progress=False)
    for group in SCORE_GROUPS:
        for name in ROW_SCORES[group]:
            layers = sorted(scores[scores.score == name].layer)
            assert layers == ([0] if name == "usefulness_fraction" else list(range(1, DEPTH + 1))), (name, layers)
    assert set(pairs.score) == {"angular_last", "angular_all", "causal", "permutation"}
    assert scores[scores.score == "prune"]["n"].eq(12).all(), "n = held-out sequences"


# -- the trainer's model ---------------------------------------------------------------------------------------
def _lns_model(depth=3):
    from simulate.training.model import CausalLM
    from theory.setting import Setting

    # weights large enough (std 0.5, not 0.02) that every block changes the loss visibly
    setting = Setting.preset("llama", scheme="lns", depth=depth, width=16, heads=2, tokens=8, init_std=0.5)
    return CausalLM(setting, seed=0).requires_grad_(False).eval()


def test_adapter_agrees_with_the_models_own_skip_and_replace():
    from simulate.scores.model import stack_of

    model = _lns_model()
    stack = stack_of(model)
    tokens = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    targets = torch.roll(tokens, -1, 1)
    batches = [(tokens, targets)]
    base = sd.base_run(stack, batches)
    with torch.inference_mode():
        skipped = model(tokens, skip={2}).logits
        own = torch.nn.functional.cross_entropy(skipped.transpose(1, 2), targets, reduction="none").mean(-1)
    prune = _values(sd.prune_scores(stack, batches, base, progress=False), "prune")[2]
    assert abs(prune - float((own.double() - torch.as_tensor(base.losses)).mean())) < 1e-6


def test_swapped_blocks_keep_their_positions_lns_factor():
    from simulate.scores.model import stack_of

    model = _lns_model()
    model.blocks[2].load_state_dict(model.blocks[1].state_dict())  # blocks 2 and 3 share their parameters
    stack = stack_of(model)
    batches = [(torch.randint(0, 256, (2, 8)), torch.randint(0, 256, (2, 8)))]
    _, pairs = sd.permutation_scores(stack, batches, sd.base_run(stack, batches), progress=False)
    value = {(p["layer"], p["other"]): p["value"] for p in pairs}
    assert value[(2, 3)] < 1e-7, f"equal parameters swapped: P = {value[(2, 3)]} (the 1/sqrt(l) stays in place)"
    assert value[(1, 2)] > 1e-3, value
    # had the factor travelled with the parameters, position 2 would run block 3 as it is (weights and
    # 1/sqrt(3)) and position 3 block 2: the stream would differ from the unswapped one
    with torch.inference_mode():
        moved = stack.block(stack.block(stack.block(stack.embed(batches[0][0]), 1, 1), 2, 3), 3, 2)
        assert not torch.allclose(moved, sd.base_run(stack, batches).streams[0][-1], atol=1e-4)
    assert [s.input_scale for s in model.blocks[0].sublayers] == [1.0, 1.0], "factors restored"


# -- the command line ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from simulate.scores.training_cache import cached_training
    from theory.setting import Setting

    setting = Setting.preset("llama", width=16, depth=2, heads=2, tokens=16, input_std=0.02)
    cached = cached_training(setting, steps=3, batch=4, log_every=3)
    run = tmp_path_factory.mktemp("runs") / "pre"
    shutil.copytree(cached, run)
    return run


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "simulate", "scores", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_cli_writes_both_tables(tiny_run, tmp_path):
    import pandas as pd

    out = tmp_path / "scores"
    done = _cli(tiny_run, "--sequences", 4, "--batch-size", 4, "--probes", 2, "--power-iterations", 2, "--out", out,
                "--no-progress")
    assert done.returncode == 0, done.stderr
    scores, pairs = pd.read_csv(out / "scores.csv"), pd.read_csv(out / "pairs.csv")
    assert list(scores.columns) == ["layer", "score", "value", "sem", "n"]
    assert list(pairs.columns) == ["layer", "other", "score", "value"]
    assert set(scores.score) == {n for g in SCORE_GROUPS for n in ROW_SCORES[g]} | {"loss"}
    assert "at step 3" in done.stdout


@pytest.mark.parametrize("case", ["no-dir", "no-checkpoint", "other-shape", "unknown-score"])
def test_cli_bad_input_one_line_exit_2_nothing_written(case, tiny_run, tmp_path, capsys):
    from simulate.scores.cli import main
    from simulate.scores.training_cache import cached_training
    from theory.setting import Setting

    run, extra = tmp_path / "run", []
    if case != "no-dir":
        shutil.copytree(tiny_run, run)
    if case == "no-checkpoint":
        (run / "model.safetensors").unlink()
    if case == "other-shape":
        wider = cached_training(Setting.preset("llama", width=32, depth=2, heads=2, tokens=16, input_std=0.02),
                                steps=1, batch=2, log_every=1)
        shutil.copy(wider / "model.safetensors", run / "model.safetensors")
    if case == "unknown-score":
        extra = ["--scores", "prune,bogus"]
    with pytest.raises(SystemExit) as stop:
        main([str(run), "--out", str(tmp_path / "out"), "--no-progress", *extra])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1, (stop.value.code, lines)
    assert {"no-dir": "no such directory", "no-checkpoint": "no checkpoint", "other-shape": "another shape",
            "unknown-score": "bogus"}[case] in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


# -- Hugging Face interop (optional extra [hf]) ----------------------------------------------------------------
@pytest.mark.parametrize("scheme,kv_heads", [("pre", None), ("lns", 1)])
def test_llama_export_gives_the_same_logits_in_transformers(scheme, kv_heads, tmp_path):
    pytest.importorskip("transformers")
    from simulate.scores.hf import HFStack, export_llama, is_hf_directory, load_hf
    from simulate.scores.model import stack_of
    from simulate.scores.stack import streams
    from simulate.training.model import CausalLM
    from theory.setting import Setting

    setting = Setting.preset("llama", scheme=scheme, depth=3, width=32, heads=4, kv_heads=kv_heads, tokens=16,
                             init_std=0.2)
    model = CausalLM(setting, seed=0).eval()
    with torch.no_grad():  # norm gains away from 1, as after training
        for block in model.blocks:
            for sub in block.sublayers:
                sub.norm_input.weight.mul_(torch.rand(32, generator=torch.Generator().manual_seed(1)) + 0.5)
    export_llama(model, tmp_path)
    assert is_hf_directory(tmp_path)
    hf, tokenizer = load_hf(tmp_path)
    tokens = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours, theirs = model(tokens).logits, hf(tokens).logits
        gap = float((ours - theirs).abs().max())
        stream_gap = max(float((a - b).abs().max()) for a, b in zip(streams(HFStack(hf), tokens),
                                                                    streams(stack_of(model), tokens)))
    assert type(hf).__name__ == "LlamaForCausalLM" and tokenizer is None
    assert gap < 1e-4 * float(ours.abs().max()), f"max |logit gap| {gap:.3g} (logits up to {float(ours.abs().max()):.3g})"
    assert stream_gap < 1e-4, stream_gap


def test_scores_of_a_random_init_hf_config(tmp_path):
    pytest.importorskip("transformers")
    import json

    import pandas as pd

    from simulate.scores.cli import main

    config = {"model_type": "llama", "vocab_size": 256, "hidden_size": 16, "intermediate_size": 32,
              "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
              "max_position_embeddings": 16, "tie_word_embeddings": False}
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    assert main([str(tmp_path / "hf"), "--sequences", "4", "--scores", "prune,angular", "--out",
                 str(tmp_path / "out"), "--no-progress"]) == 0
    scores = pd.read_csv(tmp_path / "out" / "scores.csv")
    assert sorted(scores[scores.score == "prune"].layer) == [1, 2]
