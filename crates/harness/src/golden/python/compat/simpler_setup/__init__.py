"""scenes' own `simpler_setup`: the names a scene-test file of the original
uses, with the behaviour its harness gives them."""
from .scene_test import (  # noqa: F401
    CallableNamespace,
    Scalar,
    SceneTestCase,
    SceneTestLevel,
    TaskArgsBuilder,
    TensorArg,
    scene_level,
    scene_test,
)
import os as _os

# The original's shared goldens (`simpler_setup.goldens.*`) are test code of
# the checkout: they are imported from it where they stand.
_root = _os.environ.get("SCENE_SIMPLER_ROOT")
if _root:
    __path__.append(_os.path.join(_root, "simpler_setup"))
