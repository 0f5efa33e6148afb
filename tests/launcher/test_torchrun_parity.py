"""torchrun parity: torchrun 2.15's flags and worker environment against ddplaunch's, and each of
torchrun's last knobs (issue 27) run end to end on tiny shell or Python workers.

The diffs are what make a new torch version's additions visible: every long flag in torchrun's
--help must be in ddplaunch's, and every variable torchrun sets for its workers must be set by
ddplaunch too, except for the short, commented lists of intended differences below. torchrun runs
once per module, in one interpreter (its --help text and one 2-worker run share the cost of
importing torch).
"""

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from launches import Launches
from pyfixtures import TAG_VAR, Processes

TORCHRUN_TIMEOUT = 180  # importing torch takes seconds of CPU, and the machine may be busy

# torchrun flags ddplaunch does not list, on purpose. An entry must still be torchrun's (checked),
# so the list cannot rot when torch drops a flag.
TORCHRUN_FLAGS_NOT_IN_DDPLAUNCH: set[str] = set()  # none today

# Variables torchrun's workers get that ddplaunch's do not, on purpose.
TORCHRUN_ENV_NOT_IN_DDPLAUNCH = {
    # Python's own locale coercion (PEP 538) in torchrun's interpreter when the locale is C; not
    # torchrun's doing, and a C/C++ launcher has no reason to copy it.
    "LC_CTYPE",
}

ENV_DUMP = """#!/bin/sh
env > "$DUMP_DIR/env.$LOCAL_RANK"
"""

# torchrun's --help (the parser's own text) and one run of ENV_DUMP on 2 workers, in one process.
TORCHRUN_SCRIPT = """
import sys
import torch.distributed.run as run
with open(sys.argv[1], "w") as f:
    f.write(run.get_args_parser().format_help())
run.main(sys.argv[2:])
"""


def long_flags(help_text, cli11=False):
    """The long flags of the option lines of a --help text: lines that start with two spaces and a
    dash. Only the option's names count, not its help (which mentions other flags): argparse
    writes "--a-b A_B, --a_b A_B" and then at least two spaces; CLI11 writes "--a_b,--a-b" as the
    first word."""
    flags = set()
    for line in help_text.splitlines():
        if not re.match(r"^  -", line):
            continue
        names = line.split()[0] if cli11 else re.split(r"\s{2,}", line.strip())[0]
        flags.update(re.findall(r"--[a-zA-Z][\w-]*", names))
    return flags


def read_env(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def base_env(directory):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_", "OMP_"))}
    env.pop("LOGLEVEL", None)
    env["DUMP_DIR"] = str(directory)
    return env


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    """torchrun's --help text, and the names torchrun set in its workers' environment."""
    directory = tmp_path_factory.mktemp("torchrun")
    dump = directory / "dump.sh"
    dump.write_text(ENV_DUMP)
    dump.chmod(0o755)
    procs = Processes()
    try:
        env = base_env(directory)
        rc, out, err, _ = procs.run(
            [sys.executable, "-c", TORCHRUN_SCRIPT, str(directory / "help.txt"), "--standalone",
             "--nproc_per_node=2", "--no-python", str(dump)],
            timeout=TORCHRUN_TIMEOUT, env=env, cwd=str(directory))
        assert rc == 0, err
        names = set(read_env(directory / "env.0")) - set(env) - {TAG_VAR}
        yield {"help": (directory / "help.txt").read_text(), "env_names": names}
    finally:
        procs.kill_all()


@pytest.fixture
def lx(ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    yield launches
    launches.kill_workers()


# ----------------------------------------------------------------------------------------- the diffs
def test_every_torchrun_flag_is_a_ddplaunch_flag(torchrun, ddplaunch):
    ours = long_flags(subprocess.run([ddplaunch, "--help"], capture_output=True, text=True, check=True).stdout,
                      cli11=True)
    theirs = long_flags(torchrun["help"])
    assert "--nproc-per-node" in theirs and "--nproc_per_node" in ours  # both texts were read
    assert TORCHRUN_FLAGS_NOT_IN_DDPLAUNCH <= theirs, "an intended difference is no longer torchrun's"
    missing = theirs - ours - TORCHRUN_FLAGS_NOT_IN_DDPLAUNCH
    assert not missing, f"torchrun flags ddplaunch does not have: {sorted(missing)}"


def test_torchrun_worker_variables_are_set_by_ddplaunch(torchrun, lx):
    dump = lx.script("dump.sh", ENV_DUMP)
    env = base_env(lx.dir)
    rc, _, err = lx.run(["--standalone", "--nproc_per_node=2", "--no_python", dump], env=env)
    assert rc == 0, err
    ours = set(read_env(os.path.join(lx.dir, "env.0"))) - set(env)
    theirs = torchrun["env_names"]
    assert {"RANK", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_SIGNALS_TO_HANDLE"} <= theirs  # the dump was read
    missing = theirs - ours - TORCHRUN_ENV_NOT_IN_DDPLAUNCH
    assert not missing, f"variables torchrun sets for its workers that ddplaunch does not: {sorted(missing)}"


# ------------------------------------------------------------------------------------------ the knobs
def test_abbreviated_flags_as_argparse_takes_them(lx):
    dump = lx.script("dump.sh", ENV_DUMP)
    rc, _, err = lx.run(["--nnode", "1", "--nproc", "2", "--master_p", "0", "--no_py", dump, "--nproc", "x"],
                        env={"DUMP_DIR": lx.dir})
    assert rc == 0, err
    assert read_env(os.path.join(lx.dir, "env.1"))["WORLD_SIZE"] == "2"
    rc, _, err = lx.run(["--master", "127.0.0.1", "--no_python", dump])
    assert rc == 2
    assert err.strip().splitlines()[-1].endswith(
        "--master is ambiguous: --master_addr, --master_port; write the flag out (see ddplaunch --help)")


def test_run_path_runs_the_script_as_torchrun_does(lx):
    sub = os.path.join(lx.dir, "sub")
    os.mkdir(sub)
    script = os.path.join(sub, "train.py")
    with open(script, "w") as f:
        f.write("import json, os, sys\n"
                "print(json.dumps({'name': __name__, 'argv': sys.argv, 'path0': sys.path[0]}))\n"
                "if sys.argv[1] == 'fail': raise ValueError('bad batch')\n")
    rc, out, err = lx.run(["--run_path", "--nproc_per_node=1", script, "ok", "--x=1"])
    assert rc == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["name"] == "__main__" and seen["argv"] == [script, "ok", "--x=1"]
    assert seen["path0"] != sub  # runpy.run_path does not put the script's directory first
    log_dir = os.path.join(lx.dir, "logs")
    rc, _, err = lx.run(["--run_path", "--nproc_per_node=1", "--log_dir", log_dir, script, "fail"])
    assert rc == 1
    [run_dir] = os.listdir(log_dir)
    with open(os.path.join(log_dir, run_dir, "attempt_0", "0", "error.json")) as f:
        assert json.load(f)["message"]["message"] == "ValueError: bad batch"  # as torchrun's @record


def test_hostname_in_the_prefix_from_the_flag_or_torchrun_variable(lx):
    hello = lx.script("hello.sh", "#!/bin/sh\necho hello\n")
    host = socket.gethostname()
    rc, out, err = lx.run(["--nproc_per_node=2", "--log_line_prefix_template=${hostname}:${rank}: ",
                           "--no_python", hello])
    assert rc == 0, err
    assert sorted(out.splitlines()) == [f"{host}:0: hello", f"{host}:1: hello"]
    rc, out, err = lx.run(["--nproc_per_node=2", "--no_python", hello],
                          env={"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "<${role_name}${local_rank}>"})
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["<default0>hello", "<default1>hello"]


def test_duplicate_filters_copy_matching_tee_lines_to_one_file(lx):
    prog = lx.script("train.sh", '#!/bin/sh\necho "step $RANK"\necho "loss,acc $RANK"\necho "oops $RANK" >&2\n')
    log_dir = os.path.join(lx.dir, "logs")
    rc, out, err = lx.run(["--nproc_per_node=2", "--tee=3", "--log_dir", log_dir,
                           "--duplicate-stdout-filters", "loss,,acc", "--duplicate_stderr_filters=oops",
                           "--no_python", prog])
    assert rc == 0, err
    [run_dir] = os.listdir(log_dir)
    attempt = os.path.join(log_dir, run_dir, "attempt_0")
    with open(os.path.join(attempt, "filtered_stdout.log")) as f:
        assert sorted(f.read().splitlines()) == ["[0]:loss,acc 0", "[1]:loss,acc 1"]
    with open(os.path.join(attempt, "filtered_stderr.log")) as f:
        assert sorted(f.read().splitlines()) == ["[0]:oops 0", "[1]:oops 1"]
    assert "[0]:step 0" in out  # the console still gets everything


def test_python_only_knobs(lx):
    true = lx.script("true.sh", "#!/bin/sh\n")
    rc, _, err = lx.run(["--logs_specs=custom", "--no_python", true])
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "use --log_dir DIR with --redirects/--tee" in err
    rc, _, err = lx.run(["--start-method=fork", "--event_log_handler=console", "--no_python", true])
    assert rc == 0, err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert events and all("event" in e for e in events), err
    rc, _, err = lx.run(["--nproc_per_node=xpu", "--no_python", true], env={"ZE_AFFINITY_MASK": ""})
    assert rc == 2 and "no Intel XPU is visible" in err


def test_shutdown_timeout_and_loglevel_from_torchrun_variables(lx):
    # Rank 0 ignores SIGTERM, then tells rank 1 through a FIFO, which then fails: rank 0 is killed
    # after TORCH_ELASTIC_SHUTDOWN_TIMEOUT, not the default 30 s (beyond this run's bound).
    fifo = os.path.join(lx.dir, "ready")
    os.mkfifo(fifo)
    prog = lx.script("w.sh", '#!/bin/sh\nif [ "$LOCAL_RANK" = 0 ]; then trap "" TERM; echo > "$FIFO"; exec sleep 60; fi\n'
                     'read x < "$FIFO"\nexit 3\n')
    rc, _, err = lx.run(["--nproc_per_node=2", "--no_python", prog],
                        env={"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "0.2", "FIFO": fifo}, timeout=20)
    assert rc == 3, err
    true = lx.script("true.sh", "#!/bin/sh\n")
    _, _, chatty = lx.run(["--no_python", true])
    _, _, quiet = lx.run(["--no_python", true], env={"LOGLEVEL": "WARNING"})
    assert "ddplaunch: " in chatty and "ddplaunch: " not in quiet
