"""The bench tools' suite: --bench-bin names the build's bin directory holding rendezvous_scale
and ddplaunch-store (a build with DDP_BENCH=ON); without it the storm test is skipped."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def pytest_addoption(parser):
    parser.addoption("--bench-bin", metavar="DIR", default=None, help="bin directory with rendezvous_scale")
