"""Messages between the grader and the sandbox carry plain data only, within limits."""

import io
import pickle
import struct

import numpy as np
import pytest

from autograder.engine import wire


def round_trip(value):
    stream = io.BytesIO()
    tree, blobs = wire.encode(value)
    wire.send(stream, {"value": tree}, blobs)
    stream.seek(0)
    header, blobs = wire.receive(stream)
    return wire.decode(header["value"], blobs)


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
    assert back[0] == wire.Unsupported("function") and isinstance(back[1], wire.Unsupported)
    assert type(back[2]) is np.ndarray  # a subclass travels as its data, without its methods


def test_a_random_generator_arrives_in_its_state():
    rng = np.random.default_rng(3)
    rng.random(5)
    back = round_trip({"rng": rng})["rng"]
    assert type(back) is np.random.Generator and back is not rng
    assert np.array_equal(back.random(4), rng.random(4))
    other = np.random.Generator(np.random.MT19937(0))   # not the default kind: not sent
    assert isinstance(round_trip(other), wire.Unsupported)


@pytest.mark.parametrize("body", [["1", "2", 0], ["x", "2", 0, 0], ["1", "2", -1, 0],
                                  ["1" * 50, "2", 0, 0], "12"])
def test_a_malformed_generator_is_refused(body):
    with pytest.raises(wire.WireError, match="generator"):
        wire.decode({"generator": body}, [])


def test_a_pickled_array_is_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(wire.WireError, match="not a plain .npy"):
        wire.decode({"ndarray": 0}, [buffer.getvalue()])
    with pytest.raises(wire.WireError):
        wire.decode({"ndarray": 0}, [pickle.dumps(np.zeros(2))])


@pytest.mark.parametrize("tree", [{"ndarray": 5}, {"eval": "1"}, {"dict": [[1, 2]]}, [1, 2],
                                  {"float": "1e999"}])
def test_malformed_values_are_refused(tree):
    with pytest.raises(wire.WireError):
        wire.decode(tree, [])


def test_an_oversized_or_cut_message_is_refused_before_it_is_read():
    huge = io.BytesIO(struct.pack(">Q", 10 ** 12) + b"{}")
    with pytest.raises(wire.WireError, match="larger than"):
        wire.receive(huge)
    cut = io.BytesIO(struct.pack(">Q", 100) + b"{")
    with pytest.raises(wire.WireError, match="cut off"):
        wire.receive(cut)
    assert wire.receive(io.BytesIO(b"")) is None


def test_a_numpy_scalar_and_a_0d_array_arrive_0d():
    back = round_trip([np.int64(-1), np.float32(2.5), np.array(3.0)])
    assert [np.ndim(x) for x in back] == [0, 0, 0] and back[0] == -1 and back[0].dtype == np.int64
