import numpy as np


def center(x):
    """x minus its mean."""
    return x - np.mean(x)


def standardise(x):
    """x centred and divided by its (population) standard deviation."""
    return center(x) / np.std(x)
