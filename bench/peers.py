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

COLORS = {"ddplaunch": "tab:blue", "torchrun": "tab:orange", "ft_launcher": "tab:green"}


def bar_plot(filename, title, groups, series, ylabel, log=False, note=None):
    """A grouped bar chart in bench/`filename`: one group per label in `groups`, one bar per launcher,
    series = {launcher: [value or None per group]} (None: not run or not ended, drawn as no bar).
    Returns the file's name for the Markdown, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(groups) * max(1, len(series)) / 2, 3.6))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        kept = [(x, v) for x, v in zip(xs, values) if v is not None]
        ax.bar([x for x, _ in kept], [v for _, v in kept], width, label=name, color=COLORS.get(name))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if note:
        ax.text(0.01, 0.98, note, transform=ax.transAxes, va="top", fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return filename
