"""The peer launchers besides the venv's torchrun, for the sections that run them side by side.

NVIDIA's ft_launcher (nvidia-resiliency-ext) lives in the bench's own venv, .bench-venv/, which
scripts/bench-peers-venv.sh makes (bench/run.sh calls it; it shares .venv's torch). Its path comes
from BENCH_FT_LAUNCHER, else <repo>/.bench-venv/bin/ft_launcher; where neither exists the sections
print ft_launcher's row as not run, with the reason.
"""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FT_LAUNCHER = os.environ.get("BENCH_FT_LAUNCHER") or os.path.join(REPO, ".bench-venv", "bin", "ft_launcher")
FT_PYTHON = os.path.join(os.path.dirname(FT_LAUNCHER), "python")


def ft_available():
    return os.access(FT_LAUNCHER, os.X_OK)


def ft_missing_note():
    return (f"ft_launcher not run: {FT_LAUNCHER} does not exist (bench/run.sh makes it with "
            "scripts/bench-peers-venv.sh).")


def ft_version():
    try:
        return subprocess.run([FT_PYTHON, "-c", "import importlib.metadata as m; print(m.version('nvidia-resiliency-ext'))"],
                              capture_output=True, text=True, timeout=60).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def launchers():
    """The launcher names a side-by-side section runs: ddplaunch, torchrun and, where installed, ft_launcher."""
    return ("ddplaunch", "torchrun") + (("ft_launcher",) if ft_available() else ())


# What the section notes say about ft_launcher here (checked on this machine with 0.4.1).
FT_GPU_NOTE = ("ft_launcher on this machine (no GPU, no NVIDIA driver): its launcher, rendezvous, restarts, rank "
               "monitors and heartbeat/section API run on CPU; what needs a GPU is off, each launch logging it: the "
               "GPU health check (NVML: \"GPU Health checks disabled: Unable to determine driver version due to: NVML "
               "Shared Library Not Found\"), the NIC health monitor (\"No such file or directory: /sys/class/infiniband\"), "
               "and, outside the launcher, the straggler detector's CUDA kernel timing (CUPTI) and the in-process "
               "restart's CUDA parts.")
