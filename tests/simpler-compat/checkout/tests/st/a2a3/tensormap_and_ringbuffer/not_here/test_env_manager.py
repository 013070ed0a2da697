"""A file importing a name of the original's `simpler` package that
scenes' does not have (as the original's worker examples do through
`simpler_setup.kernel_compiler`): listed as not run, with the name."""

from simpler import env_manager  # noqa: F401
