"""The papers' trained claims as a study judges them: a statistic, its claimed sign, its claimed trend.

Each :class:`Claim` names a per-model statistic (:data:`simulate.study.statistics.STATISTICS`),
the scheme it is measured on (one scheme; two for a paired difference, the first minus the
second, seed by seed), the sign the paper claims for it at every size (``sign``; None when
the paper claims only a trend), and the direction the paper claims along each axis
(``directions``; an axis missing there has no claimed direction). ``kind`` ``growth`` is
judged by the growth-class rule of ``verify`` (:mod:`simulate.scores.growth_claims`) at
each axis value; ``every_step`` asks for exponential growth at every logged step.

Where a paper claims a sign at every size it tests (P1: 130M to 7B) but no trend, a study on
CPU sizes asks the question of docs/studies.md: *does the effect move towards what the paper
reports as the model grows?* The claimed direction along the size axes :data:`SIZE_AXES`
(depth, width, training length) is then the claimed sign. The learning rate is no size: no
direction is claimed along it.

>>> CLAIMS["p1-lns-loss"].direction("depth"), CLAIMS["p1-lns-loss"].direction("lr")
(-1, None)
>>> CLAIMS["p2-depth-usefulness"].direction("depth"), CLAIMS["p2-depth-usefulness"].direction("width")
(-1, None)
>>> applicable_claims(("pre",))[:2]
('p1-lemma-3.2-growth', 'p1-fig9-every-step')
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SIZE_AXES", "KINDS", "Claim", "CLAIMS", "applicable_claims"]

SIZE_AXES = ("depth", "width", "steps")
KINDS = ("signed", "growth", "every_step")


@dataclass(frozen=True)
class Claim:
    """One trained claim (module docstring)."""

    name: str
    source: str
    statement: str
    statistic: str
    schemes: tuple[str, ...]
    sign: int | None = None
    directions: dict = field(default_factory=dict)
    kind: str = "signed"

    def direction(self, axis: str) -> int | None:
        """The claimed direction of the statistic as ``axis`` grows: +1, -1 or None (no claim)."""
        if axis in self.directions:
            return self.directions[axis]
        return self.sign if axis in SIZE_AXES else None

    @property
    def paired(self) -> bool:
        """Whether the statistic is a difference between two schemes (the first minus the second)."""
        return len(self.schemes) == 2


def _claims(*claims: Claim) -> dict[str, Claim]:
    return {claim.name: claim for claim in claims}


_NONE = {axis: None for axis in SIZE_AXES}  # a sign at every size, no claimed trend

CLAIMS: dict[str, Claim] = _claims(
    Claim("p1-lemma-3.2-growth", "P1 Lemma 3.2", "Pre-LN variance grows at least linearly and at most "
          "exponentially in depth (polynomial with p >= 1, or exponential)", "growth_exponent", ("pre",),
          directions=_NONE, kind="growth"),
    Claim("p1-fig9-every-step", "P1 Fig. 9 (LLaMA-130M at 1000, 3000, 6000 steps)", "Pre-LN variance grows "
          "exponentially in depth at every logged step of training", "exponential_step_share", ("pre",),
          directions={axis: 1 for axis in SIZE_AXES}, kind="every_step"),
    Claim("p1-fig1-removable", "P1 Fig. 1 and Sec. 1 (nearly half of the deep layers removable)", "the share of "
          "Pre-LN blocks whose removal costs less than 1 % of the base loss rises with depth", "removable_share",
          ("pre",), directions={"depth": 1}),
    Claim("p1-thm-3.3-jac", "P1 Theorem 3.3", "deep Pre-LN blocks are nearer the identity than shallow ones: "
          "log(jac_dev deep half / shallow half) < 0", "jac_dev_log_ratio", ("pre",), sign=-1),
    Claim("p1-thm-3.3-prune", "P1 Theorem 3.3 and Fig. 1", "deep Pre-LN blocks are cheaper to delete than "
          "shallow ones: pruning drop deep half minus shallow half < 0", "prune_deep_minus_shallow", ("pre",),
          sign=-1),
    Claim("p1-lns-growth", "P1 Sec. 4 (LayerNorm Scaling bound)", "LNS variance grows polynomially: "
          "p in [1, 2)", "growth_exponent", ("lns",), directions=_NONE, kind="growth"),
    Claim("p1-lns-loss", "P1 Sec. 5 (perplexity 130M 26.73 -> 25.76, 1B 17.02 -> 15.71)", "LNS lowers the "
          "held-out loss: LNS minus Pre-LN < 0", "val_loss", ("lns", "pre"), sign=-1),
    Claim("p1-lns-prune", "P1 Sec. 5 (layer pruning under LNS)", "deep LNS blocks matter more than deep Pre-LN "
          "ones: deep-half pruning drop LNS minus Pre-LN > 0", "prune_deep", ("lns", "pre"), sign=1),
    Claim("p1-lns-angular", "P1 Sec. 5 (angular distance of deep layers from near 0 to above 0.6)", "LNS raises "
          "the angular distance of deep blocks: deep-half angular distance LNS minus Pre-LN > 0", "angular_deep",
          ("lns", "pre"), sign=1),
    Claim("p1-lns-angular-last", "P1 Sec. 5, as its code measures it (last token)", "the same with the last "
          "token's angular distance: LNS minus Pre-LN > 0", "angular_deep_last", ("lns", "pre"), sign=1),
    Claim("p2-depth-var-last", "P2 Sec. 2, Fig. 2(a)", "Pre-LN last-layer variance rises with depth",
          "var_last", ("pre",), directions={"depth": 1}),
    Claim("p2-depth-jac", "P2 Sec. 2, Fig. 2(b) and Fig. 3", "Pre-LN ||J - I||_F falls with depth",
          "jac_dev_mean", ("pre",), directions={"depth": -1}),
    Claim("p2-depth-causal", "P2 Sec. 2, Fig. 2(c)", "the Pre-LN causal score falls with depth", "causal_mean",
          ("pre",), directions={"depth": -1}),
    Claim("p2-depth-permutation", "P2 Sec. 2, Fig. 2(c)", "the Pre-LN permutation score falls with depth",
          "permutation_mean", ("pre",), directions={"depth": -1}),
    Claim("p2-depth-usefulness", "P2 Sec. 2, Table 1 (0.75 at L=12 to 0.53 at L=32)", "the share of significant "
          "Pre-LN blocks (usefulness > 1.1) falls with depth", "usefulness_fraction", ("pre",),
          directions={"depth": -1}),
    Claim("p2-depth-usefulness-ratio", "P2 Sec. 2, Fig. 2(c)", "the mean Pre-LN usefulness mean_l log(L_lin/L) "
          "falls with depth", "usefulness_log", ("pre",), directions={"depth": -1}),
)


def applicable_claims(schemes) -> tuple[str, ...]:
    """Names of the claims whose schemes are all among ``schemes``, in :data:`CLAIMS` order."""
    return tuple(name for name, claim in CLAIMS.items() if all(s in schemes for s in claim.schemes))
