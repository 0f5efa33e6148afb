"""Whether a cost grows linearly with N: a least-squares line and the log-log slope (bench_storm.py)."""
import math
import statistics


def fit(points):
    """Least squares y = a + b·n over (n, y) points, at least two distinct n: (b, R², k), where k is
    the log-log slope (y ∝ n^k over the points with y > 0; 1 is linear, 2 quadratic)."""
    ns, ys = [n for n, _ in points], [y for _, y in points]
    mn, my = statistics.fmean(ns), statistics.fmean(ys)
    sxx = sum((n - mn) ** 2 for n in ns)
    b = sum((n - mn) * (y - my) for n, y in points) / sxx
    a = my - b * mn
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-30
    r2 = 1 - sum((y - a - b * n) ** 2 for n, y in points) / ss_tot
    logs = [(math.log(n), math.log(y)) for n, y in points if y > 0]
    lx, ly = statistics.fmean(x for x, _ in logs), statistics.fmean(y for _, y in logs)
    k = sum((x - lx) * (y - ly) for x, y in logs) / (sum((x - lx) ** 2 for x, _ in logs) or 1e-30)
    return b, r2, k


def linear_word(r2, k):
    """The verdict the tables print: "linear" when the line fits (R² ≥ 0.9) and 0.8 ≤ k ≤ 1.2."""
    if r2 >= 0.9 and 0.8 <= k <= 1.2:
        return "linear"
    return "faster than linear" if k > 1.2 else ("slower than linear" if k < 0.8 else "not a clean line")
