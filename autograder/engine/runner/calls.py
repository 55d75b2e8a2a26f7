"""A check's call of a student's function, its stand-ins asking the grader for their answers."""

import builtins
import signal
import time
import weakref
from _blake2 import blake2b  # hashlib's, without the import of OpenSSL's hashes

import protocol
import standins
from runner.errors import describe
from runner.limits import CellTimeout, note_timeout, with_limits


class StandIns:
    """The stand-ins of the call running now: its names, and the channel to the grader."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.names = reader, writer, frozenset()
        self.sent = {}   # id(array) -> (weak reference, index, shape, dtype, digest): the grader's arrays
        self.count = 0   # arrays the grader has sent during the call (its arguments, the answers)

    def begin(self, arrays, count):
        """A call starts, with the grader's `arrays` ({index: array}) among its `count` arguments."""
        self.sent, self.count = {}, 0
        self.remember(arrays, count)

    def remember(self, arrays, count):
        """Note the arrays ({index: array}) of a message of `count` arrays that the grader sent
        during the call: sent back unchanged, to a stand-in or as arguments after the call, they
        travel as their index (`refer`)."""
        for index, array in arrays.items():
            self.sent[id(array)] = (weakref.ref(array), self.count + index, array.shape, array.dtype.str,
                                    _digest(array))
        self.count += count

    def refer(self, array):
        """The index of `array` if it is an array the grader sent during the call, unchanged (the
        same object, shape, type and bytes): the grader has it, it need not travel back. Else None."""
        known = self.sent.get(id(array))
        if known is None:
            return None
        reference, index, shape, dtype, digest = known
        if (reference() is not array or array.shape != shape or array.dtype.str != dtype
                or not array.flags.c_contiguous or _digest(array) != digest):
            return None
        return index

    def answer(self, name):
        """The answer for the notebook's function `name` (see `standins.stand_in`): the grader's,
        while a call that names it runs; Unbound for arguments that do not bind to the correct
        function's parameters (renamed or added by the student)."""
        def answer(*args, **kwargs):
            if name not in self.names:
                raise RuntimeError(f"{name}: this stand-in for the correct {name} answered only "
                                   "during the check's call")
            tree, blobs = protocol.encode([args, kwargs], refer=self.refer)
            kind = protocol.unsupported(tree)
            if kind is not None:
                raise TypeError(f"{name} was given a {kind}, which is not plain data (numbers, arrays, "
                                f"lists, dicts): your function is judged with a correct {name}, which "
                                "runs in the grader and can only be given plain data")
            reply, blobs = self._ask(name, tree, blobs)
            arrays = {}
            try:
                value = protocol.decode(reply["value"], blobs, arrays=arrays) if reply["op"] == "answer" else None
            finally:  # counted even when malformed: the indices stay the grader's
                self.remember(arrays, len(blobs))
            if reply["op"] == "answer":
                return value
            error = reply["error"] or {"ename": "RuntimeError", "evalue": ""}
            if reply["op"] == "unbound":
                raise standins.Unbound(error["evalue"])
            kind = getattr(builtins, error["ename"], None)
            raise (kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError)(error["evalue"])
        return answer

    def _ask(self, name, tree, blobs):
        """The grader's reply to the stand-in `name`'s arguments. The round trip is not interrupted
        by a time limit (it would leave half an answer unread): the alarm that fell in it is raised
        after; and the clock's limit stops while the grader computes (its time is not the
        student's; the CPU limit counts this process)."""
        masked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})
        wall, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            protocol.write(self.writer, "stand-in", protocol.RUNNER, blobs, name=name, arguments=tree)
            return protocol.read(self.reader, ("answer", "raised", "unbound"), protocol.GRADER)
        finally:
            if wall > 0:
                signal.setitimer(signal.ITIMER_REAL, wall)
            signal.pthread_sigmask(signal.SIG_SETMASK, masked)

    def swap(self, nb, function, names):
        """Make the notebook's functions of `names` answer as their stand-ins, however the student
        reaches them (`standins.swap`), a function stopped for time too (its aliases answer);
        never the called `function`. Return what undoes it all, in reverse order."""
        undos = []
        for name in names:
            value, kept = nb.namespace.get(name, standins.MISSING), nb.stopped.get(name)
            if kept is not None and kept is not value and kept is not function and standins.swappable(kept):
                undos.append(standins.retarget(kept, standins.stand_in(name, self.answer(name))))
            undos.append(standins.swap(nb.namespace, name, self.answer(name), called=function))
        self.names = frozenset(names)
        undo = standins.undoing(undos)

        def restore():
            self.names = frozenset()
            undo()
        return restore


def _digest(array):
    """A digest of the bytes of a C-ordered `array` (None for another): whether it changed."""
    if not array.flags.c_contiguous:
        return None
    return blake2b(array.reshape(-1).view("u1").data, digest_size=16).digest()


def serve(nb, stand_ins, pending, limits):
    """Run the call (the message that `pending` alone holds) of a function of the notebook; reply
    to the grader."""
    request, blobs = pending.pop()
    arrays = {}  # what stand-ins, and the arguments after the call, send back as references
    args, kwargs = protocol.decode(request["arguments"], blobs, arrays=arrays)
    stand_ins.begin(arrays, len(blobs))
    del blobs, arrays  # the arrays are decoded: their bytes would only take memory
    name = request["name"]
    cpu = time.process_time()
    with standins.answering() as answered:
        try:
            value = _run(nb, stand_ins, request, args, kwargs, limits)
        except BaseException as error:  # the student's function failed: report, go on
            _raised(nb, stand_ins, name, request["timeout"], error, answered, time.process_time() - cpu)
            return
    cpu = time.process_time() - cpu
    tree, out_blobs = protocol.encode(value)
    arguments, _ = protocol.encode([args, kwargs], refer=stand_ins.refer, blobs=out_blobs)  # unchanged: by index
    del value, args, kwargs  # nothing of a call outlives it (memory checks count it all)
    protocol.write(stand_ins.writer, "returned", protocol.RUNNER, out_blobs, value=tree, arguments=arguments,
                   cpu_seconds=cpu)


def _run(nb, stand_ins, request, args, kwargs, limits):
    """The value of the called function, its stand-ins swapped in; a function stopped for time
    that the grader revives runs once more (it ran out of time inside a function that stands in
    now)."""
    name = request["name"]
    function = nb.namespace.get(name)
    revived = request["revive"] and name in nb.stoppers and name in nb.stopped
    if revived:
        function = nb.namespace[name] = nb.stopped[name]
    restore = stand_ins.swap(nb, function, request["stand_ins"]) if request["stand_ins"] else None
    try:
        # a call's output goes nowhere: it has an allowance of its own, which what a
        # neighbour printed in the cells or in its own calls has not used up
        value, _, _ = with_limits(nb, lambda: function(*args, **kwargs), request["timeout"],
                                  limits["wall_factor"], [limits["output_chars"]])
        return value
    finally:
        if restore:
            restore()
        if revived:
            nb.namespace[name] = nb.stoppers[name]


def _raised(nb, stand_ins, name, timeout, error, answered, cpu):
    if isinstance(error, CellTimeout):  # blame the function the check called
        error = CellTimeout(name, timeout)
    note_timeout(nb, error, "in a check")
    described = describe(nb, error, inputs=False)
    if answered and not isinstance(error, CellTimeout):
        # its message may carry what the stand-ins answered (the reference's values)
        described["evalue"] = ("its message is not shown, as the correct "
                               f"{' and '.join(sorted(answered))} answered in the call")
    protocol.write(stand_ins.writer, "raised", protocol.RUNNER, error=described, cpu_seconds=cpu)
