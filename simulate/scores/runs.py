"""A training run's directory as a model to score: checks, loading, the held-out text, :func:`score_run`.

A run directory (``python -m simulate train --out DIR``) holds ``config.json`` (the
Setting under ``setting``, the training options under ``train``) and
``model.safetensors``. :func:`load_run_model` rebuilds the :class:`CausalLM` of the
Setting with the run's seed (that is exactly the model at step 0) and, unless
``at_init``, loads the checkpoint into it, checking every tensor's name and shape first.
Anything unusable raises :class:`RunError` whose message is one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path


from simulate.scores.compute import ScoreOptions, compute_scores, held_out_batches, SCORE_GROUPS
from simulate.scores.model import stack_of

__all__ = ["RunError", "read_run_config", "load_run_model", "score_run"]


class RunError(ValueError):
    """A run directory or its checkpoint cannot be scored (one-line message naming it)."""


def read_run_config(run_dir) -> tuple[dict, object]:
    """``(config dict, Setting)`` of a run directory, or :class:`RunError`."""
    from theory.setting import Setting, SettingError

    run = Path(run_dir)
    if not run.is_dir():
        raise RunError(f"run directory {str(run)!r} is not allowed: no such directory")
    path = run / "config.json"
    if not path.is_file():
        raise RunError(f"run directory {str(run)!r} is not allowed: no config.json (not a training run)")
    try:
        config = json.loads(path.read_text())
        setting = Setting.from_dict(config["setting"])
    except (json.JSONDecodeError, KeyError, TypeError, SettingError) as error:
        raise RunError(f"{path} is not allowed: not the config.json of a training run ({error})") from None
    return config, setting


def _check_tensors(path: Path, tensors: dict, model) -> None:
    expected = model.state_dict()
    for name, tensor in expected.items():
        if name not in tensors:
            raise RunError(f"checkpoint {path} is not allowed: it has no tensor {name!r} that the Setting of "
                           f"config.json needs (a checkpoint of another architecture)")
        if tuple(tensors[name].shape) != tuple(tensor.shape):
            raise RunError(f"checkpoint {path} is not allowed: {name} has shape {tuple(tensors[name].shape)}, the "
                           f"Setting of config.json gives {tuple(tensor.shape)} (a checkpoint of another shape)")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise RunError(f"checkpoint {path} is not allowed: tensor {extra[0]!r} is not part of the Setting's model "
                       f"(a checkpoint of another architecture)")


def load_run_model(run_dir, at_init: bool = False, device="cpu"):
    """``(model, setting, config, step)``: the run's model (frozen, eval mode) at its last or its first step."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from simulate.training.checkpoint import MODEL
    from simulate.training.model import CausalLM

    config, setting = read_run_config(run_dir)
    train = config.get("train", {})
    model = CausalLM(setting, seed=int(train.get("seed", 0)), moe_lns_top_k=bool(train.get("moe_lns_top_k", False)))
    step = 0
    if not at_init:
        path = Path(run_dir) / MODEL
        if not path.is_file():
            raise RunError(f"run directory {str(run_dir)!r} is not allowed: no checkpoint {MODEL} (train it to the "
                           "end, or score the model at step 0 with --at-init)")
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as error:
            raise RunError(f"checkpoint {path} is not allowed: not a safetensors file ({error})") from None
        _check_tensors(path, tensors, model)
        model.load_state_dict(tensors)
        step = int(config.get("step", train.get("steps", 0)))
    model.requires_grad_(False)
    return model.eval().to(device), setting, config, step


def score_run(run_dir, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(), *, at_init: bool = False,
              data: str | None = None, device="cpu", progress=None):
    """Scores of a run's model (:func:`simulate.scores.compute.compute_scores`) on its held-out text.

    Returns
    -------
    (DataFrame, DataFrame, dict)
        scores.csv's and pairs.csv's tables and a summary (step, data, seconds per group).
    """
    from simulate.training.data import DataError, load_corpus

    model, setting, config, step = load_run_model(run_dir, at_init, device)
    spec = data or config.get("train", {}).get("data", "docs")
    try:
        corpus = load_corpus(spec, setting.tokens)
    except DataError as error:
        raise RunError(str(error)) from None
    needed = setting.tokens + 1
    if len(corpus.held_out) < needed:
        raise RunError(f"data={spec!r} is not allowed: its held-out part is shorter than one window of {needed} bytes")
    batches = held_out_batches(corpus.held_out, options.sequences, setting.tokens, options.batch_size, device)
    timings: dict = {}
    scores, pairs = compute_scores(stack_of(model), batches, groups, options, progress, timings)
    summary = {"run": str(run_dir), "step": step, "at_init": at_init, "data": spec, "groups": list(groups),
               "options": {k: getattr(options, k) for k in options.__dataclass_fields__},
               "seconds": {k: round(v, 3) for k, v in timings.items()}}
    return scores, pairs, summary
