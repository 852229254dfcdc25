#!/usr/bin/env python3
"""check_npy.py DIR: loads a section's --dump with numpy and checks it independently: shapes and
dtypes as documented, and O / LSE against attention recomputed here in float64 from the dumped
Q, K, V (bottom-right causal mask, GQA), so the .npy files are proven to be what they claim."""
import json
import sys
from pathlib import Path

try:
    import numpy as np
except ImportError:  # pip install -r scripts/requirements.txt
    print("SKIP: numpy is not installed (pip install -r scripts/requirements.txt)")
    sys.exit(77)

d = Path(sys.argv[1])
meta = json.loads((d / "meta.json").read_text())
p = meta["problem"]
B, H, HKV, TQ, TKV, D = p["b"], p["h"], p["h_kv"], p["t_q"], p["t_kv"], p["d"]
q, k, v, o, lse = (np.load(d / f"{n}.npy") for n in ("q", "k", "v", "o", "lse"))
assert q.shape == (B, TQ, H, D) and q.dtype == np.float32, q.shape
assert k.shape == (B, TKV, HKV, D) and v.shape == k.shape, k.shape
assert o.shape == q.shape and lse.shape == (B, H, TQ), (o.shape, lse.shape)
assert abs(meta["softmax_scale"] - 1 / np.sqrt(D)) < 1e-7

qd, kd, vd = (x.astype(np.float64) for x in (q, k, v))
group = H // HKV
kv_len = np.load(d / "kv_len.npy") if (d / "kv_len.npy").exists() else np.full(B, TKV)
worst = 0.0
for b in range(B):
    keys = int(kv_len[b])  # a sequence's valid keys; causal is bottom-right aligned to them
    pos = np.arange(TQ)[:, None] + (keys - TQ)
    j = np.arange(TKV)[None, :]
    mask = np.broadcast_to(j < keys, (TQ, TKV)).copy()
    if p["causal"]:
        mask &= j <= pos
    if p["window"]:
        mask &= j > pos - p["window"]
    for h in range(H):
        s = qd[b, :, h, :] @ kd[b, :, h // group, :].T / np.sqrt(D)
        s = np.where(mask, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        m_safe = np.where(np.isfinite(m), m, 0)
        e = np.exp(s - m_safe)
        l = e.sum(axis=1, keepdims=True)
        ref = np.where(l > 0, e / np.where(l > 0, l, 1), 0) @ vd[b, :, h // group, :]
        ref_lse = np.where(l[:, 0] > 0, m_safe[:, 0] + np.log(np.where(l[:, 0] > 0, l[:, 0], 1)), -np.inf)
        worst = max(worst, np.abs(o[b, :, h, :] - ref).max())
        finite = np.isfinite(ref_lse)
        assert np.array_equal(np.isneginf(lse[b, h]), ~finite), "LSE -inf exactly on rows with no key"
        worst = max(worst, np.abs(lse[b, h][finite] - ref_lse[finite]).max(initial=0))
tol = 1e-4 if p["dtype"] == "fp32" else 1e-2
print(f"numpy check of {d}: shapes ok, max |error| vs float64 numpy = {worst:.3g} (tolerance {tol})")
sys.exit(0 if worst <= tol else 1)
