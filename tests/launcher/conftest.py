"""Fixtures of the launcher's end-to-end suites (tests/launcher/*.py); the shared ones are in
tests/conftest.py. A suite that defines its own fixture of the same name uses its own.

  lx    a launches.Launches in the test's own directory; workers that wrote their pid are
        killed at teardown (procs kills the launchers and everything they started)
  launches  the same, under the name some suites use
"""
import pytest

from launches import Launches


@pytest.fixture
def lx(ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    yield launches
    launches.kill_workers()


@pytest.fixture
def launches(lx):
    return lx
