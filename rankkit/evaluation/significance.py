"""Paired significance tests of runs against a baseline, with multiple-comparison correction.

Two tests on the per-query values of each (run, measure) against the baseline, over the queries
both were evaluated on:

* the paired two-sided t-test (``scipy.stats.ttest_rel``);
* the paired randomization (Fisher sign-flip) test: under the null hypothesis each query's
  difference is as likely to have either sign, so the p-value is the fraction of random sign
  assignments whose mean difference is at least as extreme as the observed one. Exact (every
  assignment enumerated) when ``2**n`` is at most the number of permutations, Monte Carlo
  otherwise, with p = (hits + 1) / (permutations + 1) so a p-value is never 0.

The default test driving the marks is the randomization test: it assumes nothing about the
distribution of per-query differences (IR measures are bounded and often skewed), and Smucker,
Allan & Carterette (CIKM 2007) recommend it for IR evaluation. Holm's step-down correction (or
Bonferroni) runs over all comparisons of one test (every run x every measure).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from rankkit.errors import RankkitError
from rankkit.evaluation.evaluate import EvalResult
from rankkit.evaluation.measures import MIN_GEO_MEAN

TestName = Literal["t", "randomization", "both"]
Correction = Literal["holm", "bonferroni", "none"]
TESTS: tuple[str, ...] = ("t", "randomization", "both")
CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "none")

#: Monte Carlo sign matrices are drawn in blocks of about this many entries to bound memory.
_BLOCK_ENTRIES = 1 << 22
#: Enumerate every sign assignment only up to this many queries (2**16 rows).
_MAX_EXACT = 16


@dataclass(frozen=True)
class Comparison:
    """One run against the baseline on one measure."""

    run: str
    measure: str
    n: int  # queries both were evaluated on
    delta: float  # run average minus baseline average (as reported in the table)
    p_t: float  # NaN when undefined (fewer than two queries)
    p_randomization: float
    p_t_adjusted: float
    p_randomization_adjusted: float
    significant: bool


@dataclass
class Significance:
    """All comparisons against one baseline and the settings that produced them."""

    baseline: str
    comparisons: list[Comparison]
    test: str = "randomization"
    correction: str = "holm"
    alpha: float = 0.05
    permutations: int = 10000
    seed: int = 0

    def get(self, run: str, measure: str) -> Comparison | None:
        """The comparison of ``run`` on ``measure``, or None (the baseline itself)."""
        for comparison in self.comparisons:
            if comparison.run == run and comparison.measure == measure:
                return comparison
        return None

    def legend(self) -> str:
        """One line explaining the significance mark."""
        randomization = f"paired randomization test ({self.permutations} permutations, seed {self.seed})"
        test = {
            "t": "paired t-test",
            "randomization": randomization,
            "both": f"both the paired t-test and the {randomization}",
        }[self.test]
        correction = {"holm": "Holm-corrected", "bonferroni": "Bonferroni-corrected", "none": "uncorrected"}[
            self.correction
        ]
        return (
            f"† significantly different from the baseline {self.baseline} by {test}, {correction} over "
            f"{len(self.comparisons)} comparisons, alpha={self.alpha:g}."
        )


def paired_t_test(runs: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Two-sided paired t-test p-values, one per row of ``runs`` vs the same row of ``baseline``.

    Rows whose differences are all zero get p = 1 (no evidence of a difference); fewer than two
    queries give NaN.
    """
    from scipy import stats  # imported here: scipy costs ~0.3 s and only significance needs it

    diffs = runs - baseline
    if diffs.shape[-1] < 2:
        return np.full(diffs.shape[:-1], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # Identical differences on every query make scipy warn about precision loss; handled below.
        warnings.simplefilter("ignore", RuntimeWarning)
        p = np.asarray(stats.ttest_rel(runs, baseline, axis=-1).pvalue, dtype=float)
    constant = np.all(np.isclose(diffs, diffs[..., :1], rtol=0.0, atol=1e-12), axis=-1)
    # The same difference on every query: t is infinite (p = 0), or 0/0 when that difference is 0 (p = 1).
    p = np.where(constant, np.where(np.all(diffs == 0, axis=-1), 1.0, 0.0), p)
    return p


def randomization_test(diffs: np.ndarray, permutations: int = 10000, seed: int = 0) -> np.ndarray:
    """Two-sided paired randomization (sign-flip) test p-values, one per row of ``diffs`` (measure x query).

    All rows share the same sign assignments (they are the same queries). Exact when
    ``2**n <= permutations``; otherwise ``permutations`` random assignments from
    ``numpy.random.default_rng(seed)``, p = (hits + 1) / (permutations + 1).
    """
    if permutations < 1:
        raise RankkitError(f"--permutations must be at least 1, got {permutations}")
    diffs = np.atleast_2d(np.asarray(diffs, dtype=float))
    n = diffs.shape[1]
    if n == 0:
        return np.full(diffs.shape[0], np.nan)
    observed = np.abs(diffs.mean(axis=1))
    # A permuted mean "as extreme" within rounding of the observed one counts as a hit.
    threshold = observed - 1e-12 * np.maximum(1.0, observed)
    if n <= _MAX_EXACT and 2**n <= permutations:
        # Every sign assignment: bit j of row i says whether query j's difference is flipped.
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
        means = np.abs(signs @ diffs.T) / n
        return (means >= threshold).sum(axis=0) / 2**n
    rng = np.random.default_rng(seed)
    hits = np.zeros(diffs.shape[0], dtype=np.int64)
    block = max(1, _BLOCK_ENTRIES // n)
    done = 0
    while done < permutations:
        size = min(block, permutations - done)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8).astype(float) * 2.0 - 1.0
        means = np.abs(signs @ diffs.T) / n
        hits += (means >= threshold).sum(axis=0)
        done += size
    return (hits + 1) / (permutations + 1)


def adjust(p_values: Sequence[float], correction: str) -> np.ndarray:
    """Family-wise corrected p-values; NaN entries are left out of the family and stay NaN.

    Holm (1979) step-down: the i-th smallest of m p-values becomes max_{j<=i} min(1, (m-j+1) p_(j)).
    Bonferroni: min(1, m p).
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = valid.size
    if m == 0:
        return out
    if correction == "none":
        out[valid] = p[valid]
    elif correction == "bonferroni":
        out[valid] = np.minimum(1.0, p[valid] * m)
    elif correction == "holm":
        order = valid[np.argsort(p[valid], kind="stable")]
        scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
        out[order] = np.maximum.accumulate(scaled)
    else:
        raise RankkitError(f"unknown correction {correction!r} (choose holm, bonferroni or none)")
    return out


def _test_values(values: np.ndarray, how: str) -> np.ndarray:
    """Per-query values the tests compare: logs for geometric means (gm_map is a mean of logs)."""
    if how == "gmean":
        return np.log(np.maximum(values, MIN_GEO_MEAN))
    return values


def compare(
    result: EvalResult,
    baseline: str,
    *,
    test: str = "randomization",
    permutations: int = 10000,
    seed: int = 0,
    correction: str = "holm",
    alpha: float = 0.05,
) -> Significance:
    """Test every other run in ``result`` against ``baseline`` on every measure but the counters.

    Both tests are always computed (their p-values go to json/tsv); ``test`` chooses which one
    marks a difference as significant (``both``: both must agree).
    """
    if test not in TESTS:
        raise RankkitError(f"unknown test {test!r} (choose t, randomization or both)")
    if correction not in CORRECTIONS:
        raise RankkitError(f"unknown correction {correction!r} (choose holm, bonferroni or none)")
    if not 0.0 < alpha < 1.0:
        raise RankkitError(f"--alpha must be between 0 and 1, got {alpha}")
    if baseline not in result.runs:
        raise RankkitError(f"baseline {baseline} is not among the evaluated runs")
    base = result.runs[baseline]
    rows: list[tuple[str, str, int, float, float, float]] = []
    for name, run in result.runs.items():
        if name == baseline:
            continue
        base_col = {qid: i for i, qid in enumerate(base.qids)}
        pairs = [(i, base_col[qid]) for i, qid in enumerate(run.qids) if qid in base_col]
        run_cols = [i for i, _ in pairs]
        base_cols = [j for _, j in pairs]
        how = [s.aggregate for s in result.measures]
        run_values = np.stack([_test_values(run.values[i, run_cols], h) for i, h in enumerate(how)])
        base_values = np.stack([_test_values(base.values[i, base_cols], h) for i, h in enumerate(how)])
        p_t = paired_t_test(run_values, base_values)
        p_rand = randomization_test(run_values - base_values, permutations, seed)
        for i, spec in enumerate(result.measures):
            if spec.aggregate == "sum":
                continue  # counters (num_ret, num_q, ...) describe the input; they are not tested
            delta = run.aggregates[spec.label] - base.aggregates[spec.label]
            rows.append((name, spec.label, len(pairs), delta, float(p_t[i]), float(p_rand[i])))
    t_adj = adjust([r[4] for r in rows], correction)
    rand_adj = adjust([r[5] for r in rows], correction)
    comparisons = []
    for (name, label, n, delta, pt, pr), pt_adj, pr_adj in zip(rows, t_adj, rand_adj):
        t_sig = bool(not math.isnan(pt_adj) and pt_adj < alpha)
        r_sig = bool(not math.isnan(pr_adj) and pr_adj < alpha)
        significant = {"t": t_sig, "randomization": r_sig, "both": t_sig and r_sig}[test]
        comparisons.append(
            Comparison(name, label, n, delta, pt, pr, float(pt_adj), float(pr_adj), significant))
    return Significance(baseline, comparisons, test, correction, alpha, permutations, seed)
