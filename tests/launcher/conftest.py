def pytest_addoption(parser):
    parser.addoption("--ddplaunch", required=True, help="the ddplaunch binary under test")
