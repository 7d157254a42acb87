"""buffer.write / buffer.read through the socket, with the bytes as binary attachments."""

from __future__ import annotations

import os

import numpy as np
import pytest

import canopy
from conftest import Daemon


def test_write_then_read_round_trips_the_bytes(buf: canopy.Buffer) -> None:
    data = os.urandom(4096)
    assert buf.write(data) == 4096
    assert bytes(buf.read()) == data
    assert buf.numpy("uint8").tobytes() == data


def test_write_at_an_offset_and_read_a_range(buf: canopy.Buffer) -> None:
    buf.write(b"\x00" * 4096)
    assert buf.write(b"abc", offset=100) == 3
    assert bytes(buf.read(5, offset=99)) == b"\x00abc\x00"


def test_write_takes_numpy_arrays_and_memoryviews(buf: canopy.Buffer) -> None:
    a = np.arange(1024, dtype=np.float32)
    buf.write(a)
    assert np.array_equal(np.frombuffer(buf.read(), dtype=np.float32), a)
    buf.write(memoryview(b"xyz"), offset=8)
    assert bytes(buf.read(3, offset=8)) == b"xyz"
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.write(a.reshape(32, 32)[:, ::2])


def test_a_whole_large_buffer_moves_in_one_request(client: canopy.Client) -> None:
    n = 8 << 20  # far past the old 512 KiB cap
    data = np.random.default_rng(1).integers(0, 255, n, dtype=np.uint8)
    with client.create_buffer(n) as b:
        assert b.write(data) == n
        out = np.empty(n, dtype=np.uint8)
        assert b.readinto(out) == n
        assert np.array_equal(out, data)


def test_a_read_past_the_end_returns_what_there_is(buf: canopy.Buffer) -> None:
    buf.write(b"\x05" * 4096)
    got = buf.read(100, offset=4000)
    assert bytes(got) == b"\x05" * 96
    out = bytearray(10)
    assert buf.readinto(out, offset=4090) == 6


def test_an_empty_write_is_valid(buf: canopy.Buffer) -> None:
    assert buf.write(b"") == 0


def test_a_write_past_the_end_is_bad_request_and_the_connection_stays(buf: canopy.Buffer) -> None:
    with pytest.raises(canopy.BadRequest) as e:
        buf.write(b"\x01" * 5000)
    assert "writing 5000 bytes at offset 0 runs past the end of the 4096-byte buffer" in e.value.message
    # The daemon read and dropped the bytes: the same connection still serves requests.
    assert buf.write(b"ok") == 2
    assert bytes(buf.read(2)) == b"ok"


def test_writes_and_reads_of_unknown_and_released_buffers_fail(client: canopy.Client) -> None:
    unknown = "00000000000000000000000000000000.99.1"
    message = f"buffer: no buffer '{unknown}' (not a buffer ID nor a preloaded arena's name)"
    with pytest.raises(canopy.UnknownBuffer) as e:
        client.write_buffer(unknown, b"abc")
    assert e.value.message == message
    with pytest.raises(canopy.UnknownBuffer) as e:
        client.read_buffer(unknown, 3)
    assert e.value.message == message
    b = client.create_buffer(4096)
    b.release()
    for call in (lambda: b.write(b"abc"), lambda: b.read(3)):
        with pytest.raises(canopy.StaleBuffer) as e:
            call()
        assert e.value.message == f"buffer: buffer {b.id} was released"
    assert client.status()["workers"]  # the refused attachment was read and dropped: the stream holds


def test_an_offset_past_the_end_is_bad_request(buf: canopy.Buffer) -> None:
    with pytest.raises(canopy.BadRequest) as e:
        buf.read(3, offset=5000)
    assert e.value.message == "offset 5000 is past the end of the 4096-byte buffer"
    with pytest.raises(canopy.BadRequest) as e:
        buf.write(b"x", offset=4097)
    assert e.value.message == "offset 4097 is past the end of the 4096-byte buffer"


def test_transfers_are_ordered_with_tasks(client: canopy.Client, buf: canopy.Buffer) -> None:
    t = buf.tensor("float32", 1024)
    client.submit("sleep_ms", "sub0", canopy.i64(50))
    client.submit("fill", "sub0", canopy.Out(t), canopy.f32(2.0))  # queued behind the sleep on sub0
    # Without waiting: the read waits for the fill, which writes its bytes.
    assert set(np.frombuffer(buf.read(), dtype=np.float32)) == {2.0}
    client.submit("scale", "sub1", canopy.InOut(t), canopy.f32(3.0))
    buf.write(np.full(4, 9.0, dtype=np.float32))  # after the scale: ordered over those bytes
    f = client.submit("scale", "sub0", canopy.InOut(t), canopy.f32(2.0))  # after the write
    assert f.result(timeout=10).ok
    got = np.frombuffer(buf.read(), dtype=np.float32)
    assert list(got[:5]) == [18.0, 18.0, 18.0, 18.0, 12.0]


def test_an_attachment_over_the_limit_is_refused_and_the_client_reconnects() -> None:
    d = Daemon(control={"max_attachment_bytes": 1024})
    try:
        with canopy.connect(d.socket) as c, c.create_buffer(4096) as b:
            with pytest.raises(canopy.BadRequest) as e:
                b.write(b"\x01" * 4096)
            assert e.value.message == (
                "attachment of 4096 bytes exceeds control.max_attachment_bytes (1024); closing the connection"
            )
            # The daemon closed that connection; the next request goes out on a new one.
            assert b.write(b"\x02" * 1024) == 1024
            assert bytes(b.read(2)) == b"\x02\x02"
    finally:
        d.stop()
