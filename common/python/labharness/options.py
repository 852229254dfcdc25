"""Options and validation, as common/harness/harness.cpp parses and checks them."""
import argparse
import math
import os
import re
from dataclasses import dataclass, field


class BadInput(Exception):
    """Refused before anything runs: exit 2 with this one line."""


class CannotRun(Exception):
    """This machine cannot run it (no GPU, a missing package): exit 77 with this one line."""


class NotChecked(Exception):
    """The student's code has no part for this run to check (an optional --bug branch the lab left
    out): "not checked here: <why>", exit 77, never PASS."""


@dataclass
class Section:
    name: str                      # file stem, "09_triton"
    title: str
    variants: list
    bugs: list = field(default_factory=list)
    head_dims: tuple = (64, 128)
    dtypes: tuple = ("fp16", "bf16")
    default: dict = field(default_factory=dict)   # b, h, t, d, dtype, causal
    # Under --cpu, the b, h, t that an option left out takes instead of `default`'s: a GPU's default
    # shape can be minutes of interpreted Python, so --cpu alone runs a small one that still crosses
    # tile edges (the C++ programs' --help example is --cpu --t 100).
    cpu_default: dict = field(default_factory=dict)
    cpu_seconds: object = None     # f(problem) -> rough seconds of a --cpu run: a slow one is said first
    supports_window: bool = False
    writes_lse: bool = True
    build: str = "solution"        # "lab" in a generated stub
    validate: object = None        # f(problem, options) -> "" or the reason it is refused
    cpu_what: str = "the kernel under Triton's interpreter (TRITON_INTERPRET=1): slow, small shapes"
    extra_options: object = None   # f(parser): a section's own options
    cpu_backend: str = "interpreter"  # --cpu runs: "interpreter" (Triton's, over numpy) or "torch" (CPU tensors)
    modules: tuple = ()            # imports the section needs (a missing one: exit 77, after validation)
    print_metrics: tuple = ()      # metrics printed in the summary
    # Rows past the end of Q, K, V and O (entries past the end of the LSE) that one tile of the kernel
    # can reach: its largest BLOCK_M or BLOCK_N. Each buffer gets a guard region that long after it,
    # NaN after the inputs and the poison after the outputs; the kernel is handed views of the exact
    # shapes. A load without its mask then reads NaN (the same on every run), and a store without one
    # lands in the guard, where the check sees it, not in memory the program does not own.
    guard_rows: int = 0
    # The likely mistake behind a read past the inputs' end ("read") and a write past O's ("write"),
    # in the section's own names; said, with a "?", after what the guard regions showed.
    guard_hints: dict = field(default_factory=dict)


@dataclass
class Problem:
    b: int
    h: int
    h_kv: int
    t_q: int
    t_kv: int
    d: int
    dtype: str
    causal: bool
    window: int = 0
    page_size: int = 0

    @property
    def q_elems(self):
        return self.b * self.t_q * self.h * self.d

    @property
    def kv_elems(self):
        return self.b * self.t_kv * self.h_kv * self.d

    @property
    def lse_elems(self):
        return self.b * self.h * self.t_q

    @property
    def softmax_scale(self):
        import numpy as np
        return float(np.float32(1.0) / np.sqrt(np.float32(self.d)))

    def describe(self):
        s = f"B={self.b} H={self.h}"
        if self.h_kv != self.h:
            s += f" H_kv={self.h_kv}"
        s += f" T={self.t_q}" if self.t_q == self.t_kv else f" T_q={self.t_q} T_kv={self.t_kv}"
        s += f" D={self.d} {self.dtype}"
        if self.causal:
            s += " causal"
        if self.window > 0:
            s += f" window={self.window}"
        return s

    def json(self):
        return {"b": self.b, "h": self.h, "h_kv": self.h_kv, "t_q": self.t_q, "t_kv": self.t_kv, "d": self.d,
                "dtype": self.dtype, "causal": self.causal, "window": self.window or None,
                "page_size": self.page_size or None}

    def flops(self):
        """The lab's one convention (problem.cpp): 4·B·H·T_q·T_kv·D, halved for causal; with a
        window or a mask, 4·D per visible pair."""
        if self.window > 0:
            import numpy as np
            i = np.arange(self.t_q) + (self.t_kv - self.t_q)
            end = np.minimum(self.t_kv, i + 1)
            begin = np.maximum(0, i - self.window + 1)
            return 4.0 * self.d * float(np.maximum(end - begin, 0).sum()) * self.b * self.h
        full = 4.0 * self.b * self.h * self.t_q * self.t_kv * self.d
        return full / 2 if self.causal else full

    def hbm_bytes(self):
        e = 4 if self.dtype == "fp32" else 2
        return (2 * self.q_elems + 2 * self.kv_elems) * e + self.lse_elems * 4


DTYPE_ALIASES = {"fp32": "fp32", "f32": "fp32", "float": "fp32", "fp16": "fp16", "f16": "fp16", "half": "fp16",
                 "bf16": "bf16"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits 2; the lab says one line, in the C++ words
        shown = [o for a in self._actions if a.help != argparse.SUPPRESS for o in a.option_strings if o.startswith("--")]
        raise BadInput(_as_cpp(message, shown))


def _typo_distance(a, b):
    """Edits (insert, delete, replace, swap two neighbours) between two words, as harness.cpp counts them."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def _meant_option(word, options):
    """The option a mistyped one most likely meant, as harness.cpp's meant_option; None if none is close."""
    best, best_d = None, max(1, len(word) // 4) + 1
    for name in options:
        dist = _typo_distance(word, name)
        if dist < best_d:
            best, best_d = name, dist
    return best


def _as_cpp(message, options=()):
    """argparse's messages in the words of the C++ programs (common/harness/harness.cpp); options:
    the parser's own, shown in --help (for the one a mistyped option meant)."""
    m = re.match(r"argument (\S+?)(?:/\S+)?: (?:invalid \w+ value|expected one argument)(?:: '(.*)')?$", message)
    if m:
        return f"{m.group(1)}: '{m.group(2)}' is not a value it takes (see --help)" if m.group(2) is not None \
            else f"{m.group(1)} needs a value (see --help)"
    m = re.match(r"unrecognized arguments: (.*)$", message)
    if m:
        words = m.group(1).split()
        unknown = next((w for w in words if w.startswith("--")), None)
        if unknown:
            meant = _meant_option(unknown.split("=")[0], options)
            return (f"unknown option {unknown.split('=')[0]} " +
                    (f"(did you mean {meant}? see --help)" if meant else "(see --help)"))
        one_dash = next((w for w in words if len(w) > 1 and w[0] == "-" and w[1] != "-" and not w[1].isdigit()), None)
        return (f"unexpected argument{'s' if len(words) > 1 else ''}: {' '.join(words)}"
                + (f" (options take two dashes: -{one_dash})" if one_dash else " (see --help)"))
    return message


def _given_twice(argv, parser):
    """An option with a value given more than once (argparse keeps the last; the C++ programs refuse)."""
    seen = set()
    for word in argv:
        name = word.split("=")[0]
        action = parser._option_string_actions.get(name)
        if action is None or action.nargs == 0:
            continue
        if action.dest in seen:
            return name
        seen.add(action.dest)
    return None


def parser_for(s):
    d = s.default

    def on_cpu(dim):
        return f"; {s.cpu_default[dim]} under --cpu" if dim in s.cpu_default else ""
    p = _Parser(prog=s.name, description=f"{s.name}: {s.title}", allow_abbrev=False)
    add = p.add_argument
    add("--b", type=int, default=d.get("b", 1), help=f"Batch size (sequences) (default %(default)s{on_cpu('b')})")
    add("--h", type=int, default=d.get("h", 8), help=f"Query heads (default %(default)s{on_cpu('h')})")
    add("--h-kv", type=int, default=None, help="K/V heads (GQA when < H); default H")
    add("--t", type=int, default=d.get("t", 1024), help=f"Query rows per sequence (T_q) (default %(default)s{on_cpu('t')})")
    add("--t-kv", type=int, default=None, help="Keys per sequence (T_kv); default T")
    add("--d", type=int, default=d.get("d", 64),
        help="Head dimension: " + ", ".join(map(str, s.head_dims)) + " (default %(default)s)")
    add("--dtype", default=d.get("dtype", "fp16"), help="Element type: " + ", ".join(s.dtypes) + " (default %(default)s)")
    add("--causal", action="store_true", help="Causal mask (bottom-right aligned when T_q != T_kv)")
    # Parsed everywhere, listed only where they apply: a section without them refuses them by name
    # (validate), which a student who copies a line from another section's handout needs to read.
    add("--window", type=int, default=None,
        help="Sliding window W (needs --causal)" if s.supports_window else argparse.SUPPRESS)
    add("--page-size", type=int, default=0, help=argparse.SUPPRESS)  # paged KV is section 06's (C++)
    add("--variant", default=s.variants[0], help="Variant: " + ", ".join(s.variants) + " (default %(default)s)")
    add("--bug", default="", help="Inject a pitfall: " + (", ".join(s.bugs) if s.bugs else "none in this section"))
    add("--seed", type=int, default=1234, help="Input seed (>= 0) (default %(default)s)")
    add("--magnitude", type=float, default=1.0, help="Scale of Q and K entries (default %(default)s)")
    add("--warmup", type=int, default=3, help="Untimed runs before timing (default %(default)s)")
    add("--iters", type=int, default=10, help="Timed runs (0: no timing) (default %(default)s)")
    add("--flush-l2", action="store_true", help="Flush the L2 cache before every timed run")
    add("--check", default="auto", help="Self-check: auto, full, sample, none (default %(default)s)")
    add("--sample-rows", type=int, default=1024,
        help="Rows checked in sample mode (at most; a row drawn twice is checked once) (default %(default)s)")
    # None when not given: an empty path given is bad input, not the option left out
    add("--json", default=None, help="Append the result record to this JSON file")
    add("--dump", default=None, help="Write inputs and outputs as .npy files to this folder")
    add("--cpu", action="store_true", help="Run " + s.cpu_what)
    add("--quiet", action="store_true", help="Print only the verdict line (after a failure, the check's reason above it)")
    if s.extra_options:
        s.extra_options(p)
    return p


def parser_default(s, dest):
    return parser_for(s).get_default(dest)


def _mem_bytes():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 62


def _given(argv, parser):
    """The dests of the options on the command line (argparse cannot tell a default from a value)."""
    given = set()
    for word in argv:
        action = parser._option_string_actions.get(word.split("=")[0])
        if action is not None:
            given.add(action.dest)
    return given


def parse(argv, s):
    from .backend import cpu_requested
    parser = parser_for(s)
    o = parser.parse_args(argv)
    twice = _given_twice(argv, parser)
    if twice:
        raise BadInput(f"{twice} is given more than once")
    o.cpu_defaults = []  # the dimensions that took --cpu's default, for the banner
    if s.cpu_default and (o.cpu or cpu_requested(argv)):
        given = _given(argv, parser)
        for dim, value in s.cpu_default.items():
            if dim not in given:
                setattr(o, dim, value)
                o.cpu_defaults.append(dim)
    dtype = DTYPE_ALIASES.get(o.dtype)
    if dtype is None:
        raise BadInput(f"unknown dtype '{o.dtype}' (fp32, fp16, bf16)")
    if o.seed < 0:
        raise BadInput(f"--seed must be >= 0 (got {o.seed})")
    if o.window is not None and o.window < 1:
        raise BadInput(f"--window must be >= 1 (got {o.window})")
    p = Problem(b=o.b, h=o.h, h_kv=o.h if o.h_kv is None else o.h_kv, t_q=o.t,
                t_kv=o.t if o.t_kv is None else o.t_kv, d=o.d, dtype=dtype, causal=o.causal,
                window=o.window or 0, page_size=o.page_size)
    why = validate(p, o, s)
    if why:
        raise BadInput(why)
    o.problem = p
    return o


def validate(p, o, s):
    for name, v in (("B", p.b), ("H", p.h), ("H_kv", p.h_kv), ("T", p.t_q), ("T_kv", p.t_kv), ("D", p.d)):
        if v < 1:
            return f"{name} must be >= 1 (got {v})"
    if max(p.t_q, p.t_kv) > 1 << 24:
        return f"T={max(p.t_q, p.t_kv)} exceeds the lab's limit of {1 << 24} rows"
    if max(float(p.q_elems), float(p.kv_elems)) > 1e13:
        return "Q or K/V would hold more than 1e13 elements: beyond any memory (B, H or T too large)"
    if p.h_kv > p.h or p.h % p.h_kv:
        return (f"H={p.h} is not a multiple of H_kv={p.h_kv} "
                "(each K/V head must serve a whole group of query heads)")
    if p.d not in s.head_dims:
        return f"D={p.d} is not supported by {s.name} (supported: {', '.join(map(str, s.head_dims))})"
    if p.dtype not in s.dtypes:
        return f"dtype {p.dtype} is not supported by {s.name} (supported: {', '.join(s.dtypes)})"
    if p.window > 0 and not p.causal:
        return "--window needs --causal (a sliding window is a causal mask)"
    if p.window > 0 and not s.supports_window:
        return f"--window is not supported by {s.name} (sliding windows are section 07)"
    if p.page_size:
        return f"--page-size is not supported by {s.name} (it reads a contiguous K/V cache; paged KV is section 06)"
    if o.variant not in s.variants:
        return f"unknown variant '{o.variant}' for {s.name} (variants: {', '.join(s.variants)})"
    if o.bug and o.bug not in s.bugs:
        return (f"unknown bug '{o.bug}' for {s.name} " +
                (f"(bugs: {', '.join(s.bugs)})" if s.bugs else "(this section has none)"))
    if not (o.magnitude > 0 and math.isfinite(o.magnitude)):
        return "--magnitude must be a positive number"
    if o.warmup < 0 or o.iters < 0:
        return "--warmup and --iters must be >= 0"
    if o.check not in ("auto", "full", "sample", "none"):
        return f"unknown --check mode '{o.check}' (auto, full, sample, none)"
    if o.sample_rows < 1:
        return "--sample-rows must be >= 1"
    need = (3 * p.q_elems + 2 * p.kv_elems) * 4 + p.lse_elems * 12
    if need > _mem_bytes():
        return f"the problem's tensors need {need / 1e9:.3g} GB of host memory; this machine has {_mem_bytes() / 1e9:.3g} GB"
    if s.validate:
        return s.validate(p, o) or ""
    return ""
