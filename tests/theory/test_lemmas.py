"""The lemma registry: ids of docs/derivations.md, fields, symbolic checks, derived growth classes."""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

import theory
from theory.symbolic.lemmas import LEMMAS, Lemma, derive_growth, growth_class, lemma

CONTRACT_IDS = (
    "p1-lemma-3.2 p1-ln-jacobian p1-thm-3.3 p1-lns p2-thm-1 p2-thm-2 p2-thm-3 p2-thm-4 p2-thm-5 p2-gqa "
    "masked-linear exact-weight-decay preln-init lns-init moe-gates gqa-init "
    "causal-attention jacobian-init bridge-aligned"
).split()
GROWTH_NAMES = {None, "O(1)", "Theta(log L)", "Theta(L)", "Theta(L^2)", "Theta(exp(L))", "Theta(L^(-1/2))"}

# growth classes derived here (the finding of the issue): P1's own recursion is quadratic
EXPECTED_GROWTH = {
    "p1-lemma-3.2": "Theta(L^2)", "p1-lns": "Theta(L)", "p1-thm-3.3": "O(1)",
    "p2-thm-1": "Theta(exp(L))", "p2-thm-2": "Theta(exp(L))", "masked-linear": "Theta(exp(L))",
    "preln-init": "Theta(L)", "lns-init": "Theta(log L)",
    "jacobian-init": "Theta(L^(-1/2))", "bridge-aligned": "Theta(L^2)",
    "exact-weight-decay": "O(1)", "p2-thm-3": "O(1)",
}


def test_registry_has_exactly_the_contract_ids_in_order():
    assert list(LEMMAS) == CONTRACT_IDS
    assert theory.LEMMAS is LEMMAS and theory.LEMMA_IDS == tuple(CONTRACT_IDS)


@pytest.mark.parametrize("lemma_id", CONTRACT_IDS)
def test_fields(lemma_id):
    entry = LEMMAS[lemma_id]
    assert isinstance(entry, Lemma) and entry.id == lemma_id
    assert entry.kind in ("paper", "exact", "bridge")
    expected_prefix = {"paper": ("P1", "P2"), "exact": ("derived here",), "bridge": ("derived here",)}
    assert entry.source.startswith(expected_prefix[entry.kind])
    assert entry.title and entry.assumptions
    assert isinstance(entry.statement, sp.Basic)
    assert entry.closed_form is None or isinstance(entry.closed_form, sp.Basic)
    assert entry.growth in GROWTH_NAMES
    assert all(other in LEMMAS and other != lemma_id for other in entry.related)
    assert entry.kind != "exact" or entry.closed_form is not None


@pytest.mark.parametrize("lemma_id", CONTRACT_IDS)
def test_symbolic_check_passes(lemma_id):
    check = LEMMAS[lemma_id].symbolic_check
    assert check is not None, "every lemma has a symbolic check"
    assert check() is True


@pytest.mark.parametrize("lemma_id", CONTRACT_IDS)
def test_recorded_growth_is_the_derived_one(lemma_id):
    assert growth_class(lemma_id) == derive_growth(lemma_id) == EXPECTED_GROWTH.get(lemma_id)


@pytest.mark.parametrize("lemma_id", ["masked-linear", "preln-init", "lns-init",
                                      "exact-weight-decay", "gqa-init", "causal-attention"])
def test_exact_statement_rhs_is_the_closed_form(lemma_id):
    entry = LEMMAS[lemma_id]
    assert isinstance(entry.statement, sp.Eq)
    assert sp.simplify(entry.statement.rhs - entry.closed_form) == 0


def test_paper_findings_are_recorded():
    assert "quadratic" in LEMMAS["p1-lemma-3.2"].notes.lower() or "L^2" in LEMMAS["p1-lemma-3.2"].notes
    assert "violates" in LEMMAS["p1-lns"].notes
    assert "does not depend on G" in LEMMAS["p2-gqa"].notes
    assert "H_T" in LEMMAS["p2-thm-4"].notes


def test_lemma_lookup_and_unknown_id():
    assert lemma("p2-thm-1") is LEMMAS["p2-thm-1"]
    with pytest.raises(KeyError) as info:
        lemma("p2-thm-9")
    message = str(info.value)
    assert "p2-thm-9" in message and all(lemma_id in message for lemma_id in CONTRACT_IDS)


def test_lemma_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LEMMAS["p2-thm-1"].kind = "exact"  # type: ignore[misc]


def test_symbols_are_defined_once_with_assumptions():
    from theory.symbolic import symbols

    names = [value.name for value in symbols.ALL_SYMBOLS.values()]
    assert len(names) == len(set(names))
    assert symbols.L.is_integer and symbols.L.is_positive and symbols.t.is_nonnegative
    assert symbols.rho.is_positive and symbols.a.is_nonnegative and symbols.lam.name == "lambda"
