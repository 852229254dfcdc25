"""What a Python section runs on: a GPU through PyTorch, or the CPU (Triton's interpreter over
numpy arrays, or PyTorch's CPU tensors), and the imports that may be missing on a machine."""
import os
import sys

import numpy as np

from .options import CannotRun

CPU_REQUIREMENTS = "pip install -r scripts/requirements-cpu.txt"
GPU_REQUIREMENTS = "pip install -r scripts/requirements-gpu.txt"
# Without a GPU: PyTorch's CPU build (about 200 MB), not PyPI's CUDA build (about 4.7 GB installed).
CPU_TORCH = "pip install 'torch==2.11.*' --index-url https://download.pytorch.org/whl/cpu"


def cpu_requested(argv=None):
    """--cpu on the command line, or TRITON_INTERPRET=1 in the environment."""
    argv = sys.argv[1:] if argv is None else argv
    return "--cpu" in argv or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class _Missing:
    """Stands for a package that is not installed, so a section file still loads (its decorators and
    annotations evaluate to this) and the harness can validate the options first, then say what is
    missing (exit 77) instead of a traceback at import."""

    def __init__(self, name, why):
        self.lab_missing = (name, why)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return self

    def __getitem__(self, key):
        return self


def import_triton():
    """(triton, triton.language), or two _Missing. Under --cpu, Triton's interpreter is switched on
    before triton loads (it reads TRITON_INTERPRET when a kernel is decorated)."""
    if cpu_requested():
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
        import triton.language as tl
    except Exception as e:  # ImportError, or a broken install
        m = _Missing("triton", f"{type(e).__name__}: {e}")
        return m, m
    if os.environ.get("TRITON_INTERPRET") == "1":
        _fix_interpreter(tl)
    return triton, tl


def _fix_interpreter(tl):
    """Three gaps of Triton 3.6's interpreter, closed here so a kernel runs on the CPU as written and
    rounds as the GPU does: tl.dot of bf16 tiles multiplies their raw uint16 bits (bf16 is stored as
    uint16 in numpy); `.to(tl.bfloat16)` truncates where the GPU rounds to nearest even (a bias of
    half an ulp that the lab's tolerance sees); and a scalar used as a loop bound is converted with
    int() of a 1-element array, an error from numpy 2.4 on. None touches what a GPU compiles."""
    from .inputs import bf16_bits
    try:
        from triton.runtime import interpreter as it
    except Exception:  # another layout of the package: leave it as it is
        return
    dot = getattr(it.InterpreterBuilder, "create_dot", None)
    if dot is not None and not getattr(dot, "lab_fixed", False):
        def create_dot(self, a, b, d, *rest):
            def f32(h):
                if h.dtype == tl.bfloat16:
                    return it.TensorHandle((h.data.astype(np.uint32) << np.uint32(16)).view(np.float32), tl.float32)
                return h
            return dot(self, f32(a), f32(b), d, *rest)
        create_dot.lab_fixed = True
        it.InterpreterBuilder.create_dot = create_dot
    cast = getattr(it.InterpreterBuilder, "cast_impl", None)
    if cast is not None and not getattr(cast, "lab_fixed", False):
        def cast_impl(self, src, dst_type):
            if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
                return it.TensorHandle(bf16_bits(np.asarray(src.data, dtype=np.float32)), dst_type.scalar)
            return cast(self, src, dst_type)
        cast_impl.lab_fixed = True
        it.InterpreterBuilder.cast_impl = cast_impl
    patch = getattr(it, "_patch_lang_tensor", None)
    if patch is not None and not getattr(patch, "lab_fixed", False):
        def patch_tensor(tensor, scope):
            patch(tensor, scope)  # the scope restores the original attributes after the kernel
            tensor.__index__ = lambda self: int(np.asarray(self.handle.data).reshape(-1)[0])
        patch_tensor.lab_fixed = True
        it._patch_lang_tensor = patch_tensor


def missing(*modules):
    for m in modules:
        if isinstance(m, _Missing):
            name, why = m.lab_missing
            hint = CPU_REQUIREMENTS if cpu_requested() else GPU_REQUIREMENTS
            raise CannotRun(f"needs {name} ({why}); install it with `{hint}`")


def import_torch(cuda, section="it"):
    try:
        import torch
    except Exception as e:
        how = (f"`{GPU_REQUIREMENTS}`" if cuda else
               f"`{CPU_TORCH}` (the CPU build, about 200 MB; `scripts/lab run 10` installs it where pip can)")
        raise CannotRun(f"needs torch ({type(e).__name__}: {e}); install it with {how}")
    if cuda and not torch.cuda.is_available():
        # The reason, then "; " and the advice, as the C++ programs say it: scripts/lab shows the
        # reason alone (everything before the first ";").
        raise CannotRun(f"no CUDA GPU visible to PyTorch; add --cpu to run {section} on the CPU instead")
    return torch


class _Storage:
    def __init__(self, arr):
        self.arr = arr

    def data_ptr(self):
        return self.arr.ctypes.data

    def cpu(self):
        return self

    def copy_(self, other):
        pass  # the interpreter worked on this very memory


class HostTensor:
    """A numpy array dressed in the few torch.Tensor methods Triton's interpreter calls (data_ptr,
    untyped_storage, set_ ...), so a Triton kernel runs on the CPU without PyTorch. `dtype` is
    Triton's name of the element type ("fp16", "bf16" over uint16 bits, "fp32")."""

    def __init__(self, arr, dtype):
        self.arr = arr
        self.dtype = dtype

    def data_ptr(self):
        return self.arr.ctypes.data

    def untyped_storage(self):
        return _Storage(self.arr)

    def new_empty(self, *args, **kwargs):
        return HostTensor(self.arr, self.dtype)

    def set_(self, storage, offset, size, stride):
        self.arr = storage.arr
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.arr.shape

    def stride(self):
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def copy_(self, other):
        pass


def gpu_info(torch):
    prop = torch.cuda.get_device_properties(0)
    name = prop.name
    slug = name.lower()
    if slug.startswith("nvidia "):
        slug = slug[7:]
    slug = "".join(c if c.isalnum() else "-" for c in slug) or "unknown-gpu"
    driver = ""
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()
            driver = next((w for w in words if w.count(".") >= 1 and w.replace(".", "").isdigit()), "")
    except OSError:
        pass
    return {"name": name, "cc": f"{prop.major}.{prop.minor}", "sms": prop.multi_processor_count,
            "driver": driver, "slug": slug, "l2_bytes": getattr(prop, "L2_cache_size", 50 << 20)}


def to_device(torch, storage, dtype):
    """A numpy storage array (bf16 as uint16 bits) -> a CUDA tensor of the element type."""
    t = torch.from_numpy(np.ascontiguousarray(storage))
    if dtype == "bf16":
        t = t.view(torch.bfloat16)
    return t.cuda()


def to_host(torch, t, dtype):
    if dtype == "bf16":
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    return t.cpu().numpy()


def leading(whole, shape):
    """The view of `shape` at the start of a flat buffer (numpy or torch): what a kernel is handed
    of a buffer with a guard region after it."""
    return whole[:int(np.prod(shape))].reshape(shape)


def set_bits(whole, start, bits):
    """Sets the elements of a flat buffer (numpy or torch, 2- or 4-byte elements) from `start` on to
    the bit pattern `bits`."""
    if isinstance(whole, np.ndarray):
        whole.view(np.uint16 if whole.itemsize == 2 else np.uint32)[start:] = bits
        return
    import torch
    width = 8 * whole.element_size()
    signed = bits - (1 << width) if bits >= 1 << (width - 1) else bits
    whole.view(torch.int16 if width == 16 else torch.int32)[start:] = signed


def fetch(torch, whole, dtype):
    """A copy of a buffer on the host, as the storage array (bf16 as uint16 bits)."""
    if isinstance(whole, np.ndarray):
        return whole.copy()
    return to_host(torch, whole, dtype)
