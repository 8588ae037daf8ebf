"""The papers' trained claims, each defined once: what it states, what it measures, what it claims.

Each :class:`Claim` has one id, its source, the per-model statistic it reads
(:data:`simulate.claims.statistics.STATISTICS`), the scheme it is measured on (one; two for a
difference, the first minus the second, paired by seed where the seeds pair the runs), the
sign the paper claims for it at every size (``sign``; None when the paper claims only a
trend), the direction it claims along each axis (``directions``), and its :class:`Kind`.
A ``knob`` claim (P2's sparsity knobs) compares a run with the sparser value of one Setting
field against the Pre-LN reference that differs from it only there (:data:`KNOBS`).

Every claim judged along depth reads a statistic that does not shrink as ``1/L`` merely because
blocks multiply (docs/studies.md#the-claims): P1 compares deep with shallow blocks of one model
(a log ratio of the two halves) and LNS with Pre-LN (a log ratio of the two schemes); P2's
per-block scores are judged by their total over the blocks, which holds them against the null
that a constant total is shared equally over ``L`` blocks (a per-block mean falls as ``1/L``
under it; the total stays).

Who judges what (one judge each, over the same per-model statistics):

- ``verify --trained`` (:mod:`simulate.claims.across_runs`): every signed, growth and knob
  claim on groups of runs that differ only in their seed, at step 0 and after training;
- a study (:mod:`simulate.claims.along_axes`): every claim it lists except knob claims, per
  cell of its axes (the level) and as a trend along each axis.

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
>>> growth_claim("p1-lns").id, CLAIMS["p2-thm-3-var-growth"].kind
('p1-lns-growth', <Kind.SIGNED: 'signed'>)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from theory.verdicts import Verdict

__all__ = ["SIZE_AXES", "Kind", "Reference", "perplexity_gain", "Margin", "MARGINS",
           "GrowthRule", "KNOBS", "Claim", "CLAIMS", "applicable_claims",
           "growth_claim", "sparser", "Question", "QUESTIONS"]

SIZE_AXES = ("depth", "width", "steps")


class Kind(str, Enum):
    """How a claim is judged: a claimed sign (``signed``), a growth class of the variance profile
    (``growth``, :mod:`simulate.claims.growth`), exponential growth at every logged step (``every_step``)."""

    SIGNED = "signed"
    GROWTH = "growth"
    EVERY_STEP = "every_step"


class Reference(NamedTuple):
    """The size of an effect a paper reports, in this workbench's units: at one cell (``level``) and the change of
    the statistic across the papers' comparison (``change``; None where the paper gives none) over ``spans``, the
    e-folds of each axis that moved in it (``{"depth": log 2}`` for 12 to 24 layers; P1's 130M to 1B moved depth and
    width together, so both are named), and where it is read from. ``at_least``: the number is a bound the effect
    reaches (P1's lower bound on growth), not a size. The size question of a verdict is asked against it, and the
    power and ``design cannot resolve`` are stated against it (docs/studies.md#against-the-papers-size)."""

    level: float | None
    change: float | None
    spans: dict
    source: str
    at_least: bool = False

    def trend(self, axis: str) -> float | None:
        """The papers' slope per e-fold of ``axis``: the whole change read as if ``axis`` alone had moved (None
        where ``axis`` did not move in the papers' comparison, or the paper gives no change)."""
        if self.change is None or axis not in self.spans:
            return None
        return self.change / self.spans[axis]

    @property
    def confounded(self) -> str:
        """'' for a comparison along one axis; else the axes that moved together, in words."""
        return " and ".join(self.spans) + " moved together" if len(self.spans) > 1 else ""


def perplexity_gain(before: float, after: float, loss: float = 1.27) -> float:
    """A paper's perplexity change as a held-out loss difference of this recipe: ``log(after / before)`` (nats per
    token) as a share of the paper's loss ``log(before)``, times this recipe's loss of about ``loss`` nats/byte.

    >>> round(perplexity_gain(26.73, 25.76), 4)  # P1's LLaMA-130M, Pre-LN -> LNS
    -0.0143
    """
    return math.log(after / before) / math.log(before) * loss


class Margin(NamedTuple):
    """The change between two training lengths within which a statistic counts as *stable*, declared before the
    data (docs/studies.md#stability): for a level in the statistic's units, for a trend per e-fold of the axis, and
    why."""

    level: float
    trend: float
    reason: str


class GrowthRule(NamedTuple):
    """A growth claim's bounds: polynomial exponent ``p`` in ``[min_exponent, max_exponent)``; whether an
    exponential class satisfies the claim; whether P1's per-layer factor ``1 + c/sigma`` is judged."""

    min_exponent: float
    max_exponent: float
    exponential: bool
    per_layer_factor: bool


_LOG_RATIO = Margin(math.log(1.25), 0.1, "a ratio that moves by less than a quarter, or whose trend moves by less than "
                   "10 % per e-fold, tells the same story")
_SHARE = Margin(0.1, 0.05, "a tenth of the blocks (or logged steps), half that per e-fold")
# The stability margin of each statistic a study judges, in its units (docs/studies.md#stability): fixed from what
# the statistic means and the papers' sizes, never from the estimate it judges.
MARGINS = {
    "val_loss": Margin(0.005, 0.01, "a third of P1's smallest gain (0.014 nats/byte at 130M) and of its growth "
                                    "(0.031 per e-fold): a smaller change cannot move a verdict against P1's size"),
    "var_last": Margin(math.log(1.5), 0.25, "half again the variance; a quarter of P1's lower bound's exponent 1 (the "
                                            "bounds are a whole exponent apart)"),
    "var_growth": Margin(math.log(1.5), 0.25, "as var_last"),
    "growth_exponent": Margin(0.25, 0.25, "a quarter of P1's lower bound's exponent 1"),
    "jac_dev_log_ratio": _LOG_RATIO, "prune_log_ratio": _LOG_RATIO, "prune_deep_log": _LOG_RATIO,
    "angular_deep_log": _LOG_RATIO, "angular_deep_last_log": _LOG_RATIO,
    "removable_share": _SHARE, "useful_share": _SHARE, "exponential_step_share": _SHARE,
    "jac_dev_total": Margin(1.0, 0.5, "one block's worth: a block whose Jacobian is a whole identity away"),
    "causal_total": Margin(1.0, 0.5, "one block's worth: a skipped block that changes a later block's update by as "
                                     "much as the update itself"),
    "permutation_total": Margin(1.0, 0.5, "one block's worth: a swap that changes the loss by its whole value"),
    "usefulness_log_total": Margin(math.log(1.1), math.log(1.1) / 2, "one block at P2's significance threshold "
                                                                       "(L_lin / L = 1.1)"),
    "usefulness_log": Margin(math.log(1.1) / 4, math.log(1.1) / 8, "a quarter of P2's significance threshold "
                                                                   "(L_lin / L = 1.1) in the mean block"),
}

# P2's sparsity knobs: the Setting field, its name, and the side that is sparser (P2's direction).
KNOBS = {"weight_decay": "weight decay", "tokens": "sequence length", "kv_heads": "GQA", "block": "MoE"}


def sparser(knob: str, a, b) -> bool:
    """Whether Setting ``a`` is the sparser side of ``knob`` against ``b`` (P2: more weight decay, longer
    sequences, larger GQA groups, a mixture of experts)."""
    if knob == "weight_decay":
        return a.weight_decay > b.weight_decay
    if knob == "tokens":
        return a.tokens > b.tokens
    if knob == "kv_heads":
        return a.group_size > b.group_size
    return a.block == "moe" and b.block != "moe"


@dataclass(frozen=True)
class Claim:
    """One trained claim (module docstring)."""

    id: str
    source: str
    statement: str
    statistic: str
    schemes: tuple[str, ...]
    sign: int | None = None
    directions: dict = field(default_factory=dict)
    kind: Kind = Kind.SIGNED
    knob: str | None = None
    growth: GrowthRule | None = None
    lemma: str | None = None  # the random-init lemma of theory.LEMMAS whose growth class this claim states
    reference: Reference | None = None  # the papers' effect size, where they give one

    def direction(self, axis: str) -> int | None:
        """The claimed direction of the statistic as ``axis`` grows: +1, -1 or None (no claim)."""
        if axis in self.directions:
            return self.directions[axis]
        return self.sign if axis in SIZE_AXES else None

    def reference_trend(self, axis: str) -> float | None:
        """The papers' slope per e-fold of ``axis`` (:meth:`Reference.trend`; None where they give none)."""
        return self.reference.trend(axis) if self.reference else None

    @property
    def margin(self) -> Margin:
        """The stability margin of the claim's statistic (:data:`MARGINS`)."""
        return MARGINS[self.statistic]

    @property
    def paired(self) -> bool:
        """Whether the statistic is a difference between two schemes (the first minus the second)."""
        return len(self.schemes) == 2

    @property
    def describe_sides(self) -> str:
        """The runs the statistic is measured on, in words."""
        if self.knob:
            return f"{KNOBS[self.knob]} minus the Pre-LN reference"
        return " minus ".join(self.schemes)


_NONE = {axis: None for axis in SIZE_AXES}  # a sign at every size, no claimed trend


def _knob_claims(knob: str, prefix: str, source: str) -> tuple[Claim, ...]:
    """P2's two claims on a sparsity knob: lower variance growth, more useful blocks than the reference."""
    name = KNOBS[knob]
    return (Claim(f"{prefix}-var-growth", source, f"{name} lowers the variance growth: log(var_L / var_1), {name} minus reference < 0", "var_growth",
                  ("pre",), sign=-1, knob=knob),
            Claim(f"{prefix}-usefulness", source, f"{name} raises the usefulness of the blocks: mean_l log(L_lin / L), {name} minus reference > 0",
                  "usefulness_log", ("pre",), sign=1, knob=knob))


CLAIMS: dict[str, Claim] = {claim.id: claim for claim in (
    Claim("p1-lemma-3.2-growth", "P1 Lemma 3.2", "Pre-LN variance grows at least linearly and at most "
          "exponentially in depth (polynomial with p >= 1, or exponential)", "growth_exponent", ("pre",),
          directions=_NONE, kind=Kind.GROWTH, growth=GrowthRule(1.0, math.inf, True, True), lemma="p1-lemma-3.2"),
    Claim("p1-fig9-every-step", "P1 Fig. 9 (LLaMA-130M at 1000, 3000, 6000 steps)", "Pre-LN variance grows "
          "exponentially in depth at every logged step of training", "exponential_step_share", ("pre",),
          directions={axis: 1 for axis in SIZE_AXES}, kind=Kind.EVERY_STEP),
    Claim("p1-fig1-removable", "P1 Fig. 1 and Sec. 1 (nearly half of the deep layers removable)", "the share of "
          "Pre-LN blocks whose removal costs less than a tenth of the mean block's rises with depth", "removable_share",
          ("pre",), directions={"depth": 1}),
    Claim("p1-thm-3.3-jac", "P1 Theorem 3.3", "deep Pre-LN blocks are nearer the identity than shallow ones: "
          "log(jac_dev deep half / shallow half) < 0", "jac_dev_log_ratio", ("pre",), sign=-1),
    Claim("p1-thm-3.3-prune", "P1 Theorem 3.3 and Fig. 1", "deep Pre-LN blocks are cheaper to delete than "
          "shallow ones: log(pruning drop deep half / shallow half) < 0", "prune_log_ratio", ("pre",), sign=-1),
    Claim("p1-lns-growth", "P1 Sec. 4 (LayerNorm Scaling bound)", "LNS variance grows polynomially: "
          "p in [1, 2)", "growth_exponent", ("lns",), directions=_NONE, kind=Kind.GROWTH,
          growth=GrowthRule(1.0, 2.0, False, False), lemma="p1-lns"),
    Claim("p1-lns-loss", "P1 Sec. 5 (perplexity 130M 26.73 -> 25.76, 1B 17.02 -> 15.71)", "LNS lowers the "
          "held-out loss: LNS minus Pre-LN < 0", "val_loss", ("lns", "pre"), sign=-1,
          reference=Reference(perplexity_gain(26.73, 25.76),
                              perplexity_gain(17.02, 15.71) - perplexity_gain(26.73, 25.76),
                              {"depth": math.log(24 / 12), "width": math.log(2048 / 768)},
                              "P1's 130M gain (perplexity 26.73 -> 25.76, 1.1 % of its loss) and its growth to 1B "
                              "(17.02 -> 15.71, 2.8 %), each times this recipe's loss of about 1.27 nats/byte; 130M to "
                              "1B goes from 12 to 24 layers and from width 768 to 2048 at once, so the slope per "
                              "e-fold of either axis reads the whole change as that axis's")),
    Claim("p1-lns-prune", "P1 Sec. 5 (layer pruning under LNS)", "deep LNS blocks matter more than deep Pre-LN "
          "ones: log(deep-half pruning drop LNS / Pre-LN) > 0", "prune_deep_log", ("lns", "pre"), sign=1),
    Claim("p1-lns-angular", "P1 Sec. 5 (angular distance of deep layers from near 0 to above 0.6; no size: "
          "'near 0' has no value)", "LNS raises "
          "the angular distance of deep blocks: log(deep-half angular distance LNS / Pre-LN) > 0",
          "angular_deep_log", ("lns", "pre"), sign=1),
    Claim("p1-lns-angular-last", "P1 Sec. 5, as its code measures it (last token)", "the same with the last "
          "token's angular distance: log(LNS / Pre-LN) > 0", "angular_deep_last_log", ("lns", "pre"), sign=1),
    Claim("p2-depth-var-last", "P2 Sec. 2, Fig. 2(a)", "Pre-LN last-layer variance rises with depth",
          "var_last", ("pre",), directions={"depth": 1},
          reference=Reference(None, 1.0, {"depth": 1.0}, "P1 Lemma 3.2's lower bound Theta(L): log var_L rises by at "
                                                         "least 1 per e-fold of depth (a bound, not a size)",
                              at_least=True)),
    Claim("p2-depth-jac", "P2 Sec. 2, Fig. 2(b) and Fig. 3", "Pre-LN ||J - I||_F falls with depth beyond "
          "dilution: the stack's total sum_l ||J_l - I|| falls", "jac_dev_total", ("pre",), directions={"depth": -1}),
    Claim("p2-depth-causal", "P2 Sec. 2, Fig. 2(c)", "the Pre-LN causal score falls with depth beyond dilution: "
          "its total over the blocks falls", "causal_total", ("pre",), directions={"depth": -1}),
    Claim("p2-depth-permutation", "P2 Sec. 2, Fig. 2(c)", "the Pre-LN permutation score falls with depth beyond "
          "dilution: its total over the blocks falls", "permutation_total", ("pre",), directions={"depth": -1}),
    Claim("p2-depth-usefulness", "P2 Sec. 2, Table 1 (0.75 at L=12 to 0.53 at L=32)", "the share of useful "
          "Pre-LN blocks (log usefulness at least a tenth of the mean block's) falls with depth", "useful_share",
          ("pre",), directions={"depth": -1},
          reference=Reference(None, 0.53 - 0.75, {"depth": math.log(32 / 12)},
                              "P2 Table 1: the share of significant blocks 0.75 at 12 layers to 0.53 at 32, depth "
                              "alone; P2 counts a block significant at L_lin / L above 1.1, this statistic at a tenth "
                              "of the model's mean block (a threshold that does not dilute as 1/L), so the two shares "
                              "differ in what they count")),
    Claim("p2-depth-usefulness-ratio", "P2 Sec. 2, Fig. 2(c)", "the Pre-LN usefulness falls with depth beyond "
          "dilution: sum_l log(L_lin/L) falls", "usefulness_log_total", ("pre",), directions={"depth": -1}),
    *_knob_claims("weight_decay", "p2-thm-3", "P2 Theorem 3"),
    *_knob_claims("tokens", "p2-thm-4", "P2 Theorem 4"),
    *_knob_claims("kv_heads", "p2-gqa", "P2 Sec. 4 (GQA)"),
    *_knob_claims("block", "p2-thm-5", "P2 Theorem 5"),
)}


def applicable_claims(schemes) -> tuple[str, ...]:
    """Ids of the claims a study of ``schemes`` can judge along its axes (its schemes all present; no knob
    claim: those compare two runs that differ in one Setting field, judged by ``verify --trained``)."""
    return tuple(claim.id for claim in CLAIMS.values()
                 if claim.knob is None and all(s in schemes for s in claim.schemes))


def growth_claim(lemma: str) -> Claim:
    """The growth claim stating the growth class of random-init lemma ``lemma`` (ValueError for another)."""
    for claim in CLAIMS.values():
        if claim.lemma == lemma:
            return claim
    raise ValueError(f"lemma={lemma!r} is not allowed: one of "
                     f"{', '.join(c.lemma for c in CLAIMS.values() if c.lemma)}")


class Question(NamedTuple):
    """A headline question of a depth study (simulate.study.write.headline): its title, the claims it reads
    (levels per depth and the trend along depth; a growth question reads each scheme's growth claim across depth)
    and the answer each verdict gives."""

    title: str
    claims: tuple[str, ...]
    answers: dict


QUESTIONS = (
    Question("Does LNS reach a lower held-out loss than Pre-LN, and where does the difference change sign?",
             ("p1-lns-loss",), {Verdict.HOLDS: "LNS lower", Verdict.VIOLATED: "LNS higher",
                                Verdict.INCONCLUSIVE: "no difference resolved",
                                Verdict.UNRESOLVABLE: "smaller than the design can resolve"}),
    Question("Are deep Pre-LN blocks relatively less useful than shallow ones as depth grows?",
             ("p1-thm-3.3-prune",), {Verdict.HOLDS: "yes", Verdict.VIOLATED: "no", Verdict.INCONCLUSIVE: "not resolved",
                                     Verdict.UNRESOLVABLE: "smaller than the design can resolve"}),
    Question("How does the last layer's variance grow with depth, against P1's bounds?",
             ("p1-lemma-3.2-growth", "p1-lns-growth"),
             {Verdict.HOLDS: "inside P1's bounds", Verdict.VIOLATED: "outside P1's bounds",
              Verdict.INCONCLUSIVE: "not resolved"}),
)
