"""Helpers the figure modules share: reading a section's constants from its source, so a figure
drawn from them cannot drift from the code."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def constant(section, name):
    """The integer value of `constexpr int NAME = <int>;` in solutions/<section>.cu."""
    text = (ROOT / "solutions" / f"{section}.cu").read_text()
    m = re.search(rf"constexpr int {name} = (\d+);", text)
    if not m:
        raise SystemExit(f"figures: no `constexpr int {name} = N;` in solutions/{section}.cu")
    return int(m.group(1))


def require(section, snippet):
    """Fails (and so the figure is not drawn) if the section's source no longer contains snippet:
    the figure encodes that piece of code."""
    if snippet not in (ROOT / "solutions" / f"{section}.cu").read_text():
        raise SystemExit(f"figures: solutions/{section}.cu changed ({snippet!r} not found): update the figure")


def visible_keys(i, t_q, t_kv, causal):
    """lab::visible_keys (common/toolbox/attention_math.h) without a window: [begin, end)."""
    pos = i + (t_kv - t_q)  # bottom-right aligned
    end = min(t_kv, pos + 1) if causal else t_kv
    end = max(end, 0)
    return 0, end
