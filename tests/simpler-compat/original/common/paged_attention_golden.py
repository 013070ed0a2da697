"""Paged attention (ex_tmr_paged_attention, tmr_batch_paged_attention) with online softmax over the
KV blocks, numpy, mirroring the behaviour of simpler's shared golden
(simpler_setup/goldens/paged_attention.py) that the original test uses:
scores and the running max / sum / output in f32, each block's
probabilities rounded to the input dtype before they are summed and
multiplied with V. Sizes come from the tensors themselves; only the dtype
comes from the case's params."""

import numpy as np


def _to_input_dtype(x, dtype):
    """Round f32 values to the input dtype and back (nearest even)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype in ("bfloat16", "bf16"):
        bits = x.view(np.uint32)
        lsb = (bits >> np.uint32(16)) & np.uint32(1)
        bits = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
        return bits.view(np.float32)
    if dtype in ("float16", "f16", "half"):
        return x.astype(np.float16).astype(np.float32)
    return x


def paged_attention(query, key_cache, value_cache, block_table, context_lens, scale, dtype):
    """query [B, H, D]; caches [blocks, block_size, 1, D]; block_table
    [B, max_blocks]; context_lens [B]. Returns [B, H, D] f32."""
    batch, heads, head_dim = query.shape
    block_size = key_cache.shape[1]
    assert key_cache.shape[2] == 1, "one KV head (kv_head_num = 1), as the original"
    k_blocks = key_cache.reshape(-1, block_size, head_dim)
    v_blocks = value_cache.reshape(-1, block_size, head_dim)
    q = query.astype(np.float32)
    lens = context_lens.astype(np.int64).reshape(batch)
    n_blocks = int((lens.max() + block_size - 1) // block_size)
    positions = np.arange(block_size)

    acc = run_max = run_sum = None
    for j in range(n_blocks):
        # tokens of block j each request still has (0 once it is done)
        valid = np.clip(lens - j * block_size, 0, block_size)
        live = positions[None, :] < valid[:, None]                 # [B, bs]
        ids = block_table[:, j].astype(np.int64)
        kj = k_blocks[ids].astype(np.float32)                      # [B, bs, D]
        vj = v_blocks[ids].astype(np.float32)
        s = np.matmul(q, kj.transpose(0, 2, 1)) * np.float32(scale)  # [B, H, bs]
        s = np.where(live[:, None, :], s, np.float32(-np.inf))
        m = np.maximum(s.max(axis=-1), np.float32(-1e30))          # [B, H]
        p = np.where(live[:, None, :], np.exp(s - m[..., None]), np.float32(0))
        p = _to_input_dtype(p, dtype)
        l = p.sum(axis=-1, dtype=np.float32)
        o = np.matmul(p, vj)                                       # [B, H, D]
        if j == 0:
            acc, run_max, run_sum = o, m, l
        else:
            new_max = np.maximum(run_max, m)
            alpha = np.exp(run_max - new_max)
            beta = np.exp(m - new_max)
            run_sum = alpha * run_sum + beta * l
            acc = alpha[..., None] * acc + beta[..., None] * o
            run_max = new_max
    return (acc / run_sum[..., None]).astype(np.float32)


def compute_golden(tensors, params):
    with np.errstate(over="ignore", invalid="ignore"):
        tensors["out"][:] = paged_attention(
            tensors["query"],
            tensors["key_cache"],
            tensors["value_cache"],
            tensors["block_table"],
            tensors["context_lens"],
            float(tensors.get("scale", 1.0)),
            params.get("dtype", "bfloat16"),
        )
