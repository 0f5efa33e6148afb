"""``python -m ddplaunch ARGS``: runs the ``ddplaunch`` executable installed with this package.

The executable lives in the scripts directory of the environment the package was installed into
(``<env>/bin``, or the user scheme's for ``pip install --user``). It replaces this process
(``execv``), so signals, the exit code and the process tree are exactly ddplaunch's own.
"""

import os
import sys
import sysconfig


def launcher_path() -> str:
    """The installed ``ddplaunch`` executable; raises SystemExit with a hint when it is missing."""
    schemes = [None, f"{os.name}_user"]
    dirs = []
    for scheme in schemes:
        try:
            dirs.append(sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts"))
        except KeyError:
            continue
    dirs.append(os.path.dirname(sys.executable))
    for d in dirs:
        candidate = os.path.join(d, "ddplaunch")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(
        "ddplaunch: the ddplaunch executable is not installed beside this Python (looked in "
        + ", ".join(dirs)
        + "); reinstall with `pip install --force-reinstall ddplaunch`"
    )


def main() -> None:
    exe = launcher_path()
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
