"""The runner's state: one object, passed to whatever needs it."""

import types


class Notebook:
    """The student's notebook in this process: its namespace, and what runs now."""

    def __init__(self):
        self.main = types.ModuleType("__main__")  # the notebook's module, as in IPython
        self.namespace = self.main.__dict__
        self.shell = None          # IPython's shell around the namespace, once the notebook needs it
        self.get_ipython = None    # the notebook's get_ipython() (`kernel.install`)
        self.places = {}           # cell id -> where it is, in words (the grader's "places")
        self.own = {}              # the source of each of the student's own cells, by its code's file name
        self.future = 0            # compiler flags of the __future__ imports of the cells run so far
        self.cell = ("", "<cell>")  # the source of the cell running now, and its code's file name
        self.outputs = []          # the running cell's outputs, as nbformat's
        self.shown = None          # repr of the value the running cell displayed
        self.display_kept = 8_000_000  # characters of displayed data still kept for the executed notebook
        self.limit = 0.0           # CPU seconds of the cell or call running now
        self.stoppers = {}         # name -> the function raising TimeoutError that replaces it
        self.stopped = {}          # name -> the notebook's function that a stopper replaced
        self.channel = None        # the grader's socket (reader, writer), while the cells run
