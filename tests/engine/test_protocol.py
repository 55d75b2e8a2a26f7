"""Messages between the grader and the sandbox carry plain data only, within limits."""

import io
import pickle
import struct

import numpy as np
import pytest

from autograder.engine import protocol


def round_trip(value):
    stream = io.BytesIO()
    tree, blobs = protocol.encode(value)
    protocol.send(stream, {"value": tree}, blobs)
    stream.seek(0)
    header, blobs = protocol.receive(stream)
    return protocol.decode(header["value"], blobs)


def test_plain_values_arrive_as_they_left():
    value = [np.arange(6.0).reshape(2, 3), (np.float32(1.5), True, None, "text"),
             {"W": np.eye(2), "layers": [{"b": np.zeros(2, dtype=np.int64)}]}, float("nan"), 3]
    back = round_trip(value)
    assert isinstance(back[1], tuple) and back[1][0].dtype == np.float32
    assert np.array_equal(back[0], value[0]) and back[2]["layers"][0]["b"].dtype == np.int64
    assert np.isnan(back[3]) and back[4] == 3


def test_anything_else_arrives_as_an_unsupported_marker():
    class Sneaky(np.ndarray):
        def __eq__(self, other):
            return True

    back = round_trip([lambda: 1, np.array([object()]), np.zeros(2).view(Sneaky)])
    assert back[0] == protocol.Unsupported("function") and isinstance(back[1], protocol.Unsupported)
    assert type(back[2]) is np.ndarray  # a subclass travels as its data, without its methods


def test_a_random_generator_arrives_in_its_state():
    rng = np.random.default_rng(3)
    rng.random(5)
    back = round_trip({"rng": rng})["rng"]
    assert type(back) is np.random.Generator and back is not rng
    assert np.array_equal(back.random(4), rng.random(4))
    other = np.random.Generator(np.random.MT19937(0))   # not the default kind: not sent
    assert isinstance(round_trip(other), protocol.Unsupported)


@pytest.mark.parametrize("body", [["1", "2", 0], ["x", "2", 0, 0], ["1", "2", -1, 0],
                                  ["1" * 50, "2", 0, 0], "12"])
def test_a_malformed_generator_is_refused(body):
    with pytest.raises(protocol.WireError, match="generator"):
        protocol.decode({"generator": body}, [])


def test_a_pickled_array_is_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(protocol.WireError, match="not a plain .npy"):
        protocol.decode({"ndarray": 0}, [buffer.getvalue()])
    with pytest.raises(protocol.WireError):
        protocol.decode({"ndarray": 0}, [pickle.dumps(np.zeros(2))])


@pytest.mark.parametrize("tree", [{"ndarray": 5}, {"eval": "1"}, {"dict": [[1, 2]]}, [1, 2],
                                  {"float": "1e999"}])
def test_malformed_values_are_refused(tree):
    with pytest.raises(protocol.WireError):
        protocol.decode(tree, [])


def test_arrays_the_receiver_holds_travel_as_references_it_resolves():
    held = np.arange(3.0)
    tree, blobs = protocol.encode([held, np.ones(2)], refer=lambda array: 7 if array is held else None)
    assert tree == {"list": [{"ref": 7}, {"ndarray": 0}]} and len(blobs) == 1
    stream = io.BytesIO()
    protocol.send(stream, {"value": tree}, blobs)
    stream.seek(0)
    _, blobs = protocol.receive(stream)
    decoded = {}
    back = protocol.decode(tree, blobs, referenced=lambda index: held.copy() if index == 7 else None, arrays=decoded)
    assert np.array_equal(back[0], held) and np.array_equal(back[1], np.ones(2))
    assert list(decoded) == [0] and decoded[0] is back[1]
    with pytest.raises(protocol.WireError, match="unknown tag 'ref'"):  # where no reference is expected
        protocol.decode(tree, blobs)


def test_an_oversized_or_cut_message_is_refused_before_it_is_read():
    huge = io.BytesIO(struct.pack(">Q", 10 ** 12) + b"{}")
    with pytest.raises(protocol.WireError, match="larger than"):
        protocol.receive(huge)
    cut = io.BytesIO(struct.pack(">Q", 100) + b"{")
    with pytest.raises(protocol.WireError, match="cut off"):
        protocol.receive(cut)
    assert protocol.receive(io.BytesIO(b"")) is None


def test_a_numpy_scalar_and_a_0d_array_arrive_0d():
    back = round_trip([np.int64(-1), np.float32(2.5), np.array(3.0)])
    assert [np.ndim(x) for x in back] == [0, 0, 0] and back[0] == -1 and back[0].dtype == np.int64


@pytest.mark.parametrize("array", [np.arange(6.0).reshape(2, 3), np.zeros((0, 3)), np.ones(3, dtype=bool),
                                   np.arange(5, dtype=">i4"), np.array([1 + 2j]), np.zeros((1,) * 32),
                                   np.arange(12.0).reshape(3, 4).T, np.zeros(10 ** 5, dtype=np.uint8)])
def test_arrays_travel_as_the_npy_that_np_save_writes_and_np_load_reads(array):
    """The wire writes and reads .npy itself (np.load parses its header as a Python literal, ten
    times slower): byte for byte what np.save writes, read back as np.load reads it."""
    stream = io.BytesIO()
    protocol.send(stream, {}, protocol.encode(array)[1])
    stream.seek(0)
    _, (blob,) = protocol.receive(stream)
    expected = io.BytesIO()
    np.save(expected, np.ascontiguousarray(array), allow_pickle=False)
    assert blob == expected.getvalue()
    ours, numpys = protocol.decode({"ndarray": 0}, [blob]), np.load(io.BytesIO(blob), allow_pickle=False)
    assert ours.dtype == numpys.dtype and ours.shape == numpys.shape and np.array_equal(ours, numpys)
    assert ours.flags.writeable and ours.flags.c_contiguous


def test_an_npy_that_the_wire_does_not_write_is_read_by_np_load_or_refused():
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(np.arange(6.0).reshape(2, 3)), allow_pickle=False)
    assert np.array_equal(protocol.decode({"ndarray": 0}, [fortran.getvalue()]), np.arange(6.0).reshape(2, 3))
    short = io.BytesIO()
    np.save(short, np.arange(4.0), allow_pickle=False)
    with pytest.raises(protocol.WireError, match="not a plain .npy"):
        protocol.decode({"ndarray": 0}, [short.getvalue()[:-8]])  # its header promises more bytes
    text = io.BytesIO()
    np.save(text, np.array(["a"]), allow_pickle=False)
    with pytest.raises(protocol.WireError, match="not numbers"):
        protocol.decode({"ndarray": 0}, [text.getvalue()])


def test_a_message_of_many_arrays_leaves_in_one_write_of_the_stream_buffer():
    """Both ends wrap their socket in buffers of STREAM_BUFFER bytes: a message of many small arrays
    is one send (each send wakes the reader, which a message sent frame by frame did dozens of times)."""
    class Socket(io.RawIOBase):
        def __init__(self):
            self.writes, self.data = 0, bytearray()

        def writable(self):
            return True

        def write(self, chunk):
            self.writes += 1
            self.data += chunk
            return len(chunk)

    raw = Socket()
    stream = io.BufferedWriter(raw, protocol.STREAM_BUFFER)
    value = [{"K": np.ones((4, 8)), "V": np.zeros((4, 8))} for _ in range(50)]
    tree, blobs = protocol.encode(value)
    protocol.send(stream, {"value": tree}, blobs)
    assert raw.writes == 1
    header, blobs = protocol.receive(io.BytesIO(bytes(raw.data)))
    assert np.array_equal(protocol.decode(header["value"], blobs)[49]["K"], np.ones((4, 8)))
