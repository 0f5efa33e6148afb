"""The TorchFT suite's option: where torchft's own venv is (scripts/torchft_venv.sh makes it)."""


def pytest_addoption(parser):
    parser.getgroup("ddplaunch").addoption(
        "--torchft-venv", metavar="PATH", help="venv with torchft over the project's .venv (default: .venv-torchft)")
