"""A training run's identity: what it was asked (the Setting, the training options), what made it (the
trainer's code, the corpus, the Python and torch) and the key of both.

The trainer's code version is the import closure of :data:`TRAINER`
(:func:`simulate.runtime.versions.closure_version`); :func:`run_versions` adds the corpus digest
(:func:`simulate.training.data.corpus_digest`) and the environment
(:func:`simulate.runtime.keys.key_inputs`), and :func:`run_key` is the one key builder's
(:func:`simulate.runtime.keys.result_key`) of the request (:func:`run_request`: the Setting and the
resolved training options) and those versions. The trainer records ``key`` and ``versions`` in a run's
``config.json``; a cached training is named by the key; a run is continued or kept only when
:func:`run_difference` finds nothing: ``python -m simulate train --resume`` refuses another run in one
line (exit 2), :func:`simulate.training.run_directory.train_into` trains it again.

>>> from theory.setting import Setting
>>> from simulate.training.loop import TrainConfig
>>> setting, config = Setting(depth=2, width=8), TrainConfig(steps=4, batch=2)
>>> len(run_key(setting, config)), run_key(setting, config) == run_key(setting, config, corpus_digest("docs"))
(16, True)
>>> run_difference({"setting": setting.replace(depth=3).to_dict()}, setting, config)
'another Setting (depth=3 there, 2 here)'
"""

from __future__ import annotations

from simulate.runtime.keys import first_difference, key_inputs, result_key
from simulate.runtime.versions import closure_version
from simulate.training.data import corpus_digest

__all__ = ["TRAINER", "run_versions", "run_request", "run_key", "run_difference"]

TRAINER = "simulate.training.loop"  # the module whose import closure is the trainer's code version


def run_versions(data_digest: str) -> dict:
    """What makes a run besides its request (:func:`simulate.runtime.keys.key_inputs`): the trainer's code
    version, the corpus digest ``data_digest``, Python and torch."""
    return key_inputs(closure_version(TRAINER), data_digest)


def run_request(setting, config) -> dict:
    """What a run is asked: every Setting field and the training options ``config`` (a
    :class:`~simulate.training.loop.TrainConfig`) with the derived ones resolved."""
    return {"setting": setting.to_dict(), "train": config.resolved_dict()}


def run_key(setting, config, data_digest: str | None = None) -> str:
    """The key of a run of ``setting`` with ``config`` (module docstring); ``data_digest`` defaults to the
    :func:`~simulate.training.data.corpus_digest` of ``config.data``."""
    data = corpus_digest(config.data) if data_digest is None else data_digest
    return result_key(run_request(setting, config), run_versions(data))


def run_difference(saved: dict, setting, config) -> str | None:
    """What differs between the run whose ``config.json`` is ``saved`` and a run of ``setting`` with ``config``,
    as a phrase (``'another Setting (depth=3 there, 2 here)'``), first the Setting, then the training options,
    then the versions (:func:`run_versions`; a run that recorded none differs); None when it is the same run."""
    why = first_difference(saved.get("setting"), setting.to_dict())
    if why is not None:
        return f"another Setting ({why})"
    try:
        before = type(config).from_dict(saved.get("train") or {}).resolved_dict()
    except (TypeError, ValueError):
        return "no valid training options"
    why = first_difference(before, config.resolved_dict())
    if why is not None:
        return f"other training options ({why})"
    why = first_difference(saved.get("versions"), run_versions(corpus_digest(config.data)))
    if why is not None:
        return f"other code, data, Python or torch ({why})"
    return None
