"""The original's `simpler.worker`, as far as a test file's import of it
goes: `Worker` is importable, so a file whose own `test_*` methods drive
the original's runtime still gives scenes its classes and cases. Using it
says plainly that scenes runs the cases, not the original's Worker."""


class _NotHere:
    """A name of the original's Worker machinery that scenes does not have."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *a, **k):
        raise NotImplementedError(
            f"simpler.worker.{self._name} is the original's runtime; scenes runs a file's cases, not its Worker"
        )

    def __getattr__(self, attr):
        raise NotImplementedError(
            f"simpler.worker.{self._name}.{attr} is the original's runtime; scenes runs a file's cases, not its Worker"
        )


Worker = _NotHere("Worker")
