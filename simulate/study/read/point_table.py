"""A study point's long table (:data:`simulate.study.train.point.RAW_COLUMNS`) read as the claims' evidence.

The only reader of the long table's rows: :func:`point_evidence` turns the ``layers``
(every logged step's ``var``), ``scores`` and ``loss`` rows of one point into its
:class:`~simulate.claims.statistics.ModelEvidence` at the end of training, which the claims,
the reports and the figures read through its accessors; :func:`last_step_layers` gives every
probe metric of the last logged step (the variance laws' regressors).

>>> rows = [("layers", 2, l, "var", v) for l, v in enumerate([1.0, 2.0, 3.0])]
>>> rows += [("scores", 2, 1, "prune", 0.5), ("scores", 2, 2, "prune", 0.1), ("loss", 2, -1, "train", 2.5)]
>>> table = pd.DataFrame(rows, columns=["table", "step", "layer", "name", "value"])
>>> evidence = point_evidence(table, depth=2)
>>> evidence.last_profile().tolist(), evidence.block_values("prune").tolist(), evidence.train_loss.tolist()
([1.0, 2.0, 3.0], [0.5, 0.1], [2.5])
>>> last_step_layers(table)["var"].tolist()
[1.0, 2.0, 3.0]
"""

from __future__ import annotations

import pandas as pd

from simulate.claims.statistics import ModelEvidence

__all__ = ["point_evidence", "last_step_layers"]


def point_evidence(table: pd.DataFrame, depth: int) -> ModelEvidence:
    """The evidence of one trained point (module docstring): every logged ``var`` profile, the trained model's
    scores and its training-loss log."""
    layers = table[(table["table"] == "layers") & (table["name"] == "var")]
    profiles = {int(step): group.set_index("layer")["value"].reindex(range(depth + 1)).to_numpy(float)  # (L+1,)
                for step, group in sorted(layers.groupby("step"))}
    scores = table[table["table"] == "scores"].rename(columns={"name": "score"}).reindex(
        columns=["layer", "score", "value", "sem"])  # sem NaN where a table has none
    train = table[(table["table"] == "loss") & (table["name"] == "train")].sort_values("step")
    return ModelEvidence(depth, profiles, scores, train["step"].to_numpy(float), train["value"].to_numpy(float))


def last_step_layers(table: pd.DataFrame) -> pd.DataFrame:
    """Every probe metric of the last logged step, one row per layer ``0..L``, one column per metric."""
    layers = table[table["table"] == "layers"]
    last = layers[layers["step"] == layers["step"].max()]
    return last.pivot_table(index="layer", columns="name", values="value")  # (L+1, metrics)
