"""The statistics of an eval report: a mean with its 95% interval (Student's t), the median
and 90th percentile, Fisher's exact test for two pass rates and a permutation test (seeded,
so a report is reproducible) for two mean costs."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

# Student's t, two-sided 95%, by degrees of freedom (1-30); past 30 the normal 1.96 is within
# 2 % of it.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
PERMUTATIONS = 10_000
SEED = 20261201


def mean_interval(values: Sequence[float], floor: float | None = 0.0
                  ) -> dict[str, float | None]:
    """{mean, low, high}: the mean and its 95% interval (none with fewer than two values),
    its low end at least `floor` (a cost is never negative)."""
    if not values:
        return {"mean": None, "low": None, "high": None}
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "low": None, "high": None}
    sd = statistics.stdev(values)
    df = len(values) - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96
    half = t * sd / math.sqrt(len(values))
    low = mean - half if floor is None else max(floor, mean - half)
    return {"mean": mean, "low": low, "high": mean + half}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), interpolated between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def fisher_exact(a_pass: int, a_n: int, b_pass: int, b_n: int) -> float:
    """Two-sided p-value of Fisher's exact test on a 2x2 table (passes and fails of two
    groups): the probability, with the margins fixed, of a table as unlikely as this one."""
    total_pass = a_pass + b_pass
    n = a_n + b_n
    if n == 0 or a_n == 0 or b_n == 0:
        return 1.0
    denom = math.comb(n, total_pass)

    def prob(k: int) -> float:
        return math.comb(a_n, k) * math.comb(b_n, total_pass - k) / denom

    seen = prob(a_pass)
    low, high = max(0, total_pass - b_n), min(a_n, total_pass)
    p = sum(prob(k) for k in range(low, high + 1) if prob(k) <= seen * (1 + 1e-9))
    return min(1.0, p)


def permutation_test(a: Sequence[float], b: Sequence[float],
                     rounds: int = PERMUTATIONS) -> float:
    """Two-sided p-value that the means of `a` and `b` differ by as much as they do when
    the labels are shuffled ((hits + 1) / (rounds + 1), seeded)."""
    if len(a) < 2 or len(b) < 2:
        return 1.0
    observed = abs(statistics.fmean(a) - statistics.fmean(b))
    pooled = [*a, *b]
    rng = random.Random(SEED)
    hits = 0
    for _ in range(rounds):
        rng.shuffle(pooled)
        if abs(statistics.fmean(pooled[:len(a)]) - statistics.fmean(pooled[len(a):])) \
                >= observed - 1e-12:
            hits += 1
    return (hits + 1) / (rounds + 1)
