"""`sharpo demo` and `sharpo compare` recipes."""
