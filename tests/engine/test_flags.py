"""The static look at a submission names what tampers with grading, and leaves honest code alone."""

import inspect

import pytest

from autograder.engine.flags import flags
from tests.support import COURSE
from autograder.samples.implementations import scaled_dot_product, transformer_decoder

TRICKS = {
    "from solutions.scaled_dot_product import softmax": "imports from `solutions",
    "import autograder.checks.harness as h": "imports `autograder",
    "np.allclose = lambda *a, **k: True": "patches np",
    "np.testing.assert_allclose = print": "patches np",
    "setattr(np, 'array_equal', lambda *a: True)": "patches it",
    "import builtins\nbuiltins.isinstance = lambda *a: True": "patches builtins",
    "get_ipython().ast_transformers.append(Strip())": "hook",
    "get_ipython().input_transformers_cleanup.append(f)": "hook",
    "import sys\nsys.excepthook = lambda *a: None": "hook",
    "np.ndarray.__eq__ = lambda a, b: True": "comparison",
    "open('/tmp/gradebook.db', 'w')": "gradebook",
    "import os\nos.kill(os.getppid(), 9)": "os.kill",
    "%time import solutions": "imports `solutions",
}


@pytest.mark.parametrize("code", TRICKS)
def test_each_trick_is_flagged(code):
    assert any(TRICKS[code] in flag for flag in flags(COURSE, [code])), flags(COURSE, [code])


def test_honest_code_is_not_flagged():
    honest = [inspect.getsource(f) for module in (scaled_dot_product, transformer_decoder)
              for f in module.CORRECT.values()]
    assert flags(COURSE, honest) == []


def test_code_that_does_not_parse_is_not_an_error():
    assert flags(COURSE, ["def broken(:"]) == []
