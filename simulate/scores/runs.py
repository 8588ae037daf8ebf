"""A training run's model to score: loading, the held-out text, :func:`score_run`, the scores' code version.

A run directory (:class:`simulate.training.run_directory.RunDirectory`) holds the Setting and
the training options, and the trained model. :func:`load_run_model` rebuilds the
:class:`CausalLM` of the Setting with the run's seed (that is exactly the model at step 0)
and, unless ``at_init``, loads the trained model into it, checking every tensor's name and
shape first. Anything unusable raises :class:`~simulate.training.run_directory.RunError`
whose message is one line naming the file. :func:`scores_version` is the code version of
what a score computes: this module's import closure (the scores, the model, the corpus).
"""

from __future__ import annotations

from pathlib import Path


from simulate.runtime.versions import closure_version
from simulate.scores.compute import ScoreOptions, compute_scores, held_out_batches, SCORE_GROUPS
from simulate.scores.model import stack_of
from simulate.training.run_directory import RunDirectory, RunError

__all__ = ["load_run_model", "score_run", "scores_version"]


def scores_version() -> str:
    """The code version of a run's scores: this module's import closure (the scores, the model, the corpus;
    :func:`simulate.runtime.versions.closure_version`)."""
    return closure_version(__name__)


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

    from simulate.training.model import CausalLM

    run = RunDirectory(run_dir)
    config, setting = run.config, run.setting
    model = CausalLM(setting, seed=run.seed, moe_lns_top_k=bool(run.train_options.get("moe_lns_top_k", False)))
    step = 0
    if not at_init:
        path = run.model_path
        if not path.is_file():
            raise RunError(f"run directory {str(run_dir)!r} is not allowed: no checkpoint {path.name} (train it to "
                           "the end, or score the model at step 0 with --at-init)")
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as error:
            raise RunError(f"checkpoint {path} is not allowed: not a safetensors file ({error})") from None
        _check_tensors(path, tensors, model)
        model.load_state_dict(tensors)
        step = run.last_step
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
