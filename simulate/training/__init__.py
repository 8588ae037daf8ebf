"""The trained probe: a tiny byte-level LM of a Setting, trained on text, measured per layer.

``python -m simulate train`` (:mod:`simulate.training.cli`). Modules: :mod:`~simulate.training.model`
(the LM built from :mod:`theory.architecture`), :mod:`~simulate.training.data` (corpora and
batches), :mod:`~simulate.training.loop` (optimiser, schedule, the training loop),
:mod:`~simulate.training.checkpoint` (safetensors checkpoints, resume, :func:`load_model`),
:mod:`~simulate.training.run_directory` (a run's files, read by one owner; :func:`train_into`),
:mod:`~simulate.training.identity` (a run's key and what made it: code, corpus, Python, torch),
:mod:`~simulate.training.probes` (per-layer statistics), :mod:`~simulate.training.report`
(the files, the bridge and growth fits per logged step), :mod:`~simulate.training.budget`
(memory estimate), :mod:`~simulate.bench.training` (``bench --train``). Definitions:
``docs/trained.md``.
"""

from simulate.training.checkpoint import load_model
from simulate.training.data import load_corpus, probe_batch
from simulate.training.loop import Trainer, TrainConfig
from simulate.training.model import CausalLM, ModelOutput
from simulate.training.probes import lm_loss
from simulate.training.run_directory import RunDirectory, RunError, train_into

__all__ = ["CausalLM", "ModelOutput", "Trainer", "TrainConfig", "load_model", "load_corpus", "probe_batch", "lm_loss",
           "RunDirectory", "RunError", "train_into"]
