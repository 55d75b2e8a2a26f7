from autograder.engine.checking import check_close
from autograder.engine.harness import call, seeded
from tiny_reference import norms as reference


def check_normalise(normalise):
    x = seeded(3).normal(size=5)
    check_close(call(normalise, x, on="five random numbers"), reference.normalise(x), "normalise(x)",
                "it should be x divided by its Euclidean norm")
