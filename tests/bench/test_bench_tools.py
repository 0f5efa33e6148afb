"""The bench's own tools (bench/): the guard verdicts bench/run.sh prints, the linear fit of the
storm tables, and every storm pattern of rendezvous_scale against ddplaunch-store."""
import os
import subprocess

import pytest

import guards
from linear_fit import fit, linear_word

pytestmark = pytest.mark.timeout(120)


def test_guard_verdict_says_pass_at_the_limit_and_fail_above_it():
    assert guards.verdict("launch of 1 worker", 1.5, guards.LAUNCH_GUARDS[1]) == \
        "- guard pass: launch of 1 worker 1.50× (limit ≤ 1.5×)"
    assert guards.verdict("launch of 8 workers", 1.31, guards.LAUNCH_GUARDS[8]) == \
        "- guard FAIL: launch of 8 workers 1.31× (limit ≤ 1.25×)"
    assert guards.verdict("store mix at 16 conns", 1.2, guards.STORE_CPU_GUARD, "±7%") == \
        "- guard pass: store mix at 16 conns 1.20× (limit ≤ 1.25×; ±7%)"
    assert guards.LAUNCH_GUARDS == {1: 1.5, 8: 1.25, 32: 1.25}
    assert guards.STORE_CPU_GUARD == 1.25


def test_fit_tells_linear_from_quadratic():
    sizes = (1000, 2000, 5000, 10000, 19871)
    b, r2, k = fit([(n, 3e-6 * n + 0.001) for n in sizes])
    assert b == pytest.approx(3e-6) and r2 == pytest.approx(1.0)
    assert linear_word(r2, k) == "linear"
    _, r2, k = fit([(n, 1e-9 * n * n) for n in sizes])
    assert k == pytest.approx(2.0) and linear_word(r2, k) == "faster than linear"


@pytest.mark.parametrize("pattern", ["wait", "get", "add", "multiget"])
def test_storm_pattern_runs_every_rank_to_the_end(pattern, pytestconfig):
    bin_dir = pytestconfig.getoption("--bench-bin")
    if not bin_dir:
        pytest.skip("no --bench-bin (rendezvous_scale is built with DDP_BENCH=ON)")
    import bench_rendezvous
    import bench_storm
    from bench_servers import Ours
    bench_rendezvous.BIN = bin_dir
    with Ours(bin_dir) as server:
        r = bench_storm.storm(server, 64, pattern)
        # Every rank answered: the storm has a positive time, the connect phase took CPU or not, and
        # the server still answers (no rank left it in a bad state).
        assert 0 < r["seconds"] < 30
        assert r["cpu_connect"] >= 0 and r["cpu_storm"] >= 0
        again = bench_storm.storm(server, 64, pattern)
        assert 0 < again["seconds"] < 30


def test_rendezvous_scale_rejects_an_unknown_pattern(pytestconfig):
    bin_dir = pytestconfig.getoption("--bench-bin")
    if not bin_dir:
        pytest.skip("no --bench-bin (rendezvous_scale is built with DDP_BENCH=ON)")
    p = subprocess.run([os.path.join(bin_dir, "rendezvous_scale"), "127.0.0.1", "1", "4", "0", "4", "--pattern", "bogus"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "unknown --pattern bogus (init, wait, get, add or multiget)" in p.stderr
