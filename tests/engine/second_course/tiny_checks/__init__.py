"""Hidden checks of the tiny course."""
