"""What test files import from the original's `simpler.task_interface`,
written by scenes from the names and their meaning."""
import ctypes
import enum
import struct


class ArgDirection(enum.Enum):
    SCALAR = 0
    IN = 1
    OUT = 2
    INOUT = 3


class DataType(enum.Enum):
    FLOAT32 = 0
    FLOAT16 = 1
    INT32 = 2
    INT16 = 3
    INT8 = 4
    UINT8 = 5
    BFLOAT16 = 6
    INT64 = 7
    UINT64 = 8
    UINT16 = 9
    UINT32 = 10
    FP8E4M3FN = 12
    FP8E8M0 = 13
    FP4E2M1 = 14


class TensorArgType(enum.Enum):
    INPUT = 0
    OUTPUT = 1
    INOUT = 2
    OUTPUT_EXISTING = 3
    NO_DEP = 4


_MASK = (1 << 64) - 1


def scalar_to_uint64(value):
    """The 64 bits a scalar argument carries: a Python float as IEEE single
    bits, ctypes floats and doubles as their own bits, anything else as an
    integer (two's complement)."""
    if isinstance(value, float):
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if isinstance(value, ctypes.c_float):
        return struct.unpack("<I", struct.pack("<f", value.value))[0]
    if isinstance(value, ctypes.c_double):
        return struct.unpack("<Q", struct.pack("<d", value.value))[0]
    if isinstance(value, ctypes._SimpleCData):
        return int(value.value) & _MASK
    return int(value) & _MASK


class _Unsupported:
    """A name white-box tests import whose machinery scenes does not have."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *a, **k):
        raise NotImplementedError(f"simpler.task_interface.{self._name} is not available under scenes")

    def __getattr__(self, attr):
        raise NotImplementedError(f"simpler.task_interface.{self._name} is not available under scenes")


class TaskArgs:
    """A task's arguments as a level-3 orchestration builds them for
    `submit_next_level` / `submit_sub`: tensors, each with the
    TensorArgType tag that makes its dependencies, then scalars as their
    64 bits. Under scenes a tensor is a reference to one of the case's
    TensorArgs (what `_build_l3_task_args` and `_rehosted_ref` give)."""

    def __init__(self):
        self._tensors = []
        self._tags = []
        self._scalars = []

    def add_tensor(self, tensor, tag=TensorArgType.INPUT):
        if not isinstance(tag, TensorArgType):
            tag = TensorArgType(tag)
        self._tensors.append(tensor)
        self._tags.append(tag)

    def add_scalar(self, value):
        self._scalars.append(scalar_to_uint64(value))

    def tensor_count(self):
        return len(self._tensors)

    def scalar_count(self):
        return len(self._scalars)

    def tensor(self, i):
        return self._tensors[i]

    def tag(self, i):
        return self._tags[i]

    def scalar(self, i):
        return self._scalars[i]


class CallConfig:
    """A run's configuration as an orchestration passes it on; scenes
    reads none of it (the case's `config` is applied by the harness)."""

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)


CommBufferSpec = _Unsupported("CommBufferSpec")
ChipCallable = _Unsupported("ChipCallable")
CoreCallable = _Unsupported("CoreCallable")
