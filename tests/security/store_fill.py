"""Issue 41's stranger, shared by the loopback and the network-namespace suites: it fills a store
without the job secret, and the job must still form and train."""


def fill(connect, size=1 << 20):
    """Stores values under fresh keys until the store refuses, each refusal closing the connection,
    then again on a new connection from `connect()` with half the size, down to 1 byte. Returns the
    bytes stored. Blocks; each store call is bounded by the timeout `connect()` gives its store."""
    stored, n, s = 0, 0, connect()
    while size > 0:
        try:
            s.set(f"fill/{n}", b"x" * size)
            n += 1
            s.check([f"fill/{n - 1}"])  # a SET has no reply: this one sees the refusal
            stored += size
        except RuntimeError:  # the store closed this connection (torch's DistNetworkError and kin)
            size //= 2
            s = connect()
    return stored
