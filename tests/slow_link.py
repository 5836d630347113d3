"""A slow network link for tests: a TCP proxy on loopback that forwards at a bounded rate, and counts.

Put between a data operation and the SeaweedFS fixture, it makes a copy last seconds, so a
test can kill the operation's process mid-copy without racing it; the requests and bytes are
real, only the link is slow. It counts the bytes it carried each way, so a test can say how
much a resumed copy moved.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

CHUNK = 16 * 1024


class _Bucket:
    """One direction's budget: bytes go through at ``rate`` per second, whatever the connection."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.carried = 0
        self._free_at = time.monotonic()
        self._lock = threading.Lock()

    def take(self, count: int) -> None:
        with self._lock:
            now = time.monotonic()
            self._free_at = max(now, self._free_at) + count / self.rate
            self.carried += count
            wait = self._free_at - now
        time.sleep(wait)


class SlowLink:
    """Listens on 127.0.0.1 and forwards every connection to ``target_url``'s host and port."""

    def __init__(self, target_url: str, bytes_per_second: float) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.up = _Bucket(bytes_per_second)  # client → server (a PUT's body)
        self.down = _Bucket(bytes_per_second)  # server → client (a GET's body)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.url = f"http://{self.host}"
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="slow-link").start()

    def counts(self) -> tuple[int, int]:
        """Bytes carried so far: (up, down)."""
        return self.up.carried, self.down.carried

    def settle(self, quiet_s: float = 0.5, timeout: float = 30.0) -> tuple[int, int]:
        """Wait until nothing has moved for ``quiet_s`` (what a killed client had sent is drained); the counts."""
        deadline = time.monotonic() + timeout
        last = self.counts()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = self.counts()
            if now == last:
                return now
            last = now
        raise AssertionError(f"the link still carries bytes after {timeout:.0f}s")

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, self.up), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self.down), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, bucket: _Bucket) -> None:
        try:
            while data := source.recv(CHUNK):
                bucket.take(len(data))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
