"""Fixtures of the ssh launch's tests (ssh_hosts.py): the namespace hosts with their sshd, made once
per test module, and no controller (nor, through it, any host's job) left by a test that failed."""
import pytest

from ssh_hosts import end_started, site_fixture


@pytest.fixture(scope="module")
def site(ddplaunch, tmp_path_factory):
    yield from site_fixture(ddplaunch, tmp_path_factory)


@pytest.fixture(autouse=True)
def no_controller_left():
    """A test that failed half-way leaves no controller (nor, through it, any host's job) running."""
    yield
    end_started()
