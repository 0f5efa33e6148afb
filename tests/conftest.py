"""Fixtures shared by the Python suites: interop (tests/interop), the launcher's end-to-end tests
(tests/launcher) and the runtime's training end-to-end tests (tests/runtime). The helpers
themselves are in pyfixtures.py.

The binaries under test come from options that CMake passes (a test that needs one that was not
given fails rather than skips):
  --ddplaunch PATH        the launcher
  --store PATH            ddplaunch-store
  --train PATH            examples/train
  --ddp-step-worker PATH  tests/runtime/ddp_step_worker
  --straggler-worker PATH tests/launcher/straggler_worker (writes the progress table as the runtime does)

Fixtures:
  ddplaunch, store_binary, train, ddp_step_worker   absolute paths of those binaries
  procs         a pyfixtures.Processes for the test; its teardown kills everything the test
                started, also after a failure or a timeout
  start_store   start_store(host="127.0.0.1", port=0, args=()) -> a running pyfixtures.StoreServer;
                servers not stopped by the test are stopped at teardown (exit code 0 checked)
  store         one ddplaunch-store shared by the tests of a module, stopped (exit code 0
                checked) after the module's last test
Every test needs a time bound: pytest-timeout must be installed (scripts/setup.sh does).
"""

from __future__ import annotations

import os

import pytest

import pyfixtures

BINARIES = {
    "ddplaunch": "the ddplaunch launcher",
    "store": "ddplaunch-store",
    "train": "the example trainer (examples/train)",
    "ddp-step-worker": "tests/runtime/ddp_step_worker",
    "straggler-worker": "tests/launcher/straggler_worker",
}


def pytest_addoption(parser):
    group = parser.getgroup("ddplaunch", "binaries under test (CMake passes them)")
    for name, what in BINARIES.items():
        group.addoption(f"--{name}", metavar="PATH", help=f"path of {what}")


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError("pytest-timeout is not installed, and these tests need a time bound; "
                                "run scripts/setup.sh (or pip install pytest-timeout into the venv)")


def pytest_terminal_summary(terminalreporter):
    if pyfixtures.NOTES:
        terminalreporter.section("notes")
        for line in pyfixtures.NOTES:
            terminalreporter.write_line(line)


def _binary(config, name: str) -> str:
    path = config.getoption(name.replace("-", "_"))
    if not path:
        pytest.fail(f"--{name} was not given: run these tests through ctest, or pass --{name}=PATH", pytrace=False)
    path = os.path.abspath(path)
    if not os.access(path, os.X_OK):
        pytest.fail(f"--{name}={path} is not an executable file", pytrace=False)
    return path


@pytest.fixture(scope="session")
def ddplaunch(pytestconfig) -> str:
    return _binary(pytestconfig, "ddplaunch")


@pytest.fixture(scope="session")
def store_binary(pytestconfig) -> str:
    return _binary(pytestconfig, "store")


@pytest.fixture(scope="session")
def train(pytestconfig) -> str:
    return _binary(pytestconfig, "train")


@pytest.fixture(scope="session")
def ddp_step_worker(pytestconfig) -> str:
    return _binary(pytestconfig, "ddp-step-worker")


@pytest.fixture(scope="session")
def straggler_worker(pytestconfig) -> str:
    return _binary(pytestconfig, "straggler-worker")


@pytest.fixture
def procs():
    tracker = pyfixtures.Processes()
    yield tracker
    tracker.kill_all()


def _stop_all(servers) -> None:
    """Stops every server not stopped yet; raises the first contract violation after trying all."""
    problems = []
    for server in servers:
        try:
            server.stop()
        except AssertionError as e:
            problems.append(str(e))
    assert not problems, "\n".join(problems)


@pytest.fixture
def start_store(store_binary, procs):
    servers = []

    def start(host: str = "127.0.0.1", port: int = 0, args=()) -> pyfixtures.StoreServer:
        server = pyfixtures.StoreServer(store_binary, procs, host=host, port=port, args=args)
        servers.append(server)
        return server

    yield start
    _stop_all(servers)  # procs' teardown, which runs after this, kills whatever is left


@pytest.fixture(scope="module")
def store(store_binary):
    tracker = pyfixtures.Processes()
    try:
        server = pyfixtures.StoreServer(store_binary, tracker)
        yield server
        server.stop()
    finally:
        tracker.kill_all()
