from autograder.engine.checking import check_close
from autograder.engine.harness import call, seeded
from tiny_reference import averages as reference


def check_center(center):
    x = seeded(1).normal(size=7)
    check_close(call(center, x, on="seven random numbers"), reference.center(x), "center(x)",
                "it should be x minus its mean")


def check_standardise(standardise):
    x = seeded(2).normal(size=9) * 5.0
    check_close(call(standardise, x, on="nine random numbers"), reference.standardise(x), "standardise(x)",
                "it should be (x - mean) / std, with the population std (ddof=0)")
