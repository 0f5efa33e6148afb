"""Orchestrators' contracts, run for real with the ddplaunch binary (issue 45; docs/orchestrators/):

  * Volcano's pytorch plugin: two "pods" (launchers on this machine) given exactly what the plugin
    sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE = pods, RANK = pod index, the svc plugin's VC_*),
    and nothing on the command line but --nproc_per_node: one job of 4 ranks, the pods' values
    never reaching the workers as their own.
  * torchrun's exit barrier (--exit-barrier-timeout / TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT): a node
    whose workers finished early waits that long answering /healthz, then leaves with exit 0; the
    other node is not told it lost a node and finishes; the store's host never leaves early.
  * Kubeflow Trainer v2's progress API: a local HTTPS endpoint (a test CA's certificate for
    127.0.0.1) that checks the bearer token and the JSON's shape gets the job's state, rate-limited
    (one POST when the round starts, one at the end, none for the restart between); an endpoint
    that is down or refuses the token never fails the job.

    python -m pytest test_orchestrators.py --ddplaunch=/path/to/ddplaunch
"""
import http.server
import json
import os
import ssl
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

from pyfixtures import free_port, make_certs

pytestmark = pytest.mark.timeout(120)

WORKER = textwrap.dedent("""\
    import json, os, sys, time
    keys = ["RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"]
    print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
    sleep = float(os.environ.get("SLEEP_ON_NODE_" + os.environ["GROUP_RANK"], "0"))
    time.sleep(sleep)
    fail = os.environ.get("FAIL_FIRST_ROUND")
    if fail and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "0":
        time.sleep(2)  # the first report (round 0 running) goes out meanwhile
        sys.exit(3)
    if os.environ.get("PROGRESS_FILE"):
        with open(os.environ["PROGRESS_FILE"], "w") as f:
            f.write("120\\n")
    """)


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    return str(path)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "DDPLAUNCH_", "TORCHELASTIC_", "VC_", "VK_", "KUBEFLOW_", "SLURM_", "OMPI_",
                                "PMI_", "TORCH_ELASTIC_"))}
    for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(k, None)
    env["PYTHON_EXEC"] = sys.executable
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def envs_printed(out):
    """The workers' ENV lines (after the console prefix)."""
    return [json.loads(line.split("ENV ", 1)[1]) for line in out.splitlines() if "ENV {" in line]


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


# ----------------------------------------------------------------------------- Volcano
def volcano_pod(rank, port):
    """What Volcano's pytorch plugin (and the svc plugin it forces) sets in pod `rank` of vcjob
    "mnist" with tasks master (1) and worker (1)."""
    return clean_env(MASTER_ADDR="localhost", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                     VC_MASTER_HOSTS="mnist-master-0.mnist", VC_MASTER_NUM="1",
                     VC_WORKER_HOSTS="mnist-worker-0.mnist", VC_WORKER_NUM="1")


def test_volcano_pods_are_nodes_and_workers_get_their_own_ranks(ddplaunch, procs, worker):
    port = free_port()
    pods = [procs.start([ddplaunch, "--nproc_per_node", "2", worker], env=volcano_pod(r, port),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    results = [finish(p) for p in pods]
    for rc, out, err in results:
        assert rc == 0, err
    assert "Volcano's pytorch plugin: pod 0 of 2" in results[0][2], results[0][2]
    seen = [e for _, out, _ in results for e in envs_printed(out)]
    assert sorted(int(e["RANK"]) for e in seen) == [0, 1, 2, 3], seen
    assert {e["WORLD_SIZE"] for e in seen} == {"4"}
    for pod, (_, out, _) in enumerate(results):
        assert {e["GROUP_RANK"] for e in envs_printed(out)} == {str(pod)}
    procs.assert_no_survivors()


# ----------------------------------------------------------------------------- exit barrier
def healthz(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
        return r.status, r.read().decode()


def two_nodes(ddplaunch, procs, worker, early_node, barrier, via_env=False, status_port=None):
    """A static 2-node job on this machine; node `early_node`'s worker ends at once, the other's
    after 8 s. Node `early_node` has the exit barrier `barrier` (flag, or torchrun's variable)."""
    port = free_port()
    launchers = []
    for node in (0, 1):
        extra = {"SLEEP_ON_NODE_" + str(1 - early_node): "8"}
        args = [ddplaunch, "--nnodes", "2", "--node_rank", str(node), "--master_addr", "127.0.0.1", "--master_port",
                str(port), "--heartbeat_timeout", "3"]
        if node == early_node:
            if via_env:
                extra["TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT"] = str(barrier)
            else:
                args += ["--exit-barrier-timeout", str(barrier)]
            if status_port:
                args += ["--status_port", str(status_port)]
        launchers.append(procs.start(args + [worker], env=clean_env(**extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
    return launchers


@pytest.mark.parametrize("via_env", [False, True], ids=["flag", "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT"])
def test_exit_barrier_bounds_an_early_node_which_answers_healthz_meanwhile(ddplaunch, procs, worker, via_env):
    status_port = free_port()
    t0 = time.monotonic()
    node0, node1 = two_nodes(ddplaunch, procs, worker, early_node=1, barrier=3, via_env=via_env,
                             status_port=status_port)
    time.sleep(1.5)  # node 1's worker has finished; node 1 waits in the barrier
    assert node1.poll() is None
    assert healthz(status_port) == (200, "ok\n")
    rc1, _, err1 = finish(node1)
    left = time.monotonic() - t0
    assert rc1 == 0, err1
    assert "exit barrier: this node's workers finished 3 s ago (--exit_barrier_timeout) and node(s) 0 still run; " \
           "leaving with exit 0" in err1, err1
    rc0, _, err0 = finish(node0)
    assert left < 7.5, (left, err1)  # before node 0's worker ended: the barrier, not node 0, ended it
    assert rc0 == 0, err0
    assert "lost node" not in err0, err0
    procs.assert_no_survivors()


def test_exit_barrier_store_host_stays_for_the_others(ddplaunch, procs, worker):
    node0, node1 = two_nodes(ddplaunch, procs, worker, early_node=0, barrier=1)
    rc0, _, err0 = finish(node0)
    rc1, _, err1 = finish(node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    assert "this node stays until they finish, since their store is in it" in err0, err0
    procs.assert_no_survivors()


def test_exit_barrier_negative_is_refused(ddplaunch, procs, worker):
    rc, _, err, _ = procs.run([ddplaunch, "--exit-barrier-timeout=-1", worker], timeout=30, env=clean_env())
    assert rc == 2
    assert "--exit_barrier_timeout: -1 is not a number of seconds" in err, err


# ----------------------------------------------------------------------------- Kubeflow Trainer progress
TOKEN = "projected-service-account-token-for-trainer.kubeflow.org"
PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status"


class TrainerEndpoint:
    """Kubeflow Trainer's status endpoint as KEP-2779 has it: HTTPS, POST to the TrainJob's status
    path, a bearer token, a JSON body of {"trainerStatus": {...}}. Keeps what it accepted; answers
    401 to a wrong token, 422 to a wrong shape (and records the error, which fails the test)."""

    def __init__(self, certs):
        self.posts, self.errors = [], []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Authorization") != "Bearer " + TOKEN:
                    self.send_response(401)
                    self.end_headers()
                    return
                problem = outer.check(self.path, self.headers.get("Content-Type"), body)
                if problem:
                    outer.errors.append(problem)
                self.send_response(422 if problem else 200)
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(certs / "server.pem"), str(certs / "server.key"))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def check(self, path, content_type, body):
        if path != PATH:
            return f"path {path}"
        if content_type != "application/json":
            return f"content type {content_type}"
        doc = json.loads(body)
        if set(doc) != {"trainerStatus"}:
            return f"top level {doc}"
        status = doc["trainerStatus"]
        if not set(status) <= {"progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"}:
            return f"fields {status}"
        if not isinstance(status.get("lastUpdatedTime"), str) or not status["lastUpdatedTime"].endswith("Z"):
            return f"lastUpdatedTime {status}"
        for m in status.get("metrics", []):
            if set(m) != {"name", "value"} or not isinstance(m["value"], str) or not m["name"]:
                return f"metric {m}"
        pct = status.get("progressPercentage")
        if pct is not None and not (isinstance(pct, int) and 0 <= pct <= 100):
            return f"progressPercentage {pct}"
        self.posts.append({m["name"]: m["value"] for m in status.get("metrics", [])} | (
            {"progressPercentage": pct} if pct is not None else {}))
        return None

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def certs(tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    make_certs(d)
    (d / "token").write_text(TOKEN + "\n")
    (d / "wrong-token").write_text("someone-else\n")
    return d


@pytest.fixture
def trainer(certs):
    endpoint = TrainerEndpoint(certs)
    yield endpoint
    endpoint.close()


def trainer_env(certs, port, ca="ca.pem", token="token", **extra):
    return clean_env(KUBEFLOW_TRAINER_STATUS_URL=f"https://127.0.0.1:{port}{PATH}",
                     KUBEFLOW_TRAINER_STATUS_CA_CERT=str(certs / ca),
                     KUBEFLOW_TRAINER_STATUS_TOKEN=str(certs / token), **extra)


def test_kubeflow_progress_reported_rate_limited(ddplaunch, procs, worker, trainer, certs, tmp_path):
    progress = tmp_path / "iteration.txt"
    rc, out, err, _ = procs.run([ddplaunch, "--nproc_per_node", "2", "--max_restarts", "1", "--progress_file",
                                 str(progress), worker], timeout=60,
                                env=trainer_env(certs, trainer.port, FAIL_FIRST_ROUND="1", PROGRESS_FILE=str(progress)))
    assert rc == 0, err
    assert trainer.errors == [], trainer.errors
    # One POST as round 0 ran, none for the failure and restart (within the 30 s interval), one at the end.
    assert len(trainer.posts) == 2, trainer.posts
    first, last = trainer.posts
    assert first["state"] == "running" and first["round"] == "0" and first["restarts"] == "0", first
    assert last["state"] == "succeeded" and last["progressPercentage"] == 100, last
    assert last["restarts"] == "1" and last["maxRestarts"] == "1", last
    assert last["lastRootCause"].endswith("exitcode 3"), last
    assert last["iteration"] == "120", last
    assert "kubeflow trainer status" not in err, err
    procs.assert_no_survivors()


@pytest.mark.parametrize("case", ["down", "wrong token", "wrong CA"])
def test_kubeflow_endpoint_trouble_never_fails_the_job(ddplaunch, procs, worker, trainer, certs, case):
    port = free_port() if case == "down" else trainer.port
    env = trainer_env(certs, port, token="wrong-token" if case == "wrong token" else "token",
                      ca="other.pem" if case == "wrong CA" else "ca.pem")
    rc, out, err, _ = procs.run([ddplaunch, "--nproc_per_node", "1", worker], timeout=60, env=env)
    assert rc == 0, err
    assert trainer.posts == []
    warnings = [line for line in err.splitlines() if "kubeflow trainer status: cannot report to" in line]
    assert len(warnings) == 1, err  # said once, not at every try
    assert f"https://127.0.0.1:{port}{PATH}" in warnings[0]
    assert "the job goes on" in warnings[0]
    if case == "wrong token":
        assert "HTTP 401" in warnings[0], warnings
    procs.assert_no_survivors()
