#!/bin/bash
# A worker that leaves things behind, for test_lifetime.py. It starts
#   - a background job that ignores SIGINT (as `trap '' INT` makes every child of this shell),
#   - a Python subprocess (python3 running `sleep` through subprocess.Popen),
#   - a daemon in its own session (setsid -f),
# writes their pids, one per line, to $LIFETIME_DIR/pids.$LOCAL_RANK, prints "ready", then
# sleeps, or, on the rank named by $FAIL_RANK, waits for a line on the FIFO $LIFETIME_DIR/go
# and exits 3.
set -e
trap '' INT
sleep 300 &
bg=$!
exec 3< <(exec python3 -c 'import subprocess; p = subprocess.Popen(["sleep", "301"]); print(p.pid, flush=True); p.wait()')
py=$!
read -r -u 3 py_child
exec 3<&-
read -r daemon < <(setsid -f sh -c 'echo $$; exec sleep 302 >/dev/null 2>&1')
printf '%s\n' "$bg" "$py" "$py_child" "$daemon" > "$LIFETIME_DIR/pids.$LOCAL_RANK.tmp"
mv "$LIFETIME_DIR/pids.$LOCAL_RANK.tmp" "$LIFETIME_DIR/pids.$LOCAL_RANK"
echo ready
if [ "$LOCAL_RANK" = "${FAIL_RANK:-none}" ]; then
  read -r _ < "$LIFETIME_DIR/go"
  exit 3
fi
exec sleep 303
