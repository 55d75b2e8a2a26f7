"""The protocol loop: the notebook's cells, then the checks' calls (see `protocol`)."""

import os
import socket
import sys
import time
import warnings

import protocol
from runner import calls, cells, kernel, limits
from runner.errors import describe
from runner.state import Notebook


def main(fd, started):
    channel = socket.socket(fileno=fd)
    reader = channel.makefile("rb", protocol.STREAM_BUFFER)
    writer = channel.makefile("wb", protocol.STREAM_BUFFER)
    request, _ = protocol.read(reader, ("run",), protocol.GRADER)
    nb = Notebook()
    kernel.install(nb)
    sys.modules["__main__"] = nb.main
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")  # as IPython
    imported = time.monotonic()
    given = set(nb.namespace)
    sys.displayhook = cells.displayhook(nb)
    limits.install(nb)
    limits.restrict(request["limits"])  # from here on, the student's code runs
    run_cells(nb, request, reader, writer)
    given |= set(nb.shell.user_ns_hidden) if nb.shell else set()
    functions = sorted(name for name, value in nb.namespace.items()
                       if callable(value) and not name.startswith("_") and name not in given
                       and not isinstance(value, type(os)))
    protocol.write(writer, "ran", protocol.RUNNER, functions=functions, started=started, imported=imported,
                   cpu_seconds=time.process_time())
    serve_calls(nb, reader, writer, request["limits"])


def run_cells(nb, request, reader, writer):
    """Run the notebook's cells, each within its limits; report each (a "cell" message)."""
    for name, reason in request["stopped"].items():
        limits.stop_calling(nb, name, reason)
    nb.places.update(request["places"])
    own_cells, stopping_cells = set(request["own_cells"]), set(request["stopping_cells"])
    budget = [request["limits"]["output_chars"]]  # the notebook's, for all its cells
    nb.channel = (reader, writer)
    for cell_id, source in request["cells"]:
        started, cpu = time.monotonic(), time.process_time()
        nb.shown = None
        nb.outputs.clear()
        filename = f"<cell {cell_id}>"
        if cell_id in own_cells:
            nb.own[filename] = (cell_id, source)
        timeout = request["cell_timeouts"].get(cell_id, request["cell_timeout"])
        try:
            error, out, err = limits.with_limits(nb, lambda: cells.run_cell(nb, source, filename), timeout,
                                                 request["limits"]["wall_factor"], budget)
        except BaseException as raised:  # a timeout between the shell's own handlers
            out = err = cells.CappedOutput(nb, [0])
            error = raised
        if cell_id in stopping_cells:
            limits.note_timeout(nb, error, f"in {nb.places.get(cell_id, 'a cell')}")
        limits.keep_stopped(nb)
        protocol.write(writer, "cell", protocol.RUNNER, id=cell_id, stdout=out.text(), stderr=err.text(),
                       error=describe(nb, error) if error is not None else None,
                       result=nb.shown if isinstance(nb.shown, str) else None, outputs=list(nb.outputs),
                       seconds=time.monotonic() - started, cpu_seconds=time.process_time() - cpu)
        del error  # its traceback's frames hold the cell's arrays, which the calls after it would pay for
    nb.channel = None
    nb.outputs.clear()


def serve_calls(nb, reader, writer, limits_):
    """Serve the checks' calls until the grader closes the channel."""
    stand_ins = calls.StandIns(reader, writer)
    while True:
        message = protocol.read(reader, ("call",), protocol.GRADER)
        if message is None:
            return
        pending = [message]
        del message  # `serve` holds the only reference: the arrays' bytes go once decoded
        calls.serve(nb, stand_ins, pending, limits_)
