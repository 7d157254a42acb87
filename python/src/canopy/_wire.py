"""One connection to canopyd's control socket: frames, attachments and file descriptors.

Framing (docs/control-protocol.md): every message is a 4-byte little-endian length N, then N bytes of one
JSON object. A ``buffer.write`` frame may be followed by raw bytes (its ``"attachment": N``), and the reply
to a ``buffer.read`` with ``"attachment": true`` is followed by its ``"attachment": N`` bytes. The reply to
``buffer.fd`` carries file descriptors (SCM_RIGHTS) with its first byte; every read here is a ``recvmsg``,
so they are never lost, and they are received close-on-exec.

Thread safety: a Connection is used by one thread at a time; its owner serializes access.
"""

from __future__ import annotations

import array
import json
import os
import socket
from typing import Any

from .errors import Unreachable

_HEADER = 4
_MAX_FDS = 256  # the most fds one reply may carry: one per rank of a symmetric buffer
_ANC_SPACE = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
_CHUNK = 1 << 16
_SHRINK_ABOVE = 1 << 20
_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def parse_reply(body: bytes, what: str) -> dict[str, Any]:
    """A reply body as its JSON object; raises Unreachable for anything else."""
    try:
        obj = json.loads(body)
    except ValueError as e:
        raise Unreachable(f"{what} from canopyd is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise Unreachable(f"{what} from canopyd is not a JSON object")
    return obj


class Connection:
    """A connected control socket. ``request`` sends one frame and reads its reply."""

    def __init__(self, path: str) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # non-inheritable: close-on-exec
        try:
            sock.connect(path)
        except FileNotFoundError:
            sock.close()
            raise Unreachable(f"cannot connect to canopyd at {path}: no such socket (is canopyd running?)") from None
        except OSError as e:
            sock.close()
            raise Unreachable(f"cannot connect to canopyd at {path}: {e.strerror or e}") from None
        self._sock = sock
        self._in = bytearray(_CHUNK)
        self._start = 0  # first byte received and not yet consumed
        self._end = 0  # one past the last byte received
        self._fds: list[int] = []  # received, not yet handed to a reply
        self.closed = False
        self.sent = 0  # frames sent: a connection that has sent none is fresh
        self.received = 0  # bytes received

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            close_fds(self._fds)
            self._fds = []
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()

    def shutdown(self) -> None:
        """Wakes a thread blocked reading this connection (it sees the connection closed)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def usable(self) -> bool:
        """False once the daemon has closed the connection (it closes idle ones; see control.idle_timeout_ms).
        Checked before a connection is reused, so that a request is not sent into a closed one."""
        if self.closed:
            return False
        if self._end > self._start:
            return True
        try:
            peeked = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            self.close()
            return False
        if not peeked:
            self.close()
            return False
        return True

    # -- sending ------------------------------------------------------------------------------------------

    def send(self, body: bytes, attachment: Any = None, what: str = "a request") -> None:
        """Sends one frame whose body is ``body`` (UTF-8 JSON), then the attachment's bytes, if any."""
        header = len(body).to_bytes(_HEADER, "little")
        self.sent += 1
        try:
            if attachment is None or len(attachment) < _CHUNK:
                self._sock.sendall(header + body + (bytes(attachment) if attachment is not None else b""))
            else:
                self._sock.sendall(header + body)
                self._sock.sendall(attachment)
        except OSError as e:
            # Left open: the daemon may have replied before it closed, and the caller reads that reply.
            raise Unreachable(f"canopyd at {self.path} closed the connection while {what} was sent ({e})") from None

    def send_json(self, obj: dict[str, Any], what: str = "a request") -> None:
        self.send(json.dumps(obj, separators=(",", ":")).encode(), None, what)

    # -- receiving ----------------------------------------------------------------------------------------

    def _recv_into(self, view: memoryview, what: str) -> int:
        try:
            n, ancdata, flags, _ = self._sock.recvmsg_into([view], _ANC_SPACE, _CLOEXEC)
        except OSError as e:
            self.close()
            raise Unreachable(f"reading {what} from canopyd at {self.path} failed: {e}") from None
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
                self._fds.extend(fds)
        if flags & socket.MSG_CTRUNC:
            self.close()
            raise Unreachable(f"{what} from canopyd carried more than {_MAX_FDS} file descriptors")
        if n == 0:
            self.close()
            raise Unreachable(f"canopyd at {self.path} closed the connection before {what}")
        self.received += n
        return n

    def _ensure(self, n: int, what: str) -> None:
        """Makes at least n received bytes available from self._start."""
        if self._end - self._start >= n:
            return
        if len(self._in) - self._start < n:
            held = self._end - self._start
            if len(self._in) >= n:
                self._in[:held] = self._in[self._start : self._end]
            else:
                grown = bytearray(max(n, _CHUNK))
                grown[:held] = self._in[self._start : self._end]
                self._in = grown
            self._start, self._end = 0, held
        view = memoryview(self._in)
        try:
            while self._end - self._start < n:
                self._end += self._recv_into(view[self._end :], what)
        finally:
            view.release()

    def _consumed(self) -> None:
        if self._start == self._end:
            self._start = self._end = 0
            if len(self._in) > _SHRINK_ABOVE:
                self._in = bytearray(_CHUNK)

    def receive_raw(self, what: str = "a reply") -> tuple[bytes, list[int]]:
        """Reads one frame: its body unparsed, and the fds that arrived with it (the caller owns them)."""
        self._ensure(_HEADER, what)
        n = int.from_bytes(self._in[self._start : self._start + _HEADER], "little")
        self._start += _HEADER
        self._ensure(n, what)
        body = bytes(self._in[self._start : self._start + n])
        self._start += n
        self._consumed()
        fds, self._fds = self._fds, []
        return body, fds

    def receive(self, what: str = "a reply") -> tuple[dict[str, Any], list[int]]:
        """Reads one frame: its JSON object, and the fds that arrived with it (the caller owns them)."""
        body, fds = self.receive_raw(what)
        return self.parse(body, fds, what), fds

    def parse(self, body: bytes, fds: list[int], what: str) -> dict[str, Any]:
        """A frame body as its JSON object; a body that is not one closes the connection."""
        try:
            return parse_reply(body, what)
        except Unreachable:
            close_fds(fds)
            self.close()
            raise

    def receive_attachment(self, out: memoryview, what: str = "an attachment") -> None:
        """Reads exactly len(out) raw bytes that follow a reply frame into ``out`` (a writable byte view)."""
        n = len(out)
        held = min(n, self._end - self._start)
        if held:
            out[:held] = self._in[self._start : self._start + held]
            self._start += held
            self._consumed()
        at = held
        while at < n:
            at += self._recv_into(out[at:], what)
        if self._fds:  # an attachment never carries fds; any that came are stray
            close_fds(self._fds)
            self._fds = []

    def discard_attachment(self, n: int, what: str = "an attachment") -> None:
        scratch = bytearray(min(n, _CHUNK))
        view = memoryview(scratch)
        left = n
        held = min(left, self._end - self._start)
        self._start += held
        self._consumed()
        left -= held
        while left > 0:
            left -= self._recv_into(view[: min(left, len(scratch))], what)
