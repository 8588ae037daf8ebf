"""The numeric mean-field layer: per-layer curves at random init, ending at ``predict``.

From the bottom up (each module imports only those above it in this list):

- :mod:`theory.meanfield.gaussian`: Gaussian moments and dual kernels of the activations.
- :mod:`theory.meanfield.softmax_rows`: moments of softmax attention rows and their Jacobians.
- :mod:`theory.meanfield.tables`: interpolation tables of both (``AttentionTable``, ``KernelTable``).
- :mod:`theory.meanfield.plan`: the plan of a stack (``SublayerPlan``, ``build_plan``).
- :mod:`theory.meanfield.pair_recursion`: the (variance, mean inter-token covariance) recursion.
- :mod:`theory.meanfield.covariance`: one sublayer (and block) of the per-position T x T
  token-covariance recursion, forward and tangent.
- :mod:`theory.meanfield.stack_recursion`: that recursion through a whole stack (step by step,
  geometric strides, hand-over to the pair recursion).
- :mod:`theory.meanfield.prediction`: ``predict(setting)``, the table of laws; weight decay.
"""
