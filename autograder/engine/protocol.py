"""The messages between the grader and a sandboxed notebook: plain data only.

The wire: a message is a JSON header followed by binary blobs, each frame preceded by
its length. Values are None, booleans, numbers, strings, lists, tuples,
dicts with string keys, NumPy arrays of numbers or booleans (sent as
``.npy`` without pickle) and NumPy random generators of the default kind
(PCG64, sent as the numbers of their state). Anything else travels as an `Unsupported` marker
naming its type. An array that the receiver sent during the same call, and
that comes back unchanged, may travel as its index instead (`encode`'s
`refer`, `decode`'s `referenced`). Nothing received is unpickled or executed, and every size
is capped, so a hostile sender can make a message fail to decode but never
make the receiver run its code or run out of memory.

The messages: each has an "op" and the fields that `RUNNER` (what the runner sends)
and `GRADER` (what the grader sends) declare; `read` receives one of the kinds expected
at that point and gives its fields checked and cleaned (a string where a string is due,
capped; a number where a number is due, never negative...), or WireError. Both ends read
with it, so the protocol exists once, here:

  grader -> run {cells: [[id, source]...], cell_timeout, cell_timeouts: {id: s},
                 stopping_cells, stopped: {function: reason}, places: {id: words},
                 own_cells, limits: {...}}
  runner -> shell {argv, stdin, merged, cwd, env}     (while a cell runs: a shell command)
  grader -> shell {stdout, stderr, status, timed_out} or {refused: why}
  runner -> cell {id, stdout, stderr, error, result, outputs, seconds, cpu_seconds}  (per cell)
  runner -> ran {functions, started, imported, cpu_seconds}
  grader -> call {name, timeout, stand_ins: [names], revive, arguments: [args, kwargs]}
    while it runs, per call of a stand-in:
    runner -> stand-in {name, arguments}
    grader -> answer {value} | raised {error} | unbound {error}
  runner -> returned {value, arguments, cpu_seconds} | raised {error, cpu_seconds}

An error is {ename, evalue, mro, function, within, place, inputs, frames} (`plain_error`).
Names of the notebook's functions that the runner reports ("ran") or asks for ("stand-in")
are never `_`-prefixed: the runner never sends one (`__builtins__` in the hidden checks'
namespace would replace their builtins), so a message holding one is refused.

This file is also copied into the sandbox, where the runner imports it: it
must depend only on the standard library and NumPy.
"""

import io
import json
import math
import re
import struct

import numpy as np

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_STRING = 100_000
MAX_ITEMS = 100_000  # values in one message, counted recursively
MAX_DEPTH = 32
ARRAY_KINDS = "biufc"  # bool, int, unsigned, float, complex: no objects, no strings
UFUNCS = ("exp",)  # NumPy functions a check may pass as an argument (sent by name, nothing executed)

_LENGTH = struct.Struct(">Q")
# The buffer of each end's socket streams (`socket.makefile(mode, STREAM_BUFFER)`): a message
# smaller than this leaves in one send and arrives in one read. With the default 8 KiB, a message
# of many arrays left in many small sends, each one waking the other process to read a piece.
STREAM_BUFFER = 256 * 1024


class WireError(Exception):
    """A message that breaks the format or its limits."""


class Unsupported:
    """A value that is not plain data (a function, an object...), by its type name."""

    def __init__(self, type_name):
        self.type_name = str(type_name)[:200]

    def __repr__(self):
        return f"<a {self.type_name} object>"

    def __eq__(self, other):
        return isinstance(other, Unsupported) and other.type_name == self.type_name

    __hash__ = None


# -- values <-> (JSON tree, blobs) ---------------------------------------------

def encode(value, refer=None, blobs=None):
    """(tree, blobs): `value` as JSON-able data plus its arrays (which `send` writes as .npy).

    `refer(array)`: the index of an array the receiver holds already (`decode`'s `referenced`),
    sent as that index instead of its bytes, or None. `blobs`: a list to add the arrays to (that
    of another value of the same message)."""
    blobs = [] if blobs is None else blobs

    def walk(x, depth):
        if depth > MAX_DEPTH:
            return {"unsupported": "deeply nested value"}
        if x is None or isinstance(x, (bool, str)):
            return x[:MAX_STRING] if isinstance(x, str) else x
        if isinstance(x, int):
            return x if abs(x) < 2 ** 63 else float(x)
        if isinstance(x, float):
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, np.generic) and x.dtype.kind in ARRAY_KINDS:
            return {"scalar": _blob(np.asarray(x), blobs)}
        if isinstance(x, np.ndarray) and x.dtype.kind in ARRAY_KINDS:
            index = refer(x) if refer is not None else None
            if index is not None:
                return {"ref": index}
            return {"ndarray": _blob(np.asarray(x), blobs)}  # a subclass travels as its data
        if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
            return {type(x).__name__: [walk(item, depth + 1) for item in x]}
        if isinstance(x, dict) and type(x) is dict and all(isinstance(k, str) for k in x):
            return {"dict": [[key[:MAX_STRING], walk(item, depth + 1)] for key, item in x.items()]}
        if isinstance(x, np.ufunc) and x.__name__ in UFUNCS and getattr(np, x.__name__) is x:
            return {"ufunc": x.__name__}
        if type(x) is np.random.Generator and type(x.bit_generator) is np.random.PCG64:
            state = x.bit_generator.state
            return {"generator": [str(state["state"]["state"]), str(state["state"]["inc"]),
                                  int(state["has_uint32"]), int(state["uinteger"])]}
        return {"unsupported": type(x).__name__}

    return walk(value, 0), blobs


def unsupported(tree):
    """The type name of the first value of `encode`'s `tree` that is not plain data, or None."""
    if isinstance(tree, dict):
        if set(tree) == {"unsupported"}:
            return tree["unsupported"]
        tree = next(iter(tree.values()), None) if len(tree) == 1 else None
    if isinstance(tree, list):
        return next((kind for kind in map(unsupported, tree) if kind is not None), None)
    return None


def _blob(array, blobs):
    # written as .npy by `send`, one at a time; ascontiguousarray makes a 0-d array 1-d: reshaped back
    blobs.append(np.ascontiguousarray(array).reshape(np.shape(array)))
    return len(blobs) - 1


def decode(tree, blobs, referenced=None, arrays=None):
    """The value that `encode` turned into (tree, blobs); WireError when malformed.

    `referenced(index)`: the receiver's array that `encode`'s `refer` gave that index (WireError
    when it has none); without it, a reference is malformed. `arrays`: a dict given the arrays
    decoded, by their blob's index."""
    count = [0]

    def walk(x, depth):
        count[0] += 1
        if count[0] > MAX_ITEMS or depth > MAX_DEPTH:
            raise WireError("the value is too large or too deeply nested")
        if x is None or isinstance(x, (bool, int, float)):
            return x
        if isinstance(x, str):
            return x[:MAX_STRING]
        if not (isinstance(x, dict) and len(x) == 1):
            raise WireError(f"unexpected value {type(x).__name__}")
        (tag, body), = x.items()
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag in ("ndarray", "scalar"):
            array = _array(blobs, body)
            if tag == "scalar":
                return array[()]
            if arrays is not None:
                arrays[body] = array
            return array
        if tag == "ref" and referenced is not None:
            return referenced(body)
        if tag in ("list", "tuple") and isinstance(body, list):
            items = [walk(item, depth + 1) for item in body]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and isinstance(body, list):
            pairs = {}
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise WireError("malformed dict")
                pairs[pair[0]] = walk(pair[1], depth + 1)
            return pairs
        if tag == "generator":
            return _generator(body)
        if tag == "ufunc" and body in UFUNCS:
            return getattr(np, body)
        if tag == "unsupported" and isinstance(body, str):
            return Unsupported(body)
        raise WireError(f"unknown tag {tag!r}")

    return walk(tree, 0)


def _generator(body):
    """A PCG64 generator in the state `body` = [state, inc, has_uint32, uinteger] (decimal strings, ints)."""
    if not (isinstance(body, list) and len(body) == 4
            and all(isinstance(n, str) and n.isdigit() and len(n) <= 40 for n in body[:2])
            and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2 ** 32 for n in body[2:])):
        raise WireError("malformed random generator")
    generator = np.random.Generator(np.random.PCG64())
    try:
        generator.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": int(body[0]), "inc": int(body[1])},
            "has_uint32": body[2], "uinteger": body[3]}
    except (ValueError, TypeError, OverflowError) as error:
        raise WireError(f"malformed random generator ({error})") from None
    return generator


def _array(blobs, index):
    if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(blobs)):
        raise WireError("reference to a missing array")
    array = _plain_npy(blobs[index])
    if array is None:  # not as `send` writes it: NumPy's own reader decides
        try:
            array = np.load(io.BytesIO(blobs[index]), allow_pickle=False)
        except Exception as error:  # anything np.load rejects is a malformed message
            raise WireError(f"not a plain .npy array ({error})") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in ARRAY_KINDS or array.ndim > 32:
        raise WireError("an array that is not numbers or booleans")
    return array


# The .npy of an array of numbers in C order, as `send` writes it (format 1.0). Read by
# `_plain_npy` with one match instead of np.load's parse of a Python literal, ten times faster:
# every call of a student's function carries its arrays through here twice, each way.
_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_HEADER = re.compile(rb"\{'descr': '([<>|][biufc][0-9]{1,2})', 'fortran_order': False, "
                         rb"'shape': \(((?:[0-9]{1,18}, )*(?:[0-9]{1,18},?)?)\), \} *\n")


def _npy_header(array):
    """The .npy header (format 1.0) of a C-ordered `array` of numbers, byte for byte as np.save
    writes it: spare spaces for its first axis to grow, then padding to 64 bytes."""
    text = f"{{'descr': '{array.dtype.str}', 'fortran_order': False, 'shape': {array.shape}, }}"
    text += " " * (21 - len(str(array.shape[0]))) if array.shape else ""
    text += " " * (64 - (len(text) + 1 + len(_MAGIC) + 2) % 64) + "\n"
    return _MAGIC + struct.pack("<H", len(text)) + text.encode()


def _plain_npy(data):
    """The array of `data` when it is a .npy that `send` writes (`_npy_header`, then exactly its
    bytes), else None."""
    if not data.startswith(_MAGIC) or len(data) < 10:
        return None
    (length,) = struct.unpack_from("<H", data, 8)
    match = _NPY_HEADER.fullmatch(data, 10, 10 + length)
    if match is None:
        return None
    dtype = np.dtype(match[1].decode())
    shape = tuple(int(n) for n in match[2].split(b",") if n.strip())
    if len(shape) > 32 or len(data) - 10 - length != math.prod(shape) * dtype.itemsize:
        return None
    return np.frombuffer(data, dtype, offset=10 + length).reshape(shape).copy()  # writable, as np.load's


# -- framing -------------------------------------------------------------------

def send(stream, header, blobs=()):
    """Write one message (a JSON-able dict and its blobs) to a binary stream."""
    for frame in (json.dumps({**header, "blobs": len(blobs)}).encode(), *blobs):
        if isinstance(frame, np.ndarray):  # an array of `encode` (C order): its .npy, written as is
            npy_header = _npy_header(frame)
            stream.write(_LENGTH.pack(len(npy_header) + frame.nbytes))
            stream.write(npy_header)
            stream.write(frame.reshape(-1).view(np.uint8).data)  # frame by frame: no copy of the message
            continue
        stream.write(_LENGTH.pack(len(frame)))
        stream.write(frame)
    stream.flush()


def receive(stream, max_bytes=MAX_MESSAGE_BYTES):
    """(header, blobs) of the next message, None at the end of the stream."""
    budget = [max_bytes]

    def frame():
        prefix = _read_exactly(stream, _LENGTH.size)
        if prefix is None:
            return None
        (length,) = _LENGTH.unpack(prefix)
        budget[0] -= length
        if budget[0] < 0:
            raise WireError(f"a message larger than {max_bytes} bytes")
        data = _read_exactly(stream, length)
        if data is None:
            raise WireError("the message was cut off")
        return data

    first = frame()
    if first is None:
        return None
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        raise WireError("the header is not JSON") from None
    count = header.get("blobs") if isinstance(header, dict) else None
    if not (isinstance(count, int) and 0 <= count <= MAX_ITEMS):
        raise WireError("the header is not a message")
    blobs = []
    for _ in range(count):
        blob = frame()
        if blob is None:
            raise WireError("the message was cut off")
        blobs.append(blob)
    return header, blobs


def _read_exactly(stream, size):
    chunks, missing = [], size
    while missing:
        chunk = stream.read(missing)
        if not chunk:
            if missing == size:
                return None
            raise WireError("the message was cut off")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


# -- messages ------------------------------------------------------------------

def text(value, limit=20_000):
    """`value` if a string (at most `limit` characters), else ""."""
    return value[:limit] if isinstance(value, str) else ""


def optional_text(value, limit=20_000):
    return value[:limit] if isinstance(value, str) else None


def number(value):
    """`value` if a number that is not negative, else 0."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


def identifier(value):
    """`value` if it names a function that may be the notebook's: an identifier, not `_`-prefixed."""
    if not (isinstance(value, str) and value.isidentifier() and not value.startswith("_")):
        raise WireError(f"not a name of the notebook's functions: {str(value)[:100]!r}")
    return value


def _name_or_none(value):
    return value if isinstance(value, str) and value.isidentifier() else None


def function_names(value):
    """The names of the notebook's functions of a "ran" message: identifiers (others are left out),
    never `_`-prefixed (WireError: the runner leaves those out)."""
    if not isinstance(value, list):
        raise WireError("no list of functions")
    return [identifier(name) for name in value if isinstance(name, str) and name.isidentifier()]


def plain_error(error):
    """An error as plain data, its fields capped (None for no error)."""
    if not isinstance(error, dict):
        return None
    mro = error.get("mro")
    return {"ename": text(error.get("ename"), 100) or "Exception", "evalue": text(error.get("evalue"), 2000),
            "function": _name_or_none(error.get("function")), "within": _name_or_none(error.get("within")),
            "place": text(error.get("place"), 500) or None, "inputs": text(error.get("inputs"), 500) or None,
            "mro": [m for m in mro if isinstance(m, str)][:50] if isinstance(mro, list) else [],
            "frames": _frames(error.get("frames"))}


def _frames(frames):
    """The runner's traceback frames ([cell id, line, function or None], None for frames left
    out), the malformed ones dropped, at most 31."""
    kept = []
    for frame in frames[:31] if isinstance(frames, list) else ():
        if frame is None:
            kept.append(None)
        elif (isinstance(frame, list) and len(frame) == 3 and isinstance(frame[0], str)
              and re.fullmatch(r"[0-9]{1,6}", frame[0]) and isinstance(frame[1], int)
              and not isinstance(frame[1], bool)):
            function = text(frame[2], 200)  # the student's name: one line, or nothing
            kept.append([frame[0], frame[1], function if function and function.isprintable() else None])
    return kept


def _any(value):
    return value


def _flag(value):
    return bool(value)


def _list(value):
    return value if isinstance(value, list) else []


def _dict(value):
    return value if isinstance(value, dict) else {}


def _string(value):
    if not isinstance(value, str):
        raise WireError("a string is missing")
    return value


def _positive(value):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        raise WireError("a time limit is missing")
    return float(value)


def _names(value):
    return [name for name in _list(value) if isinstance(name, str)]


# What each end sends: op -> {field: its cleaner (raises WireError when it cannot be had)}.
RUNNER = {
    "shell": {"argv": _any, "stdin": _any, "merged": _flag, "cwd": _any, "env": _dict},
    "cell": {"id": _string, "stdout": text, "stderr": text, "error": plain_error,
             "result": optional_text, "outputs": _list, "seconds": number, "cpu_seconds": number},
    "ran": {"functions": function_names, "started": number, "imported": number, "cpu_seconds": number},
    "stand-in": {"name": identifier, "arguments": _any},
    "returned": {"value": _any, "arguments": _any, "cpu_seconds": number},
    "raised": {"error": plain_error, "cpu_seconds": number},
}
GRADER = {
    "run": {"cells": _list, "cell_timeout": _positive, "cell_timeouts": _dict, "stopping_cells": _names,
            "stopped": _dict, "places": _dict, "own_cells": _names, "limits": _dict},
    "shell": {"stdout": text, "stderr": text, "status": _any, "timed_out": _flag, "refused": optional_text},
    "call": {"name": _string, "timeout": _positive, "stand_ins": _names, "revive": _flag, "arguments": _any},
    "answer": {"value": _any},
    "raised": {"error": plain_error},
    "unbound": {"error": plain_error},
}


def parse(header, ops, sender):
    """The message `header` as {"op": op, field: cleaned value...} when its op is one of `ops`
    among the messages of `sender` (`RUNNER` or `GRADER`); WireError otherwise."""
    op = header.get("op") if isinstance(header, dict) else None
    if op not in ops or op not in sender:
        raise WireError(f"an unexpected message ({str(op)[:40]!r} where {' or '.join(ops)} was due)")
    return {"op": op, **{field: clean(header.get(field)) for field, clean in sender[op].items()}}


def read(stream, ops, sender, max_bytes=MAX_MESSAGE_BYTES):
    """(message, blobs): the next message, one of `ops` of `sender` (`parse`); None at the end."""
    received = receive(stream, max_bytes)
    if received is None:
        return None
    header, blobs = received
    return parse(header, ops, sender), blobs


def write(stream, op, sender, blobs=(), **fields):
    """Send the message `op` of `sender` with `fields` (checked against its declaration)."""
    unknown = set(fields) - set(sender[op])
    if unknown:
        raise WireError(f"{op} has no field {sorted(unknown)[0]!r}")
    send(stream, {"op": op, **fields}, blobs)
