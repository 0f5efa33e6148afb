"""A FUSE file system that never answers one lookup: a process that stats MOUNT/stuck sleeps in
the kernel, and once a fatal signal (SIGTERM, SIGKILL) reaches it, in uninterruptible sleep
(state D: the kernel's request_wait_answer), as behind a hung NFS server or a GPU driver call.

No library: the kernel's FUSE protocol over /dev/fuse, with mount(2) through ctypes (root only).
    python stuck_fuse.py MOUNT MARKER
mounts MOUNT, prints "ready", answers INIT and every other lookup (ENOENT, or ENOSYS for other
requests), writes MARKER once the kernel has handed it the lookup of "stuck" (then a fatal signal
puts the caller in D), and on SIGTERM or SIGINT undoes it all: closing /dev/fuse aborts the
connection (every waiting request fails with ENOTCONN, so the caller dies of its pending SIGKILL)
and the mount is detached.
"""
import ctypes
import os
import signal
import struct
import sys

FUSE_LOOKUP, FUSE_FORGET, FUSE_INIT, FUSE_INTERRUPT, FUSE_DESTROY, FUSE_BATCH_FORGET = 1, 2, 26, 36, 38, 42
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, total_extlen, padding
OUT_HEADER = struct.Struct("<IiQ")       # len, error, unique
MNT_DETACH = 2


def reply(fd, unique, error=0, body=b""):
    os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), error, unique) + body)


def serve(fd, marker):
    while True:
        try:
            request = os.read(fd, 1 << 17 | 4096)
        except OSError as e:
            if e.errno == 19:  # ENODEV: unmounted
                return
            raise
        _, opcode, unique, _, _, _, _, _, _ = IN_HEADER.unpack_from(request)
        body = request[IN_HEADER.size:]
        if opcode == FUSE_INIT:
            major, minor = struct.unpack_from("<II", body)
            # fuse_init_out (64 bytes): major, minor, max_readahead, flags, max_background,
            # congestion_threshold, max_write, time_gran, max_pages, map_alignment, flags2,
            # max_stack_depth, unused[6].
            reply(fd, unique, 0, struct.pack("<IIIIHHIIHHII6I", 7, min(minor, 31), 0, 0, 0, 0, 1 << 17, 1, 0, 0, 0, 0,
                                             *[0] * 6))
        elif opcode == FUSE_LOOKUP and body.split(b"\0", 1)[0] == b"stuck":
            with open(marker, "w") as f:  # the caller waits on us from now on; never answered
                f.write(str(unique))
        elif opcode in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT, FUSE_DESTROY):
            pass  # no reply expected (an interrupt of "stuck" is ignored: that is the point)
        else:
            reply(fd, unique, -2 if opcode == FUSE_LOOKUP else -38)  # ENOENT, ENOSYS


def main():
    mount, marker = sys.argv[1], sys.argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"ddplaunch-stuck", mount.encode(), b"fuse", 0, options) != 0:
        print(f"mount failed: {os.strerror(ctypes.get_errno())}", flush=True)
        sys.exit(1)

    def stop(signo, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    try:
        serve(fd, marker)
    finally:
        os.close(fd)  # aborts the connection: the stuck request fails, its caller dies
        libc.umount2(mount.encode(), MNT_DETACH)


if __name__ == "__main__":
    main()
