"""A TCP proxy that delays every byte by DELAY seconds in each direction, keeping order and
throughput (like netem on one link, which this machine lacks): node 1's launcher dials it
instead of node 0's store, so its replies come late while node 0's do not. The delay starts at
0, becomes DELAY on SIGUSR1 (once the job runs, so that the rendezvous is not slowed) and 0
again on SIGUSR2.

    python delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_SECONDS
"""

import asyncio
import signal
import sys

listen_port, target_port, final_delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
delay = 0.0


def set_delay(seconds):
    global delay
    delay = seconds
    print(f"delay_proxy: delay now {delay} s", flush=True)


async def pipe(reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def forward():
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    task = asyncio.create_task(forward())
    while True:
        data = await reader.read(65536)
        await queue.put((loop.time() + delay, data))
        if not data:
            break
    await task


async def handle(client_reader, client_writer):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer),
                         return_exceptions=True)


async def main():
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, set_delay, final_delay)
    loop.add_signal_handler(signal.SIGUSR2, set_delay, 0.0)
    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
