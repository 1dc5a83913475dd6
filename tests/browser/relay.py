"""A TCP relay in front of a server whose open connections can all be cut at once: the
browser tests' way to drop the connection of an answer mid-stream."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableRelay:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="relay-accept", daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
                for src, dst in ((client, upstream), (upstream, client)):
                    pump = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                    self._threads.append(pump)
                    pump.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass  # cut, or the other side closed
        finally:
            for sock in (src, dst):
                self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def cut(self) -> int:
        """Drop every open connection (both sides); new ones are relayed again. Returns
        how many were open."""
        with self._lock:
            victims = list(self._open)
        for sock in victims:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(victims) // 2

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        self._accepting.join()
        self.cut()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
