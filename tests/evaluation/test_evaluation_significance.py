"""Paired t-test, randomization test, Holm/Bonferroni, and compare() over an EvalResult."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from rankkit.errors import RankkitError
from rankkit.evaluation import compare, evaluate, paired_t_test, randomization_test
from rankkit.evaluation.significance import adjust


def brute_force_p(diffs: list[float]) -> float:
    """Exact two-sided sign-flip p-value by listing every assignment."""
    observed = abs(sum(diffs) / len(diffs))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        if abs(sum(s * d for s, d in zip(signs, diffs)) / len(diffs)) >= observed - 1e-12:
            hits += 1
    return hits / 2 ** len(diffs)


def test_t_test_is_the_textbook_paired_t_test() -> None:
    run = np.array([[0.5, 0.7, 0.6, 0.9, 0.4, 0.8]])
    base = np.array([[0.4, 0.5, 0.6, 0.6, 0.5, 0.5]])
    d = (run - base)[0]
    t = d.mean() / (d.std(ddof=1) / math.sqrt(d.size))
    expected = 2 * stats.t.sf(abs(t), df=d.size - 1)
    assert paired_t_test(run, base)[0] == pytest.approx(expected)


def test_t_test_degenerate_cases() -> None:
    same = np.array([[0.3, 0.5, 0.2]])
    assert paired_t_test(same, same)[0] == 1.0  # no difference at all: no evidence
    assert math.isnan(paired_t_test(np.array([[0.5]]), np.array([[0.1]]))[0])  # one query
    assert paired_t_test(same + 0.1, same)[0] == 0.0  # the same gain on every query: t is infinite


@pytest.mark.parametrize("diffs", [[0.1, 0.2, -0.05, 0.3], [0.0, 0.5, -0.5, 0.25, 0.1, -0.2, 0.3], [0.2] * 5])
def test_randomization_is_exact_for_few_queries(diffs: list[float]) -> None:
    assert randomization_test(np.array([diffs]), permutations=10000)[0] == pytest.approx(brute_force_p(diffs))


def test_randomization_monte_carlo_agrees_with_exact() -> None:
    rng = np.random.default_rng(1)
    diffs = rng.normal(0.05, 0.2, size=(3, 12))
    exact = randomization_test(diffs, permutations=2**12)  # 4096 >= 2**12: every assignment
    sampled = randomization_test(diffs, permutations=4095, seed=3)  # one fewer: Monte Carlo
    assert np.allclose(exact, sampled, atol=0.03)
    assert exact[0] == pytest.approx(brute_force_p(list(diffs[0])))


def test_randomization_is_deterministic_and_bounded() -> None:
    rng = np.random.default_rng(0)
    strong = rng.normal(0.3, 0.05, size=(1, 40))
    p = randomization_test(strong, permutations=999, seed=0)[0]
    assert p == pytest.approx(1 / 1000)  # never 0: (hits + 1) / (permutations + 1)
    noise = rng.normal(0.0, 0.2, size=(2, 40))
    first = randomization_test(noise, permutations=5000, seed=7)
    assert np.array_equal(first, randomization_test(noise, permutations=5000, seed=7))
    assert not np.array_equal(first, randomization_test(noise, permutations=5000, seed=8))
    assert (first > 0.01).all()
    with pytest.raises(RankkitError):
        randomization_test(noise, permutations=0)


def test_holm_and_bonferroni() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust(p, "none") == pytest.approx(p)
    with_nan = adjust([0.01, float("nan"), 0.02], "holm")
    assert with_nan[0] == pytest.approx(0.02) and with_nan[2] == pytest.approx(0.02)
    assert math.isnan(with_nan[1])
    assert adjust([0.6, 0.6], "bonferroni") == pytest.approx([1.0, 1.0])


def _result():
    qids = [str(i) for i in range(1, 21)]
    qrels = {q: {"rel": 1} for q in qids}
    # base finds the relevant document at rank 3; better at rank 1 for every query; same = base.
    base = {q: {"x": 3.0, "y": 2.0, "rel": 1.0} for q in qids}
    better = {q: {"rel": 3.0, "x": 2.0, "y": 1.0} for q in qids}
    mixed = {q: ({"rel": 3.0, "x": 1.0} if int(q) % 2 else {"x": 3.0, "y": 2.0, "rel": 1.0}) for q in qids}
    return evaluate({"base": base, "better": better, "mixed": mixed}, qrels, ["RR", "P@1", "num_ret"])


def test_compare_marks_and_counts_comparisons() -> None:
    result = _result()
    sig = compare(result, "base", permutations=2000, seed=0)
    assert len(sig.comparisons) == 4  # 2 runs x 2 measures; the num_ret counter is not tested
    better = sig.get("better", "RR")
    assert better is not None and better.significant and better.n == 20
    assert better.delta == pytest.approx(1 - 1 / 3)
    assert better.p_randomization == pytest.approx(1 / 2001)  # no random flip reaches the observed mean
    mixed = sig.get("mixed", "P@1")
    assert mixed is not None and mixed.p_randomization_adjusted >= mixed.p_randomization
    assert sig.get("base", "RR") is None
    assert "randomization" in sig.legend() and "Holm" in sig.legend()


def test_compare_test_choice_and_errors() -> None:
    result = _result()
    t_only = compare(result, "base", test="t", permutations=100)
    both = compare(result, "base", test="both", permutations=100)
    for c_t, c_both in zip(t_only.comparisons, both.comparisons):
        assert c_both.significant == (c_t.p_t_adjusted < 0.05 and c_both.p_randomization_adjusted < 0.05)
    with pytest.raises(RankkitError, match="baseline"):
        compare(result, "nope")
    with pytest.raises(RankkitError, match="unknown test"):
        compare(result, "base", test="wilcoxon")
    with pytest.raises(RankkitError, match="correction"):
        compare(result, "base", correction="fdr")
    with pytest.raises(RankkitError, match="alpha"):
        compare(result, "base", alpha=1.5)
