# ddplaunch's worker hook. The launcher writes this file as <run dir>/python/sitecustomize.py, puts
# that directory first on each Python worker's PYTHONPATH and names a unix socket in
# DDPLAUNCH_WORKER_SOCKET. When the worker first imports torch, this starts torch's worker server
# (torch._C._distributed_c10d._WorkerServer, what torch.distributed.elastic.control_plane.
# worker_main() starts) on that socket, so the launcher can ask for the Flight Recorder
# (POST /handler/fr_trace_json) and Python stacks (POST /handler/dump_traceback), also of
# unmodified scripts. If that cannot be done, it writes one line saying why to
# "<socket>.unavailable" and leaves the worker alone: it never raises, never prints.
#
# It ships in the ddplaunch package (python/ddplaunch/worker_hook/) only to be read: nothing there
# imports it, and imported under any name but site.py's "sitecustomize" it does nothing.
import os
import sys

_SOCKET = None  # DDPLAUNCH_WORKER_SOCKET (taken at the end of this file)
_HERE = os.path.dirname(__file__)  # exactly the sys.path entry site.py found us through
_pid = os.getpid()  # the worker; a forked child importing torch first starts no server of its own


class _Finder:
    """First on sys.meta_path while torch has not been imported: a name compare per import. It
    stays there once done: removing it from the live list while another thread walks it would
    make that walk skip the next finder."""

    done = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if cls.done or name != "torch":
            return None
        if "_torch_spec" not in globals():
            exec(compile(_SERVER, __file__, "exec"), globals())
        return _torch_spec(cls, name, path, target)


# The rest is compiled only when torch is first imported (_Finder). As plain code, its compiling
# made every start without a .pyc (PYTHONDONTWRITEBYTECODE, common in containers) 0.9 ms slower,
# torch or not (+2.4 ms instead of +1.4 ms for `python -c pass`; with a .pyc both cost +0.15 ms).
_SERVER = r'''
_server = None  # the _WorkerServer, kept for good (see _start)
_dir_fd = None  # the socket's directory, when its path is too long to bind directly
_bind_path = None  # what the server was given: the socket path or /proc/self/fd/N/name
_in_flight = 0  # ddplaunch's handlers running now (each holds the GIL while it counts)


def _note(reason):
    # The launcher reads this once and says the worker runs without its server.
    try:
        with open(_SOCKET + ".unavailable", "w") as f:
            f.write(" ".join(str(reason).split()) + "\n")
    except (OSError, ValueError):
        pass  # nowhere to say it (the directory is gone or unwritable): the launcher sees no socket


def _quiet_c10():
    # torch logs "Server listening/shutting down/exited" as C++ warnings on the worker's stderr;
    # this is the c10 log level to raise around those calls (None if this torch has no such flag).
    import ctypes
    import torch

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
        return ctypes.c_int.in_dll(lib, "FLAGS_caffe2_log_level")
    except (OSError, ValueError):
        return None


def _quietly(call):
    level = _quiet_c10()
    old = level.value if level is not None else None
    if level is not None:
        level.value = 2  # errors only, for the few ms of the call (other threads' warnings too)
    try:
        return call()
    finally:
        if level is not None:
            level.value = old


def _cache_bytecode():
    # Python writes this file's .pyc into the hook directory (the launcher's, private to the run)
    # unless PYTHONDONTWRITEBYTECODE says not to; then every worker compiled it, ~1 ms. Written
    # here, it serves the workers and children that start later (restarts, spawned children).
    if not sys.dont_write_bytecode:
        return
    try:
        import importlib.util
        import py_compile

        if not os.path.exists(importlib.util.cache_from_source(__file__)):
            py_compile.compile(__file__, doraise=True)
    except Exception:
        pass  # a read-only or full run directory: workers compile the hook, as before


def _register_handlers():
    # ddplaunch's handlers on torch's worker server (launcher/watch/fr/watch.hpp says
    # what the launcher asks): torch's own Flight Recorder dumps, each process group's members
    # added from the process groups themselves (gloo's recorder keys them all by an empty name).
    import json
    import pickle

    import torch._C._distributed_c10d as c10d

    def groups():
        # pg_names holds the groups this process is a member of, in the order it made them: the
        # order in which the recorder numbers them (its "pg_id", which keys pg_status).
        from torch.distributed import distributed_c10d as d
        w = d._world
        return {
            name: {"name": name, "desc": getattr(pg, "group_desc", "") or "", "pg_id": str(i),
                   "ranks": str(sorted(w.pg_group_ranks.get(pg, {})))}
            for i, (pg, name) in enumerate(list(w.pg_names.items()))
        }

    def records(form):
        # form: "status" (counters only), "json" (every entry, torch's JSON: fast, no frames) or
        # "pickle" (torch's dump with frames; unpickling it may import much of torch the first
        # time, so only for the dump files).
        per_backend = {}
        for backend in ("gloo", "nccl"):
            try:
                if form == "pickle":
                    d = pickle.loads(c10d._dump_fr_trace(backend=backend))
                else:
                    d = json.loads(c10d._dump_fr_trace_json(includeCollectives=form == "json", backend=backend))
            except Exception:  # no such recorder in this build (no NCCL): nothing to say
                continue
            if d.get("pg_status") or d.get("entries"):
                d["pg_config"] = groups()
                per_backend[backend] = d
        return per_backend

    def merged(per_backend):
        out = {"pg_config": groups(), "pg_status": {}, "entries": []}
        for d in per_backend.values():
            out["version"] = d.get("version")
            out["pg_status"].update(d.get("pg_status") or {})
            out["entries"].extend(d.get("entries") or [])
        return json.dumps(out, default=str)

    def dump(per_backend):
        # torch's dump format, as fr_trace reads it: <run dir>/fr_<backend>_rank_<rank>.
        rank = int(os.environ.get("RANK", "0"))
        folder = os.path.dirname(_SOCKET)
        for backend, d in per_backend.items():
            path = os.path.join(folder, "fr_%s_rank_%d" % (backend, rank))
            with open(path + ".tmp", "wb") as f:
                pickle.dump(d, f)
            os.replace(path + ".tmp", path)

    def handler(form, write):
        def handle(req, res):
            global _in_flight
            _in_flight += 1
            try:
                per_backend = records(form)
                if write:
                    dump(per_backend)
                res.set_content(merged(per_backend), "application/json")
                res.set_status(200)
            finally:
                _in_flight -= 1
        return handle

    entered_after = {}  # backend -> the newest entry time already answered

    def entries(req, res):
        # Straggler detection (docs/stragglers.md): each collective entered since the last ask,
        # one line each, "<group name> <collective #> <time_created_ns> <op><sizes>". torch's
        # pickled dump without stacks is the cheapest whole read of the ring (about half its JSON).
        global _in_flight
        _in_flight += 1
        try:
            lines = []
            for backend in ("gloo", "nccl"):
                try:
                    d = pickle.loads(c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False,
                                                         backend=backend))
                except Exception:  # no such recorder in this build (no NCCL): nothing to say
                    continue
                after = entered_after.get(backend, 0)
                newest = after
                for e in d.get("entries") or ():
                    t = int(e.get("time_created_ns") or 0)
                    if t <= after or e.get("is_p2p"):
                        continue
                    newest = max(newest, t)
                    name = (e.get("process_group") or ("?",))[0] or "?"
                    sig = "%s%s" % (e.get("profiling_name", ""), e.get("input_sizes", ""))
                    lines.append("%s %d %d %s" % (name, int(e.get("collective_seq_id", 0)), t, sig.replace(" ", "")))
                entered_after[backend] = newest
            res.set_content("\n".join(lines), "text/plain")
            res.set_status(200)
        finally:
            _in_flight -= 1

    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(entries))
    c10d._register_handler("ddplaunch_fr_entries", entries)
    for name, form, write in (("ddplaunch_fr_status", "status", False), ("ddplaunch_fr", "json", False),
                              ("ddplaunch_fr_dump", "pickle", True)):
        handle = handler(form, write)
        # Kept for good, as the server is: torch's registry frees its handlers after the
        # interpreter is gone, and freeing a closure then aborts the process (exit code 134).
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
        c10d._register_handler(name, handle)


def _start():
    global _server, _dir_fd, _bind_path
    if os.getpid() != _pid:
        return
    _cache_bytecode()
    try:
        from torch._C._distributed_c10d import _WorkerServer
    except Exception as e:
        import torch

        return _note(f"torch {getattr(torch, '__version__', '?')} has no _WorkerServer ({e})")
    try:
        path = _SOCKET
        if len(os.fsencode(path)) > 107:  # sun_path holds 108 bytes with the NUL
            _dir_fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
            path = f"/proc/self/fd/{_dir_fd}/{os.path.basename(path)}"
            if len(os.fsencode(path)) > 107:
                return _note(f"the socket's name is too long to bind: {os.path.basename(_SOCKET)}")
        server = _quietly(lambda: _WorkerServer(path))
    except Exception as e:
        return _note(f"the worker server did not start on {_SOCKET}: {e}")
    # Never destroyed: its destructor shuts it down, which in a forked child (os.fork, a fork
    # DataLoader worker) would shut the parent's listening socket and join a thread that is not
    # there. At exit, the process that started it removes its socket (_stop).
    import atexit
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(server))
    _server, _bind_path = server, path
    atexit.register(_stop)
    try:
        _register_handlers()
    except Exception as e:  # an older torch without _register_handler: stacks still answer
        _note(f"the Flight Recorder handlers could not be registered: {e}")


def _stop():
    # At exit of the process that started it (atexit is inherited by forked children, which must
    # not touch it): the socket goes, so nothing new can reach the server; the server itself is
    # left to the end of the process. torch's shutdown() holds the GIL while it joins its handler
    # threads, and a handler in flight (ddplaunch's status poll, dump_traceback) needs the GIL:
    # shutting it down could hang the worker's exit. os._exit and signals skip this: the launcher
    # removes the socket when it sees the worker exit.
    global _server
    server, _server = _server, None
    if server is None or os.getpid() != _pid:
        return
    _unlink()
    # A request that connected before the unlink is let through before the interpreter goes
    # (a handler entering Python after that would abort the process): the launcher sends its
    # request as it connects, so a few ms settle it. Sleeping releases the GIL.
    import time

    deadline = time.monotonic() + 1.0
    time.sleep(0.005)
    while _in_flight and time.monotonic() < deadline:
        time.sleep(0.001)
    if _dir_fd is not None:
        os.close(_dir_fd)


def _unlink():
    try:
        if _dir_fd is not None:
            os.unlink(os.path.basename(_SOCKET), dir_fd=_dir_fd)
        else:
            os.unlink(_SOCKET)
    except OSError:
        pass  # already gone (or the directory with it): nothing left to clean


class _LoaderThenStart:
    """torch's own loader, then _start(); torch's module never sees this wrapper after exec."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        _Finder.done = True
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        # After the whole of torch/__init__ (which imports torch.distributed in torch 2.x): the
        # server's handlers may call into torch and Python, so not while torch is half-imported.
        try:
            _start()
        except Exception as e:
            _note(f"the worker server did not start: {e}")


def _torch_spec(finder, name, path, target):
    # torch's spec from the finders after ours, its loader wrapped to call _start() after it.
    for other in sys.meta_path:
        if other is finder or not hasattr(other, "find_spec"):
            continue
        spec = other.find_spec(name, path, target)
        if spec is not None:
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _LoaderThenStart(spec.loader)
            return spec
    return None
'''


def _chain_sitecustomize(rest):
    # The sitecustomize Python would have imported without us: the next one on sys.path after
    # our directory (Debian's /etc/python3.X one, a venv's, one on the user's PYTHONPATH). It
    # becomes sys.modules["sitecustomize"]; its errors propagate to site.py, which reports them
    # as it always does, with no module left under that name.
    import _frozen_importlib
    import _frozen_importlib_external

    # Ours stays under the name when there is no other, or when the other raises: the import
    # machinery pops that name after exec (3.11.7 and later), so it must be there.
    spec = _frozen_importlib_external.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == __file__:  # (ours: not found on sys.path)
        return
    ours = sys.modules["sitecustomize"]
    module = _frozen_importlib.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules["sitecustomize"] = ours
        raise


# Imported under another name (a tool walking the ddplaunch package), this file does nothing.
if __name__ == "sitecustomize":
    _SOCKET = os.environ.pop("DDPLAUNCH_WORKER_SOCKET", None)  # no child starts a second server
    if _SOCKET:
        sys.meta_path.insert(0, _Finder)
    # Our directory leaves sys.path (PYTHONPATH keeps it for children): sys.path is then what it
    # would be without us, also under -P where nothing is put in front of it.
    _rest = sys.path
    if _HERE in sys.path:
        _rest = sys.path[sys.path.index(_HERE) + 1 :]
        sys.path.remove(_HERE)
        sys.path_importer_cache.pop(_HERE, None)
    _chain_sitecustomize(_rest)
