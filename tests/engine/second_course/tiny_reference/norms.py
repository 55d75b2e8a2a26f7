import numpy as np


def squared_norm(x):
    """The sum of the squares of x."""
    return float(np.sum(x * x))


def normalise(x):
    """x divided by its Euclidean norm."""
    return x / np.sqrt(squared_norm(x))
