#!/usr/bin/env python3
"""The closing lines of scripts/test.sh: which tests needed a rerun, then the suites' summaries.

    rerun_report.py RUNS_DIR [LINES]

RUNS_DIR holds one set of files per ctest run, numbered in the order they ran (scripts/ctest_runs.sh
writes them):
  N.label     what the run was, e.g. "main suite (build/)"
  N.console   ctest's standard output (for the result of each attempt and the summary line)
  N.attempts  the run's Testing/Temporary/LastTest.log: every attempt of every test, its whole
              output between "Output:" and "<end of output>", then "Test Passed." or "Test Failed."
A test that ran more than once (`--repeat until-pass:2`) needed a rerun. Each is printed with what
its first attempt ended in (ctest's word: Failed, Timeout, Exception: ...) and that attempt's last
LINES lines of output (default 15). Then every run's summary line ("N% tests passed, ..."); the last
run's is printed last and unchanged, so that it stays the last line of the log.

Exit status 0 (the suite's status is test.sh's); 2 on a usage error.
"""

from __future__ import annotations

import pathlib
import re
import sys

TESTING = re.compile(r"^\d+/\d+ Testing: (.*)$")
RESULT = re.compile(r"^Test (Passed|Failed)\.?")
START = re.compile(r"^ *Start +(\d+): (.*)$")
# "3/7 Test #2: name ....***Failed    0.02 sec" (first attempt) or "    Test #2: ..." (a repeat).
DONE = re.compile(r"^(?:\d+/\d+ | *)Test +#(\d+): .*? \.+ *(?:\*\*\*)?(.*?) +[\d.]+ sec$")
SUMMARY = re.compile(r"^\d+% tests passed, \d+ tests? failed out of \d+$")


class Attempt:
    def __init__(self, name):
        self.name = name
        self.output = []
        self.passed = False


def attempts(text):
    """Every attempt in a LastTest.log, in the order ctest finished them."""
    out = []
    state = "between"  # -> "dashes" after "Output:" -> "output" until "<end of output>"
    for line in text.splitlines():
        if state == "output":
            if line == "<end of output>":
                state = "between"
            else:
                out[-1].output.append(line)
            continue
        if state == "dashes":  # the rule ctest draws under "Output:"
            state = "output"
            continue
        m = TESTING.match(line)
        if m:
            out.append(Attempt(m.group(1)))
        elif out and line == "Output:":
            state = "dashes"
        elif out and RESULT.match(line):
            out[-1].passed = RESULT.match(line).group(1) == "Passed"
    return out


def console_results(text):
    """Test name -> what each of its attempts ended in, from ctest's console lines."""
    names = {}
    results = {}
    for line in text.splitlines():
        m = START.match(line)
        if m:
            names[m.group(1)] = m.group(2)
            continue
        m = DONE.match(line)
        if m and m.group(1) in names:
            results.setdefault(names[m.group(1)], []).append(m.group(2))
    return results


def summary_line(text):
    found = [line for line in text.splitlines() if SUMMARY.match(line)]
    return found[-1] if found else None


def read(path):
    return path.read_text(errors="replace") if path.exists() else ""


def report(runs_dir, last_lines=15):
    runs_dir = pathlib.Path(runs_dir)
    numbers = sorted(int(p.stem) for p in runs_dir.glob("*.label"))
    lines = []
    reruns = []
    summaries = []
    for n in numbers:
        label = read(runs_dir / f"{n}.label").strip()
        console = read(runs_dir / f"{n}.console")
        by_name = {}
        for a in attempts(read(runs_dir / f"{n}.attempts")):
            by_name.setdefault(a.name, []).append(a)
        results = console_results(console)
        for name, tries in by_name.items():
            if len(tries) > 1:
                reruns.append((label, name, tries, results.get(name, [])))
        summaries.append((label, summary_line(console)))

    if not reruns:
        lines.append("test: no test needed a rerun")
    else:
        lines.append(f"test: {len(reruns)} test{'s' if len(reruns) != 1 else ''} needed a rerun:")
        # The ones that passed on the rerun (the flaky ones) first; a test that failed both times
        # is in ctest's list of failures as well.
        reruns.sort(key=lambda r: not r[2][-1].passed)
        for label, name, tries, results in reruns:
            first = results[0] if results else "Failed"
            outcome = "passed on the rerun" if tries[-1].passed else "failed again"
            output = list(tries[0].output)
            while output and not output[-1].strip():
                output.pop()
            if not output:
                lines.append(f"  {name} [{label}]: {first}, {outcome}; the first attempt printed nothing")
                continue
            if len(output) <= last_lines:
                lines.append(f"  {name} [{label}]: {first}, {outcome}; the first attempt's output:")
            else:
                lines.append(f"  {name} [{label}]: {first}, {outcome}; the last {last_lines} of "
                             f"{len(output)} lines of the first attempt:")
            lines.extend("    | " + line for line in output[-last_lines:])
    for i, (label, summary) in enumerate(summaries):
        if summary is None:
            lines.append(f"test: {label}: no summary line (ctest stopped before it)")
        else:
            lines.append(summary if i == len(summaries) - 1 else f"test: {label}: {summary}")
    return lines


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and not argv[2].isdigit()):
        print("usage: rerun_report.py RUNS_DIR [LINES]", file=sys.stderr)
        return 2
    for line in report(argv[1], int(argv[2]) if len(argv) == 3 else 15):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
