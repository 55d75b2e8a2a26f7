"""``python -m runner FD SITE_PACKAGES...`` (in the sandbox), or this file run as a script
(unisolated: our own code)."""

import os
import sys
import time

STARTED = time.monotonic()  # the interpreter is up: what follows is imports

if __package__ in (None, ""):  # run as a file: the folder above holds the runner's files
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path += sys.argv[2:]  # the packages' folders (NumPy...), when started without `site`

from runner.loop import main  # noqa: E402

if __name__ == "__main__":
    main(int(sys.argv[1]), STARTED)
