"""The job's page (docs/job-page.md) at `/` of the status port, read from its DOM as headless
Chromium renders it (page/page_browser.py: Debian's chromium and chromium-driver, selenium):

  * the page the binary serves, fed a canned status document with the `stragglers` object (two
    nodes, four ranks, rank 3 flagged) and a collective hang: every rank's row, rank 3's row and
    chart line marked as a straggler, its lateness, the hang's summary, each node's state; the
    same without `stragglers`: "no data" and no line;
  * a running 2-node job in network namespaces with a job secret: node 0's page lists both nodes'
    ranks (node 1's gathered through the store) and shows rank 1's stack (on node 1) on request;
    node 1's page shows its own rank and links to node 0's; without the token the page shows
    nothing, and /status and /stack answer 401 (the stack action takes no stack), /healthz 200;
  * the same job with rank 1 never entering all_reduce #2: node 0's page shows the collective
    hang's report while the round stops;
  * the same job, 2 ranks a node, with rank 3 slowed: node 0's page marks rank 3 (row and chart
    line) and no other, as the console and the summary name it.

Each test keeps a screenshot (its path printed) in its own directory.

    pytest test_job_page.py --ddplaunch=/path/to/ddplaunch
"""
import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from pyfixtures import netns_hosts_or_skip

pytestmark = pytest.mark.timeout(150)

BROWSER = os.path.join(os.path.dirname(__file__), "page", "page_browser.py")
SECRET = "0123456789abcdef0123456789abcdef-page"
PAGE_LINE = re.compile(r"ddplaunch: status: http://(\S+):(\d+)/status, the job's page: (http://\S+/)(\?token=([0-9a-f]+))?")
SLEEPER = '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK"\nexec sleep 60\n'


def needs_browser():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")
    pytest.importorskip("selenium")


def browse(url, until, out_png, stack=None, prefix=(), timeout=30):
    """What the page at `url` shows (page_browser.py's JSON), read once `until` holds."""
    args = [*prefix, sys.executable, BROWSER, url, "--until", until, "--screenshot", str(out_png)]
    if stack is not None:
        args += ["--stack", str(stack)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    print(f"screenshot: {out_png}")
    return json.loads(r.stdout)


def read_page_line(p):
    for line in p.stderr:  # said at start; the test's timeout bounds it
        m = PAGE_LINE.search(line)
        if m:
            return m.group(1), int(m.group(2)), m.group(3), m.group(5) or ""
    pytest.fail(f"no status line; the launcher ended ({p.wait()})")


def http_get(host, port, path, headers=None, prefix=None):
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def served_page(lx):
    """The page as the binary serves it (a one-node job with a secret, asked with its token)."""
    prog = lx.script("sleeper.sh", SLEEPER)
    p = lx.start(["--nproc_per_node", "1", "--status_port", "0", "--rdzv_id", "pagehtml", prog],
                 env={"DDPLAUNCH_RDZV_TOKEN": SECRET})
    host, port, _, token = read_page_line(p)
    assert token, "a job with a secret prints its page's token"
    assert http_get(host, port, "/")[0] == 401
    code, html = http_get(host, port, "/?token=" + token)
    assert code == 200 and html.startswith("<!doctype html>")
    assert "http://" not in html.split("<script>")[1].replace("http://www.w3.org/2000/svg", ""), "loads nothing from elsewhere"
    lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()
    return html


def canned(stragglers=True):
    now = 1795900000.0
    history = lambda late: [[now - 120 + 10 * i, late * (0.4 if i < 4 else 1.0)] for i in range(13)]
    rank = lambda r, pid: {"rank": r, "local_rank": r % 2, "pid": pid, "state": "running",
                           "last_progress": {"source": "collectives", "collectives_completed": 1200 + r,
                                             "in_collective": None, "op": None, "time": now, "age_s": 0.1}}
    node = lambda g, host, ranks: {"ddplaunch_version": "0.1.0", "job_id": "canned", "time": now, "uptime_s": 600,
                                   "node": {"host": host, "launcher_pid": 100 + g, "node_rank": g, "group_rank": g,
                                            "role": "active", "state": "running"},
                                   "round": 1, "world_size": 4,
                                   "nodes": [{"group_rank": 0, "host": "h1", "first_rank": 0, "nproc": 2, "role": "active"},
                                             {"group_rank": 1, "host": "h2", "first_rank": 2, "nproc": 2, "role": "active"}],
                                   "restarts": {"count": 1, "max": 3, "causes": [
                                       {"round": 0, "code": 1, "kind": "worker", "node": 1, "host": "h2",
                                        "time": now - 700, "rank": 2, "exit_code": 1, "signal": None,
                                        "error_type": "ValueError"}]},
                                   "ranks": ranks,
                                   "hang": {"state": "collective", "since": now,
                                            "summary": "collective hang: rank 3 never entered allreduce #1204"},
                                   "stopping": None, "ended": None}
    doc = node(0, "h1", [rank(0, 1000), rank(1, 1001)])
    doc["other_nodes"] = [{"group_rank": 1, "status": node(1, "h2", [rank(2, 2000), rank(3, 2001)])}]
    if stragglers:
        doc["stragglers"] = {
            "mode": "warn", "window_s": 60,
            "ranks": [{"rank": r, "node": r // 2, "host": "h1" if r < 2 else "h2",
                       "lateness_ms": 48.0 if r == 3 else 1.5, "step_fraction": 0.31 if r == 3 else 0.01,
                       "straggler": r == 3, "since": now - 80 if r == 3 else None,
                       "history": history(48.0 if r == 3 else 1.5)} for r in range(4)],
            "nodes": [{"node": 1, "host": "h2", "lateness_ms": 24.0, "straggler": False, "since": None}]}
    return doc


class CannedServer:
    """Serves `html` at / and `doc` at /status, each only with the token (as the launcher does)."""

    def __init__(self, html, doc, token="canned-token"):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path, _, query = self.path.partition("?")
                ok = query == "token=" + token or self.headers.get("Authorization") == "Bearer " + token
                body, kind = (html, "text/html") if path == "/" else (json.dumps(outer.doc), "application/json")
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", kind if ok else "text/plain")
                self.end_headers()
                self.wfile.write(body.encode() if ok else b"token needed\n")

            def log_message(self, *args):
                pass

        self.doc = doc
        self.token = token
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_canned_document_shows_ranks_straggler_chart_and_hang(lx, tmp_path):
    needs_browser()
    html = served_page(lx)
    server = CannedServer(html, canned())
    try:
        seen = browse(server.url + "?token=" + server.token, "document.querySelectorAll('#ranks tbody tr').length == 4",
                      tmp_path / "canned_stragglers.png")
        assert not seen["timed_out"], seen
        assert [r["rank"] for r in seen["ranks"]] == [0, 1, 2, 3]
        assert [r["rank"] for r in seen["ranks"] if r["straggler"]] == [3]
        row3 = seen["ranks"][3]["cells"]
        assert row3[2] == "h2" and row3[7] == "48 ms" and row3[8] == "straggler" and row3[5] == "1203"
        assert sorted(l["rank"] for l in seen["chart_lines"]) == [0, 1, 2, 3]
        assert [l["rank"] for l in seen["chart_lines"] if l["straggler"]] == [3]
        assert "rank 3 straggler" in seen["chart_text"]
        assert "rank 3 never entered allreduce #1204" in seen["hang"] and seen["hang_state"] == "collective"
        assert "ValueError" in seen["body"] and "worker" in seen["body"]  # the restart's root cause
        assert "every node of the job" in seen["job"]

        server.doc = canned(stragglers=False)
        seen = browse(server.url + "?token=" + server.token, "document.querySelectorAll('#ranks tbody tr').length == 4",
                      tmp_path / "canned_no_stragglers.png")
        assert seen["chart_lines"] == [] and seen["chart_text"] == "no data"
        assert not any(r["straggler"] for r in seen["ranks"])

        # A page that lost its token (a link without it, served as the launcher would not): it shows
        # no data, only that it needs the token.
        server_page_only = CannedServer(html, canned(), token="other")
        try:
            seen = browse(server_page_only.url + "?token=other&x=1".replace("token=other&", "") + "",
                          "document.readyState == 'complete'", tmp_path / "canned_no_token.png")
        finally:
            server_page_only.close()
        assert not seen["page"] and seen["ranks"] == [] and "token needed" in seen["body"]
    finally:
        server.close()


NODES = ["10.244.0.1", "10.244.0.2"]


@pytest.fixture(scope="module")
def hosts():
    yield from netns_hosts_or_skip(NODES)


def start_two_nodes(lx, hosts, port, run_id, prog, nproc=1, args=(), env=None):
    """Node 0 and node 1 of a job with a secret and --status_port 0, one launcher in each namespace
    host, and each one's (host, port, page URL, token) as it prints them."""
    launchers = []
    for rank, h in enumerate(hosts):
        argv = ["--nnodes", "2", "--node_rank", str(rank), "--master_addr", NODES[0], "--master_port", str(port),
                "--nproc_per_node", str(nproc), "--rdzv_id", run_id, "--status_port", "0", "--rdzv_timeout", "30",
                *[a.replace("{rank}", str(rank)) for a in args], prog]
        # The host name resolves to loopback in every namespace: gloo is told the interface.
        launch_env = dict(os.environ, PIDDIR=lx.dir, DDPLAUNCH_RDZV_TOKEN=SECRET, GLOO_SOCKET_IFNAME=h.ifname,
                          PYTHON_EXEC=sys.executable, **(env or {}))
        launchers.append(lx.procs.start(h.cmd(lx.launcher, *argv), env=launch_env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=lx.dir))
    return launchers, [read_page_line(p) for p in launchers]


WORKER = ("import os, time, torch, torch.distributed as dist\n"
          "dist.init_process_group('gloo')\n"
          "dist.all_reduce(torch.ones(4))\n"
          "open(os.path.join(os.environ['PIDDIR'], 'pid.' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
          "def wait_in_page_test():\n    time.sleep(120)\n"
          "wait_in_page_test()\n")


def test_two_node_job_page(lx, hosts, tmp_path):
    needs_browser()
    worker = lx.script("worker.py", WORKER, mode=0o644)
    launchers, pages = start_two_nodes(lx, hosts, 29571, "pagejob", worker, args=["--heartbeat_timeout", "5"])
    tokens = {t for *_, t in pages}
    assert len(tokens) == 1 and all(tokens), "every node prints the same token"
    token = tokens.pop()
    url0 = pages[0][2]
    assert url0.startswith(f"http://{NODES[0]}:")
    in_node0 = hosts[0].cmd()
    lx.wait_pids(2, timeout=90)

    # Node 0's page: both ranks (node 1's through the store), and rank 1's stack from node 1.
    seen = browse(url0 + "?token=" + token,
                  "document.querySelectorAll('#ranks tbody tr').length == 2 && "
                  "[...document.querySelectorAll('#nodes tbody tr')].every(r => r.cells[4].textContent == 'running')",
                  tmp_path / "node0_page.png", stack=1, prefix=in_node0, timeout=40)
    assert not seen["timed_out"], seen
    assert [r["rank"] for r in seen["ranks"]] == [0, 1]
    assert [r["cells"][1] for r in seen["ranks"]] == ["0", "1"]  # the node of each (one host name here)
    assert all(r["cells"][3] == "running" for r in seen["ranks"])
    pid1 = int(open(os.path.join(lx.dir, "pid.1")).read())
    assert seen["ranks"][1]["cells"][4] == str(pid1)
    assert not seen.get("stack_timed_out") and seen["stack"].startswith(f"rank 1 (pid {pid1}):"), seen["stack"]
    # Taken on node 1 from the worker's own server (no ptrace) and carried through the store.
    assert "(Python stack from the worker's own server)" in seen["stack"], seen["stack"]
    assert "wait_in_page_test" in seen["stack"] and "rank 0 (pid" not in seen["stack"], seen["stack"]
    print("rank 1's stack as the page shows it:\n" + seen["stack"])

    # Node 1's page: its own rank, and a link to node 0's.
    url1 = f"http://{NODES[1]}:{pages[1][1]}/"  # it listens on every interface; its URL names this host
    seen1 = browse(url1 + "?token=" + token, "document.querySelectorAll('#ranks tbody tr').length == 1 && "
                   "!!document.getElementById('node0-link')", tmp_path / "node1_page.png", prefix=in_node0)
    assert not seen1["timed_out"], seen1
    assert [r["rank"] for r in seen1["ranks"]] == [1]
    assert seen1["node0_link"] == url0 + "?token=" + token

    # Without the token: nothing shown, nothing taken; /healthz still answers probes.
    seen = browse(url0, "document.readyState == 'complete'", tmp_path / "node0_no_token.png", prefix=in_node0)
    assert not seen["page"] and not seen["content"] and seen["ranks"] == [] and str(pid1) not in seen["body"]
    assert "needs the job page's token" in seen["body"]
    ask = ("import http.client, sys\n"
           "for path in sys.argv[3:]:\n"
           "    c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10); c.request('GET', path)\n"
           "    r = c.getresponse(); print(r.status, len(r.read()))\n")
    out = subprocess.run(in_node0 + ["python3", "-c", ask, NODES[0], str(pages[0][1]), "/status", "/stack?rank=1",
                                     "/stack?rank=1&token=wrong", "/", "/healthz"],
                         capture_output=True, text=True, timeout=30).stdout.split("\n")
    assert [line.split()[0] for line in out if line] == ["401", "401", "401", "401", "200"], out
    for p in launchers:
        lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()


HANGING = ("import os, signal, time, torch, torch.distributed as dist\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the round's stop lasts --shutdown_timeout\n"
           "dist.init_process_group('gloo')\n"
           "open(os.path.join(os.environ['PIDDIR'], 'pid.' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
           "dist.all_reduce(torch.ones(4))\n"
           "if dist.get_rank() == 1:\n    time.sleep(600)\n"
           "dist.all_reduce(torch.ones(4))\n")


def test_two_node_job_page_shows_the_hang_report(lx, hosts, tmp_path):
    # Rank 1 (node 1) never enters all_reduce #2: node 0's --hang_timeout finds the collective
    # hang; the workers ignore SIGTERM, so the round stops for --shutdown_timeout, while the page,
    # open since before the hang, shows the report (and keeps it once the launcher has gone).
    needs_browser()
    worker = lx.script("hanging.py", HANGING, mode=0o644)
    launchers, pages = start_two_nodes(lx, hosts, 29572, "pagehang", worker,
                                       args=["--heartbeat_timeout", "5", "--hang_timeout", "5", "--shutdown_timeout", "10"])
    lx.wait_pids(2, timeout=90)
    seen = browse(pages[0][2] + "?token=" + pages[0][3], "!document.getElementById('hang').hidden",
                  tmp_path / "node0_hang.png", prefix=hosts[0].cmd(), timeout=60)
    assert not seen["timed_out"], seen
    assert seen["hang_state"] == "collective", seen
    assert "rank 0 waited in gloo:all_reduce #2" in seen["hang"] and "rank 1 never entered" in seen["hang"], seen["hang"]
    print("the page's hang report: " + seen["hang"])
    for p in launchers:
        assert p.wait(timeout=60) == 124
    lx.assert_no_survivors()


def test_two_node_job_page_names_the_straggler(lx, hosts, tmp_path):
    # Issue 43's done-means: 2 nodes x 2 ranks, rank 3 (node 1) sleeps 80 ms more per step. Node
    # 0's page, open from the start, marks rank 3 (its row and its chart line) and no other; the
    # console and node 0's summary name it too.
    needs_browser()
    from test_stragglers import GLOO, FOUND  # the training loop and console line of the straggler tests
    prog = lx.script("train.py", GLOO, mode=0o644)
    launchers, pages = start_two_nodes(lx, hosts, 29573, "pagestraggler", prog, nproc=2,
                                       args=["--straggler_window", "6", "--summary_json", str(tmp_path / "summary{rank}.json")],
                                       env=dict(SECONDS="40", LATE_RANK="3", LATE_MS="80"))
    seen = browse(pages[0][2] + "?token=" + pages[0][3], "document.querySelectorAll('#ranks tbody tr.straggler').length > 0",
                  tmp_path / "node0_straggler.png", prefix=hosts[0].cmd(), timeout=60)
    assert not seen["timed_out"], seen
    assert [r["rank"] for r in seen["ranks"]] == [0, 1, 2, 3]
    assert [r["rank"] for r in seen["ranks"] if r["straggler"]] == [3], seen["ranks"]
    assert [l["rank"] for l in seen["chart_lines"] if l["straggler"]] == [3], seen["chart_lines"]
    errs = [p.communicate(timeout=120)[1] for p in launchers]
    assert [p.returncode for p in launchers] == [0, 0], errs
    found = FOUND.findall(errs[0])
    assert found and found[0][0].startswith("rank 3 on node 1 ("), errs[0]
    summary = json.loads((tmp_path / "summary0.json").read_text())["stragglers"]
    assert summary["slowest_ranks"][0]["rank"] == 3, summary
    lx.assert_no_survivors()
