"""The guards bench/run.sh checks on every run: each section prints one verdict line per guarded
row (into its Markdown, so RESULTS.md keeps them), and run.sh repeats them at the end of the run,
so that a drift shows in the run that causes it. The limits are the issue-46 guards; never loosen
one to make a run pass: report the measured figure.
"""

# Launch of N workers of /bin/true: ddplaunch's whole command over the whole-command floor (the
# median of per-repetition ratios, bench_launcher.py section 1).
LAUNCH_GUARDS = {1: 1.5, 8: 1.25, 32: 1.25}
# Store ping-pong and mix: ddplaunch-store's server CPU per op over the loopback floor's (the
# median of per-repetition ratios, bench_store.py section 3), at every connection count.
STORE_CPU_GUARD = 1.25
PREFIX = "- guard "


def verdict(what, ratio, limit, note=None):
    """One Markdown list line: `- guard pass: WHAT 1.31× (limit ≤ 1.5×)` or `- guard FAIL: ...`;
    `note` (how precise the figure is) goes inside the brackets."""
    word = "pass" if ratio <= limit else "FAIL"
    return f"{PREFIX}{word}: {what} {ratio:.2f}× (limit ≤ {limit:g}×{'; ' + note if note else ''})"
