"""Reference solutions of the tiny course."""
