"""paged_attention_py: inputs and golden in Python (numpy), from the shared
module next to the scenes (tests/scenes/common_pa/paged_attention_golden.py,
a port of simpler's simpler_setup/goldens/paged_attention.py)."""

from common_pa.paged_attention_golden import compute_golden, generate_inputs  # noqa: F401
