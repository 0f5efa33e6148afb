"""Host PyTorch's own TCPStore server for testing our C++ client against it.

Usage:  python torch_master_store.py [--max-seconds N]

Starts ``torch.distributed.TCPStore("127.0.0.1", 0, is_master=True,
wait_for_workers=False, use_libuv=True)``, sets key "from_python" = b"hello" (through
the master's own client, so it is stored on the wire as "/from_python"), then prints
exactly one stdout line ``port=<P>`` (flushed).  The key is set *before* the port is
printed, so a client that connects after reading the line always finds it.

It then serves until stdin reaches EOF (the parent closes our stdin / exits) and exits
0.  SIGTERM/SIGINT also end it with exit 0.  Self-bound: if stdin is still open after
--max-seconds (default 600) it exits 3 with a message on stderr.  On exit it prints
the user keys present in the store to stderr (diagnostics for the C++ test).
Non-zero exit with a message on stderr if the server cannot be started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", type=float, default=600.0)
    args = ap.parse_args()

    try:
        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                              use_libuv=True)
        store.set("from_python", b"hello")
    except Exception as e:  # noqa: BLE001
        print(f"torch_master_store: failed to start PyTorch TCPStore: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)
        return 1

    done = threading.Event()
    reason = {"why": "timeout"}

    def read_stdin() -> None:
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        reason["why"] = "eof"
        done.set()

    def on_signal(signum, _frame) -> None:
        reason["why"] = "signal"
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threading.Thread(target=read_stdin, daemon=True).start()

    print(f"port={store.port}", flush=True)

    done.wait(args.max_seconds)
    try:
        if hasattr(store, "list_keys"):
            print(f"torch_master_store: keys at exit: {sorted(store.list_keys())}",
                  file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"torch_master_store: list_keys failed at exit: {e}", file=sys.stderr, flush=True)
    if reason["why"] == "timeout":
        print(f"torch_master_store: stdin still open after {args.max_seconds:.0f} s, giving up",
              file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: skip interpreter/TCPStore teardown, which could block on connected clients
    os._exit(rc)
