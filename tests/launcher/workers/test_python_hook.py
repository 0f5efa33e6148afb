"""The Python worker hook (python/ddplaunch/worker_hook/sitecustomize.py) run by the venv's
interpreter with the launcher's environment contract, no launcher needed:
  PYTHONPATH=<hook dir>[:<user's>]  DDPLAUNCH_WORKER_SOCKET=<socket path>

A worker that imports torch serves ping / dump_traceback / fr_trace_json on the socket and removes
it at exit; one that never imports torch pays nothing and leaves nothing; everything else (the
user's sitecustomize, sys.argv, __main__, sys.path, python -m, multiprocessing spawn and
forkserver, DataLoader workers, output) is what it is without the hook. When there can be no
server (a torch without _WorkerServer, a path that cannot be bound) the worker is unaffected and
<socket>.unavailable says why, where it can be written. A worker exiting right after the server
started (normally, by an exception, by os._exit) exits as it would without the hook.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = pathlib.Path(__file__).resolve().parents[3]
HOOK = ROOT / "python" / "ddplaunch" / "worker_hook" / "sitecustomize.py"
PY = sys.executable  # ctest runs pytest with DDP_PYTHON, the venv with torch
RUN_TIMEOUT = 180


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket; a path longer than sun_path is reached through its directory's fd."""

    def __init__(self, path: str, timeout: float = 30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        if len(os.fsencode(self.unix_path)) > 107:
            fd = os.open(os.path.dirname(self.unix_path), os.O_PATH | os.O_DIRECTORY)
            try:
                s.connect(f"/proc/self/fd/{fd}/{os.path.basename(self.unix_path)}")
            finally:
                os.close(fd)
        else:
            s.connect(self.unix_path)
        self.sock = s


def ask(path: str, handler: str) -> tuple[int, bytes]:
    conn = UnixHTTPConnection(path)
    try:
        conn.request("POST", f"/handler/{handler}", headers={"Connection": "close"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture
def hook_dir(tmp_path):
    d = tmp_path / "hook"
    d.mkdir()
    shutil.copy(HOOK, d / "sitecustomize.py")
    return str(d)


def environment(hook_dir=None, socket_path=None, pythonpath=()):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DDPLAUNCH_WORKER_SOCKET")}
    env["OMP_NUM_THREADS"] = "1"
    path = ([hook_dir] if hook_dir else []) + [str(p) for p in pythonpath]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    if socket_path is not None:
        env["DDPLAUNCH_WORKER_SOCKET"] = str(socket_path)
    return env


def run(args, cwd, **kw):
    p = subprocess.run([PY] + list(args), cwd=cwd, env=environment(**kw), capture_output=True, text=True,
                       timeout=RUN_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def write(directory, name, text):
    path = pathlib.Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


# A worker that imports torch.distributed, says "ready" and waits for a line on stdin.
SERVING = """
import os, subprocess, sys
import torch.distributed

def wait_here():
    print("ready", "DDPLAUNCH_WORKER_SOCKET" in os.environ,
          b"DDPLAUNCH_WORKER_SOCKET" in subprocess.run(["env"], capture_output=True).stdout, flush=True)
    sys.stdin.readline()

wait_here()
print("done", flush=True)
"""


def serve_and_ask(tmp_path, hook_dir, socket_path):
    script = write(tmp_path, "serving.py", SERVING)
    p = subprocess.Popen([PY, script], cwd=tmp_path, env=environment(hook_dir, socket_path), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == "ready False False\n"  # gone from os.environ and children's
        answers = {h: ask(str(socket_path), h) for h in ("ping", "dump_traceback", "fr_trace_json")}
        out, err = p.communicate("\n", timeout=RUN_TIMEOUT)
    finally:
        p.kill()
        p.wait()
    assert (p.returncode, out, err) == (0, "done\n", "")  # and nothing on stderr: no c10d warnings
    assert answers["ping"] == (200, b"pong")
    status, traceback = answers["dump_traceback"]
    assert status == 200 and b"in wait_here" in traceback, traceback
    status, fr = answers["fr_trace_json"]
    assert status == 200 and "version" in json.loads(fr), fr
    assert not os.path.exists(socket_path), "the socket is removed at a normal exit"
    assert not os.path.exists(f"{socket_path}.unavailable")


def test_a_torch_distributed_worker_serves_its_socket(tmp_path, hook_dir):
    serve_and_ask(tmp_path, hook_dir, tmp_path / "w.sock")
    # The hook's .pyc is there for the workers that start later, also under PYTHONDONTWRITEBYTECODE
    # (which ctest sets): Python or the hook wrote it.
    assert os.listdir(os.path.join(hook_dir, "__pycache__")) == [
        f"sitecustomize.{sys.implementation.cache_tag}.pyc"]


def test_f_socket_path_longer_than_sun_path(tmp_path, hook_dir):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    socket_path = deep / "w.sock"
    assert len(os.fsencode(str(socket_path))) > 108
    serve_and_ask(tmp_path, hook_dir, socket_path)


def test_b_no_torch_no_socket_no_torch_module(tmp_path, hook_dir):
    script = write(tmp_path, "plain.py", "import sys\nprint(sorted(m for m in sys.modules if m.startswith('torch')))\n")
    sock = tmp_path / "w.sock"
    assert run([script], tmp_path, hook_dir=hook_dir, socket_path=sock) == (0, "[]\n", "")
    assert sorted(os.listdir(tmp_path)) == ["hook", "plain.py"]  # no socket, no note


# Prints what a script can see of its start: argv, __main__, sys.path, sitecustomize, the env.
INTROSPECT = """
import json, os, sys
import __main__
print(json.dumps({"argv": sys.argv, "main": getattr(__main__, "__file__", None), "name": __name__,
                  "path": sys.path, "meta_path": len(sys.meta_path) - ("sitecustomize" in repr(sys.meta_path)),
                  "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
                  "env": "DDPLAUNCH_WORKER_SOCKET" in os.environ}))
"""


def test_b_start_state_is_unchanged_without_torch(tmp_path, hook_dir):
    script = write(tmp_path, "intro.py", INTROSPECT)
    with_hook = run([script, "a", "--b"], tmp_path, hook_dir=hook_dir, socket_path=tmp_path / "w.sock")
    without = run([script, "a", "--b"], tmp_path)
    assert with_hook == without and with_hook[0] == 0


def test_c_user_sitecustomize_runs_once(tmp_path, hook_dir):
    count = tmp_path / "count"
    user = tmp_path / "user"
    # The user's sitecustomize imports torch itself: the server starts all the same.
    write(user, "sitecustomize.py", f"open({str(count)!r}, 'a').write('x')\nimport torch\nUSER = 1\n")
    sock = tmp_path / "w.sock"
    script = write(tmp_path, "check.py", f"""
import os, sys, sitecustomize
print(sitecustomize.USER, sitecustomize.__file__ == {str(user / 'sitecustomize.py')!r},
      os.path.exists({str(sock)!r}))
""")
    assert run([script], tmp_path, hook_dir=hook_dir, socket_path=sock, pythonpath=[user]) == (0, "1 True True\n", "")
    assert count.read_text() == "x"


def test_c_failing_user_sitecustomize_is_reported_as_without_the_hook(tmp_path, hook_dir):
    user = tmp_path / "user"
    write(user, "sitecustomize.py", "raise ValueError('user site broken')\n")
    script = write(tmp_path, "hi.py", "import sys\nprint('hi', 'sitecustomize' in sys.modules)\n")
    with_hook = run([script], tmp_path, hook_dir=hook_dir, socket_path=tmp_path / "w.sock", pythonpath=[user])
    assert with_hook == run([script], tmp_path, pythonpath=[user])
    assert "user site broken" in with_hook[2]


CHILDREN = """
import json, os, sys
import multiprocessing as mp
import torch, torch.distributed
from torch.utils.data import DataLoader, Dataset
import __main__

class Item:  # defined in __main__: spawn children unpickle it from there
    def __init__(self, value):
        self.value = value

def state():
    return {"argv": sys.argv, "main": getattr(sys.modules["__main__"], "__file__", None), "path": sys.path,
            "env": "DDPLAUNCH_WORKER_SOCKET" in os.environ}

def child(item, q):
    q.put(dict(state(), value=item.value))

class Numbers(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return json.dumps(dict(state(), value=i))

if __name__ == "__main__":
    out = {"parent": state()}
    for method in ("spawn", "forkserver"):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(Item(7), q))
        p.start()
        out[method] = q.get(timeout=120)
        p.join(120)
        out[method + " exit"] = p.exitcode
    out["loader"] = [json.loads(s) for s in DataLoader(Numbers(), num_workers=2, batch_size=None)]
    # A plain fork child that exits normally must not touch the parent's server.
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    out["fork exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    sock = sys.argv[1]
    out["sockets"] = sorted(f for f in os.listdir(os.path.dirname(sock)) if f.startswith("w.sock"))
    print(json.dumps(out))
"""


def test_d_multiprocessing_and_dataloader_children(tmp_path, hook_dir):
    script = write(tmp_path, "children.py", CHILDREN)
    sock = tmp_path / "w.sock"
    code, out, err = run([script, str(sock)], tmp_path, hook_dir=hook_dir, socket_path=sock)
    assert (code, err) == (0, ""), err
    with_hook = json.loads(out)
    code, out, err = run([script, str(sock)], tmp_path)
    assert code == 0, err
    without = json.loads(out)
    assert with_hook["sockets"] == ["w.sock"]  # one server: the parent's, still there
    assert without["sockets"] == []
    for run_ in (with_hook, without):
        run_.pop("sockets")
        assert run_["spawn"]["value"] == run_["forkserver"]["value"] == 7
        assert run_["spawn exit"] == run_["forkserver exit"] == run_["fork exit"] == 0
        assert [s["value"] for s in run_["loader"]] == [0, 1, 2, 3]
        assert not any(s["env"] for s in [run_["parent"], run_["spawn"], run_["forkserver"]] + run_["loader"])
    assert with_hook == without  # argv, __main__.__file__, sys.path of parent and children alike
    assert not sock.exists()


def test_e_python_dash_m(tmp_path, hook_dir):
    sock = tmp_path / "w.sock"
    write(tmp_path / "mods", "hello.py", f"""
import os, sys
import torch
print(sys.argv, __name__, __file__, sys.path[0])
print(os.path.exists({str(sock)!r}))
""")
    code, out, err = run(["-m", "hello", "x", "-y"], tmp_path / "mods", hook_dir=hook_dir, socket_path=sock)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == "True"
    code, out, err = run(["-m", "hello", "x", "-y"], tmp_path / "mods")
    assert (code, err) == (0, "") and out.splitlines() == [lines[0], "False"]


def test_g_old_torch_writes_the_note_and_changes_nothing(tmp_path, hook_dir):
    fake = tmp_path / "fake"
    write(fake / "torch", "__init__.py", "__version__ = '1.13.0-stub'\n")
    script = write(tmp_path, "old.py", "import torch, torch as t\nprint('hello', t.__version__)\n")
    sock = tmp_path / "w.sock"
    with_hook = run([script], tmp_path, hook_dir=hook_dir, socket_path=sock, pythonpath=[fake])
    assert with_hook == run([script], tmp_path, pythonpath=[fake]) == (0, "hello 1.13.0-stub\n", "")
    note = pathlib.Path(f"{sock}.unavailable").read_text()
    assert note.count("\n") == 1 and "1.13.0-stub" in note and "_WorkerServer" in note, note
    assert not sock.exists()


@pytest.mark.parametrize("case", ["missing directory", "existing file", "name too long"])
def test_h_unusable_socket_path_leaves_the_worker_alone(tmp_path, hook_dir, case):
    if case == "missing directory":
        sock = tmp_path / "no" / "such" / "dir" / "w.sock"
    elif case == "existing file":
        sock = tmp_path / "w.sock"
        sock.write_text("not a socket")
    else:
        sock = tmp_path / ("n" * 120)  # longer than sun_path even as /proc/self/fd/N/<name>
    script = write(tmp_path, "work.py", "import torch.distributed\nprint('trained')\n")
    assert run([script], tmp_path, hook_dir=hook_dir, socket_path=sock) == run([script], tmp_path)
    if case == "missing directory":
        assert not (tmp_path / "no").exists()
    else:
        note = pathlib.Path(f"{sock}.unavailable").read_text()
        assert note.count("\n") == 1, note


def test_imported_as_a_package_module_it_does_nothing(tmp_path):
    # A tool walking the ddplaunch package imports ddplaunch.worker_hook.sitecustomize: no effect.
    script = write(tmp_path, "walk.py", """
import os, sys
before = (list(sys.path), list(sys.meta_path), sys.modules.get("sitecustomize"))
import ddplaunch.worker_hook.sitecustomize
import torch
print(before == (list(sys.path), list(sys.meta_path), sys.modules.get("sitecustomize")),
      os.environ["DDPLAUNCH_WORKER_SOCKET"] == sys.argv[1], os.listdir(os.path.dirname(sys.argv[1])))
""")
    sock = tmp_path / "w.sock"
    assert run([script, str(sock)], tmp_path, socket_path=sock, pythonpath=[ROOT / "python"]) == (
        0, "True True ['walk.py']\n", "")


@pytest.mark.parametrize("code", ["import torch", "import torch; raise SystemExit(3)", "import torch; 1/0",
                                  "import torch, os; os._exit(4)"])
def test_exit_right_after_the_server_started(tmp_path, hook_dir, code):
    # No hang (torch's shutdown() before the server's loop runs would join forever), no crash, the
    # exit code and output of a run without the hook; the socket is removed unless os._exit.
    sock = tmp_path / "w.sock"
    with_hook = run(["-c", code], tmp_path, hook_dir=hook_dir, socket_path=sock)
    assert with_hook == run(["-c", code], tmp_path)
    assert sock.exists() == ("_exit" in code)
    assert not os.path.exists(f"{sock}.unavailable")
