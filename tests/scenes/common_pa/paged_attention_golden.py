"""Shared paged-attention golden: numpy port of simpler's
simpler_setup/goldens/paged_attention.py (online softmax over the blocks of
a paged KV cache, head tiling, one KV head).

Scenes import it from the scenes root (on sys.path for Python goldens):

    from common_pa.paged_attention_golden import compute_golden, generate_inputs

bf16 tensors arrive as float32 arrays holding bf16 values (the harness's
driver widens them); the softmax weights are rounded to bf16 as the
original's `pij.to(input_dtype).to(torch.float32)`. Shapes are read from
the tensors, so the 3-d (`[batch, heads, dim]`) and 4-d
(`[batch, 1, heads, dim]`) ports both work.
"""

import numpy as np


def bf16_round(x):
    """float32 -> nearest bf16 (ties to even) -> float32, NaN kept quiet."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = np.where(nan, (u | np.uint32(0x00400000)) & np.uint32(0xFFFF0000), rounded)
    return rounded.astype(np.uint32).view(np.float32)


def paged_attention(query, key_cache, value_cache, scale_value, block_table, context_lens, round_p=bf16_round):
    """Online-softmax paged attention, vectorised across the batch.

    query: (batch, num_heads, head_dim); key_cache / value_cache:
    (total_blocks, block_size, 1, head_dim); block_table: (batch, blocks)
    int; context_lens: (batch,) int. Returns (batch, num_heads, head_dim)
    float32.
    """
    assert key_cache.shape[2] == 1, "kv_head_num must be 1"
    batch, num_heads, head_dim = query.shape
    block_size = key_cache.shape[1]
    k_flat = key_cache.reshape(-1, block_size, head_dim).astype(np.float32)
    v_flat = value_cache.reshape(-1, block_size, head_dim).astype(np.float32)
    context_lens = np.asarray(context_lens, dtype=np.int64)
    out = np.zeros((batch, num_heads, head_dim), dtype=np.float32)
    q_tile = min(num_heads, 128)
    max_bn = int((context_lens.max() + block_size - 1) // block_size)
    scale = np.float32(scale_value)
    pos = np.arange(block_size)[None, :]
    for q_offset in range(0, num_heads, q_tile):
        q_size = min(q_tile, num_heads - q_offset)
        qi = query[:, q_offset : q_offset + q_size, :].astype(np.float32)
        oi = li = mi = None
        for bn in range(max_bn):
            valid_lens = np.clip(context_lens - bn * block_size, 0, block_size)
            active = valid_lens > 0
            if not active.any():
                break
            # Ended batches read block 0 (masked out below), never garbage.
            blocks = np.where(active, block_table[:, bn], 0)
            kj = k_flat[blocks]
            vj = v_flat[blocks]
            sij = np.matmul(qi, kj.transpose(0, 2, 1)) * scale
            valid = (pos < valid_lens[:, None])[:, None, :] & active[:, None, None]
            sij = np.where(valid, sij, np.float32(-np.inf))
            mij = np.maximum(sij.max(axis=-1, keepdims=True), np.float32(-1e30))
            pij = np.where(valid, np.exp(sij - mij), np.float32(0.0))
            pij = round_p(pij)
            lij = pij.sum(axis=-1, keepdims=True, dtype=np.float32)
            oi_new = np.matmul(pij, vj)
            if bn == 0:
                oi, li, mi = oi_new, lij, mij
            else:
                mi_new = np.maximum(mi, mij)
                alpha = np.exp(mi - mi_new)
                beta = np.exp(mij - mi_new)
                li = alpha * li + beta * lij
                oi = alpha * oi + beta * oi_new
                mi = mi_new
        out[:, q_offset : q_offset + q_size, :] = oi / li
    return out


def compute_golden(tensors, params):
    """Fills tensors["out"] in place."""
    block_table = np.asarray(tensors["block_table"])
    batch = block_table.shape[0]
    head_dim = tensors["key_cache"].shape[-1]
    query = tensors["query"].reshape(batch, -1, head_dim)
    scale = float(tensors.get("scale", 1.0))
    out = paged_attention(
        query=query,
        key_cache=tensors["key_cache"],
        value_cache=tensors["value_cache"],
        scale_value=scale,
        block_table=block_table,
        context_lens=tensors["context_lens"],
    )
    tensors["out"][...] = out.reshape(tensors["out"].shape)


def generate_inputs(params):
    """Inputs as simpler's generate_inputs (uniform query / caches in
    bf16), with per-batch lengths in 1..=context_len and a block table of
    distinct blocks (each batch's first blocks are its own), so a wrong
    block or length shows. The harness has seeded numpy already."""
    batch = params["batch"]
    num_heads = params["num_heads"]
    kv_head_num = params["kv_head_num"]
    head_dim = params["head_dim"]
    block_size = params["block_size"]
    context_len = params["context_len"]
    max_blocks = params["max_model_len"] // block_size
    per_batch = (context_len + block_size - 1) // block_size
    total_blocks = batch * per_batch
    context_lens = np.random.randint(1, context_len + 1, size=batch).astype(np.int32)
    block_table = np.zeros((batch, max_blocks), dtype=np.int32)
    block_table[:, :per_batch] = np.random.permutation(total_blocks).reshape(batch, per_batch)
    block_table[:, per_batch:] = np.random.randint(0, total_blocks, size=(batch, max_blocks - per_batch))

    def bf16(shape, low, high):
        return bf16_round(np.random.uniform(low, high, size=shape).astype(np.float32))

    cache_shape = (total_blocks, block_size, kv_head_num, head_dim)
    return [
        ("query", bf16((batch, num_heads, head_dim), -0.5, 0.5)),
        ("key_cache", bf16(cache_shape, -0.5, 0.5)),
        ("value_cache", bf16(cache_shape, -1.0, 1.0)),
        ("block_table", block_table),
        ("context_lens", context_lens),
        ("scale", 1.0),
    ]
