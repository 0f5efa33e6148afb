# Fixtures for tests/security: the ddplaunch binary under test.
import pytest


def pytest_addoption(parser):
    parser.addoption("--ddplaunch", required=True, help="path of the ddplaunch binary")


@pytest.fixture(scope="session")
def ddplaunch(request):
    return request.config.getoption("--ddplaunch")
