"""A training run's model to score: loading, the held-out text, :func:`score_run`, the scores' key and files.

A run directory (:class:`simulate.training.run_directory.RunDirectory`) holds the Setting and
the training options, and the trained model. :func:`load_run_model` rebuilds the
:class:`CausalLM` of the Setting with the run's seed (that is exactly the model at step 0)
and, unless ``at_init``, loads the trained model into it, checking every tensor's name and
shape first. Anything unusable raises :class:`~simulate.training.run_directory.RunError`
whose message is one line naming the file.

Scores are keyed (:func:`scores_key`, the one key builder :func:`simulate.runtime.keys.result_key`)
by their request (:func:`scores_request`: the model's digest, ``at_init``, the groups, the options,
the data) and what makes them: the code version of this module's import closure (the scores, the
model, the corpus), the corpus digest, Python and torch. A folder of scores (``DIR/scores`` of
``python -m simulate scores``, a study point's ``run/scores``, a cached entry) has one writer,
:func:`save_scores`, and one reader, :func:`read_scores`; :func:`reusable_scores` is what a
caller that would rather not score again reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path

import pandas as pd

from simulate.runtime.keys import first_difference, key_inputs, result_key
from simulate.runtime.versions import closure_version
from simulate.scores.compute import ScoreOptions, compute_scores, held_out_batches, SCORE_GROUPS
from simulate.scores.model import stack_of
from simulate.training.run_directory import RunDirectory, RunError
from theory.files import write_text_atomic

__all__ = ["RECORD", "load_run_model", "score_run", "scores_request", "scores_key", "save_scores", "read_scores",
           "reusable_scores"]

RECORD = "config.json"  # a scores folder's record, written last
_TABLES = ("scores.csv", "pairs.csv")
_LOG = logging.getLogger("simulate.scores")


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


def _corpus_digest(spec: str) -> str:
    from simulate.training.data import DataError, corpus_digest

    try:
        return corpus_digest(spec)
    except DataError as error:
        raise RunError(str(error)) from None


def _model_digest(run: RunDirectory, at_init: bool) -> str:
    """The model scored: the digest of its weights, or at init of what draws them (Setting, seed, MoE flag)."""
    if at_init:
        init = {"setting": run.config["setting"], "seed": run.seed,
                "moe_lns_top_k": bool(run.train_options.get("moe_lns_top_k", False))}
        return hashlib.sha256(json.dumps(init, sort_keys=True).encode()).hexdigest()[:16]
    if not run.model_path.is_file():
        raise RunError(f"run directory {str(run.path)!r} is not allowed: no checkpoint {run.model_path.name}")
    return hashlib.sha256(run.model_path.read_bytes()).hexdigest()[:16]


def scores_request(run_dir, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(), *, at_init: bool = False,
                   data: str | None = None) -> tuple[dict, dict]:
    """``(request, versions)`` of the scores of a run's model: ``model`` (:func:`_model_digest`), ``at_init``,
    ``data`` (the held-out text: ``data``, else the run's), ``groups`` and ``options``; and what makes them
    (:func:`simulate.runtime.keys.key_inputs` of this module's code version and the corpus digest)."""
    run = RunDirectory(run_dir)
    spec = data or run.train_options.get("data", "docs")
    request = {"model": _model_digest(run, at_init), "at_init": at_init, "data": spec, "groups": list(groups),
               "options": dataclasses.asdict(options)}
    return request, key_inputs(closure_version(__name__), _corpus_digest(spec))


def scores_key(run_dir, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(), *, at_init: bool = False,
               data: str | None = None) -> str:
    """The key of these scores (:func:`scores_request` through :func:`simulate.runtime.keys.result_key`)."""
    return result_key(*scores_request(run_dir, groups, options, at_init=at_init, data=data))


def score_run(run_dir, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(), *, at_init: bool = False,
              data: str | None = None, device="cpu", progress=None):
    """Scores of a run's model (:func:`simulate.scores.compute.compute_scores`) on its held-out text.

    Returns
    -------
    (DataFrame, DataFrame, dict)
        scores.csv's and pairs.csv's tables and a summary: the request (:func:`scores_request`), its
        ``key`` and ``versions``, the run, the step and the seconds per group.
    """
    from simulate.training.data import DataError, load_corpus

    model, setting, config, step = load_run_model(run_dir, at_init, device)
    request, versions = scores_request(run_dir, groups, options, at_init=at_init, data=data)
    try:
        corpus = load_corpus(request["data"], setting.tokens)
    except DataError as error:
        raise RunError(str(error)) from None
    needed = setting.tokens + 1
    if len(corpus.held_out) < needed:
        raise RunError(f"data={request['data']!r} is not allowed: its held-out part is shorter than one window of "
                       f"{needed} bytes")
    batches = held_out_batches(corpus.held_out, options.sequences, setting.tokens, options.batch_size, device)
    timings: dict = {}
    scores, pairs = compute_scores(stack_of(model), batches, groups, options, progress, timings)
    summary = {"run": str(run_dir), "step": step, **request, "key": result_key(request, versions),
               "versions": versions, "seconds": {k: round(v, 3) for k, v in timings.items()}}
    return scores, pairs, summary


def save_scores(out, scores: pd.DataFrame, pairs: pd.DataFrame, record: dict) -> Path:
    """Write ``scores.csv``, ``pairs.csv`` and then the ``record`` (:data:`RECORD`, JSON) into ``out`` (created),
    each atomically. An earlier record is removed first and the new one written last, so a folder caught in
    between holds no record and is never read as scores (:func:`read_scores`), nor new tables with an old
    record."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORD).unlink(missing_ok=True)
    for name, table in zip(_TABLES, (scores, pairs)):
        write_text_atomic(out / name, table.to_csv(index=False))
    return write_text_atomic(out / RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")


def read_scores(out) -> tuple[pd.DataFrame, pd.DataFrame, dict] | None:
    """``(scores, pairs, record)`` of a folder :func:`save_scores` wrote; None where there is none (no record,
    a table missing, anything unreadable).

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> read_scores(out) is None
    True
    >>> _ = save_scores(out, pd.DataFrame({"layer": [1]}), pd.DataFrame({"layer": [1]}), {"key": "k"})
    >>> read_scores(out)[2]
    {'key': 'k'}
    """
    out = Path(out)
    try:
        record = json.loads((out / RECORD).read_text())
        tables = [pd.read_csv(out / name) for name in _TABLES]
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    return (*tables, record) if isinstance(record, dict) else None


def reusable_scores(out, run_dir, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(), *,
                    at_init: bool = False, data: str | None = None):
    """The scores saved in ``out`` (:func:`read_scores`) when their record's key is that of this request
    (:func:`scores_key`); else None, with one warning line (logger ``simulate.scores``) naming what differs when
    ``out`` holds scores of another request, code, corpus, Python or torch."""
    saved = read_scores(out)
    if saved is None:
        return None
    request, versions = scores_request(run_dir, groups, options, at_init=at_init, data=data)
    record = saved[2]
    if record.get("key") == result_key(request, versions):
        return saved
    why = first_difference(record, request) or first_difference(record.get("versions"), versions) or "another key"
    _LOG.warning("%s is scored again: its scores were made with %s", out, why)
    return None
