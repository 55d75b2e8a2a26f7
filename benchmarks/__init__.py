"""Scripts that measure the grader and print figures (not run by `make test`)."""
