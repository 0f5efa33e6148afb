"""scripts/test.sh's closing lines (scripts/ctest_runs.sh, scripts/rerun_report.py), on real ctest
runs of a small project: a test that passes, one that fails once and then passes (more than 15
lines of output), and optionally one that always fails.

The report names every test that needed a rerun with the last 15 lines of its first attempt, the
summary line of the last run stays the last line, and the exit status is ctest's.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)

PROJECT = """cmake_minimum_required(VERSION 3.20)
project(fake NONE)
enable_testing()
add_test(NAME "steady" COMMAND sh -c "echo fine")
add_test(NAME "flaky: one" COMMAND sh -c "seq 1 20 | sed 's/^/line /'; \\
  if [ -e '{flag}' ]; then echo second; else touch '{flag}'; echo 'boom: first attempt' >&2; exit 1; fi")
"""
BROKEN = 'add_test(NAME "broken" COMMAND sh -c "echo always; exit 3")\n'


def project(tmp_path, broken=False):
    if shutil.which("cmake") is None or shutil.which("ctest") is None:
        pytest.fail("cmake and ctest must be on PATH (the suite runs under ctest)")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(PROJECT.format(flag=tmp_path / "flag") + (BROKEN if broken else ""))
    subprocess.run(["cmake", "-S", src, "-B", tmp_path / "b"], check=True, capture_output=True)
    return tmp_path / "b"


def suite(tmp_path, runs):
    """Runs `runs` (lines of bash calling run_ctest) as scripts/test.sh does; (status, stdout lines)."""
    script = f"""set -euo pipefail
source {ROOT}/scripts/ctest_runs.sh
ctest_runs_begin
echo "$ctest_runs_dir" > {tmp_path}/runs_dir
status=0
{runs}
ctest_runs_end
exit $status
"""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=100)
    assert not pathlib.Path((tmp_path / "runs_dir").read_text().strip()).exists(), "the runs' records stay"
    return p.returncode, p.stdout.splitlines()


def test_a_test_that_passed_on_its_rerun_is_reported_above_the_summary(tmp_path):
    b = project(tmp_path)
    status, out = suite(tmp_path, f'run_ctest "fake (b/)" {b} -j 2 --repeat until-pass:2 || status=1')
    assert status == 0
    assert out[-1] == "100% tests passed, 0 tests failed out of 2"
    report = out[out.index("test: 1 test needed a rerun:"):-1]
    assert report[1] == ("  flaky: one [fake (b/)]: Failed, passed on the rerun; "
                         "the last 15 of 21 lines of the first attempt:")
    assert report[2:] == [f"    | line {i}" for i in range(7, 21)] + ["    | boom: first attempt"]


def test_a_failing_suite_keeps_its_status_and_its_summary_last(tmp_path):
    b = project(tmp_path, broken=True)
    status, out = suite(tmp_path, f'run_ctest "fake (b/)" {b} -j 2 --repeat until-pass:2 || status=1')
    assert status == 1
    assert out[-1] == "67% tests passed, 1 tests failed out of 3"
    start = out.index("test: 2 tests needed a rerun:")
    # The flaky one first; the broken one with all of its (short) output.
    assert out[start + 1].startswith("  flaky: one [fake (b/)]: Failed, passed on the rerun;")
    assert out[start + 17:-1] == ["  broken [fake (b/)]: Failed, failed again; the first attempt's output:",
                                  "    | always"]


def test_two_runs_as_in_the_quick_tier(tmp_path):
    b = project(tmp_path)
    runs = (f'run_ctest "first (b/)" {b} -R steady || status=1\n'
            f'run_ctest "second (b/)" {b} -R flaky --repeat until-pass:2 || status=1')
    status, out = suite(tmp_path, runs)
    assert status == 0
    assert out[-2:] == ["test: first (b/): 100% tests passed, 0 tests failed out of 1",
                        "100% tests passed, 0 tests failed out of 1"]
    assert "  flaky: one [second (b/)]: Failed, passed on the rerun; " \
           "the last 15 of 21 lines of the first attempt:" in out


def test_no_rerun_is_said(tmp_path):
    b = project(tmp_path)
    status, out = suite(tmp_path, f'run_ctest "fake (b/)" {b} -R steady --repeat until-pass:2 || status=1')
    assert status == 0
    assert out[-2:] == ["test: no test needed a rerun", "100% tests passed, 0 tests failed out of 1"]


def test_a_run_that_stops_before_its_tests_reports_no_stale_attempts(tmp_path):
    b = project(tmp_path)
    first = f'run_ctest "fake (b/)" {b} --repeat until-pass:2 || status=1'
    status, out = suite(tmp_path, first)
    assert status == 0 and "test: 1 test needed a rerun:" in out  # its LastTest.log holds a rerun
    (tmp_path / "runs_dir").unlink()
    status, out = suite(tmp_path, f'run_ctest "gone (b/)" {b} --repeat bogus || status=1')
    assert status == 1
    assert out[-2:] == ["test: no test needed a rerun", "test: gone (b/): no summary line (ctest stopped before it)"]
