"""scenes' stand-in for the original's `simpler` package (names only where a
test file imports them; behaviour written from its documented meaning)."""
