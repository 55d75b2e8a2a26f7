"""Counting the positions that a notebook's functions are given (for the key/value-cache check).

Also copied into the sandbox beside its runner, which counts there when the
grader asks: it depends only on the standard library and NumPy.
"""

import contextlib

import numpy as np


@contextlib.contextmanager
def counting_positions(namespace, counted, skip=None):
    """While the block runs, count the positions given to the functions `counted` of `namespace`.

    `counted` maps a name to (the argument that holds the positions, "tokens"
    for (B, T) token ids or "vectors" for (..., d) arrays). The functions are
    replaced in `namespace` by counting ones, and put back afterwards; a name
    that is not a function of `namespace`, or is `skip`, is not counted.
    Yields {name: positions}.
    """
    originals = {name: namespace[name] for name in counted
                 if callable(namespace.get(name)) and namespace[name] is not skip}
    counts = dict.fromkeys(originals, 0)

    def counting(name, original):
        where, kind = counted[name]

        def counted_call(*args, **kwargs):
            if len(args) > where:
                shape = np.shape(args[where])
                counts[name] += int(np.prod(shape if kind == "tokens" else shape[:-1]))
            return original(*args, **kwargs)
        return counted_call

    namespace.update({name: counting(name, original) for name, original in originals.items()})
    try:
        yield counts
    finally:
        namespace.update(originals)
