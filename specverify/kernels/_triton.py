"""The ``@triton.jit`` kernels and their launchers (private; imported only when a triton kernel is requested).

Whether these run compiled (CUDA) or in the Triton interpreter (CPU tensors) is fixed when this module is imported:
``TRITON_INTERPRET=1`` must be set before. A GPU run and an interpreted run therefore need separate processes.

Each program handles BLOCK_B requests as a [BLOCK_B, BLOCK_V] tile and walks the vocabulary in BLOCK_V chunks. On a
GPU BLOCK_B is 1 (one program per request, enough programs to fill the chip); in the interpreter, where every program
costs milliseconds of Python, one program takes up to 128 requests.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specverify.kernels.layout import PAD_TOKEN_ID, CategoricalResult, ChainResult, check_contiguous, compute_dtype

_NOT_FOUND = 2**31 - 1
_TL_DTYPE = {torch.float32: tl.float32, torch.float64: tl.float64}
_NUM_WARPS = 8


@triton.jit
def _first_rejection(
    draft_token_ids_ptr,
    draft_probs_ptr,
    target_probs_ptr,
    u_accept_ptr,
    r64,
    live,
    n,
    vocab_size,
    GAMMA: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # phase 1, a [BLOCK_B, BLOCK_K] tile of positions, scalar gathers only: final = first rejection, else n
    kk = tl.arange(0, BLOCK_K)[None, :]
    owned = live[:, None] & (kk < n[:, None])
    x = tl.load(draft_token_ids_ptr + r64[:, None] * GAMMA + kk, mask=owned, other=0)
    in_vocab = (x >= 0) & (x < vocab_size)
    ok = owned & in_vocab
    target_offset = (r64[:, None] * (GAMMA + 1) + kk) * vocab_size + x
    target_prob = tl.load(target_probs_ptr + target_offset, mask=ok, other=0.0).to(ACC)
    draft_prob = tl.load(draft_probs_ptr + (r64[:, None] * GAMMA + kk) * vocab_size + x, mask=ok, other=0.0).to(ACC)
    u = tl.load(u_accept_ptr + r64[:, None] * GAMMA + kk, mask=ok, other=1.0)
    rejected = owned & (((draft_prob > 0) & (u * draft_prob < target_prob)) == 0)
    final = tl.minimum(tl.min(tl.where(rejected, kk, BLOCK_K), axis=1), n)
    bad_token = tl.max((owned & (in_vocab == 0)).to(tl.int32), axis=1)
    return final, x, bad_token


@triton.jit
def _scan_rows(
    draft_probs_ptr,
    target_probs_ptr,
    r64,
    live,
    n,
    final,
    rejected,
    vocab_size,
    GAMMA: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # phase 2: one pass over each request's owned rows, which are contiguous (target rows 0..n, draft rows 0..n-1;
    # target row k and draft row k sit at the same offset k*V): flag invalid entries, and accumulate the final row's
    # masses and last positive index in [BLOCK_B, BLOCK] tiles that are reduced once at the end
    idx0 = tl.arange(0, BLOCK)[None, :]
    t_len = ((n + 1) * vocab_size)[:, None]
    d_len = (n * vocab_size)[:, None]
    lo = (final * vocab_size)[:, None]
    res_row = (rejected != 0)[:, None]
    t_base = (r64 * (GAMMA + 1) * vocab_size)[:, None]
    d_base = (r64 * GAMMA * vocab_size)[:, None]
    bad = tl.zeros(idx0.shape, tl.int32) + live[:, None] * 0
    acc_res = bad.to(ACC)
    acc_tgt = bad.to(ACC)
    last_res = bad - 1
    last_tgt = bad - 1
    span = (tl.max(tl.where(live, n, 0)) + 1) * vocab_size
    for off in range(0, span, BLOCK):
        idx = off + idx0
        m_t = live[:, None] & (idx < t_len)
        m_d = live[:, None] & (idx < d_len)
        target_probs = tl.load(target_probs_ptr + t_base + idx, mask=m_t, other=0.0).to(ACC)
        draft_probs = tl.load(draft_probs_ptr + d_base + idx, mask=m_d, other=0.0).to(ACC)
        bad = bad | (m_t & (((target_probs >= 0) & (target_probs < float("inf"))) == 0)).to(tl.int32)
        bad = bad | (m_d & (((draft_probs >= 0) & (draft_probs < float("inf"))) == 0)).to(tl.int32)
        col = idx - lo
        here = m_t & (col >= 0) & (col < vocab_size)
        w = tl.where(here, target_probs, 0.0)
        r = tl.where(here & res_row, tl.maximum(target_probs - draft_probs, 0.0), 0.0)
        acc_tgt += w
        acc_res += r
        last_tgt = tl.maximum(last_tgt, tl.where(w > 0, col, -1))
        last_res = tl.maximum(last_res, tl.where(r > 0, col, -1))
    return (
        tl.max(bad, axis=1),
        tl.sum(acc_res, axis=1),
        tl.sum(acc_tgt, axis=1),
        tl.max(last_res, axis=1),
        tl.max(last_tgt, axis=1),
    )


@triton.jit
def _inverse_cdf(
    target_row_ptr,
    draft_row_ptr,
    use_res,
    need,
    thresh,
    vocab_size,
    ACC: tl.constexpr,
    BLOCK_V: tl.constexpr,
    NOT_FOUND: tl.constexpr,
):
    # phase 3: first index whose running sum exceeds thresh; weights are the residual where use_res, else the target.
    # "first index past thresh" rather than "count below thresh": chunked prefix sums need not be monotone
    cols0 = tl.arange(0, BLOCK_V)[None, :]
    first = need.to(tl.int32) * 0 + NOT_FOUND
    carry = thresh * 0
    for v0 in range(0, vocab_size, BLOCK_V):
        cols = v0 + cols0
        m_t = need[:, None] & (cols < vocab_size)
        target_probs = tl.load(target_row_ptr[:, None] + cols, mask=m_t, other=0.0).to(ACC)
        draft_probs = tl.load(draft_row_ptr[:, None] + cols, mask=m_t & use_res[:, None], other=0.0).to(ACC)
        w = tl.where(use_res[:, None], tl.maximum(target_probs - draft_probs, 0.0), target_probs)
        cdf = tl.cumsum(w, axis=1) + carry[:, None]
        hit = m_t & (cdf > thresh[:, None])
        first = tl.minimum(first, tl.min(tl.where(hit, cols, NOT_FOUND), axis=1))
        carry += tl.sum(w, axis=1)
    return first


@triton.jit
def _store_round(
    tokens_ptr,
    num_accepted_ptr,
    status_ptr,
    rows,
    live,
    final,
    x,
    token,
    error,
    status,
    GAMMA: tl.constexpr,
    PAD_ID: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # phase 4: accepted drafts, then the recovered/bonus token, then padding; nothing at all on an error
    kk = tl.arange(0, BLOCK_K)[None, :]
    out = tl.where(kk < final[:, None], x, tl.where(kk == final[:, None], token[:, None], PAD_ID))
    out = tl.where(error[:, None], PAD_ID, out)
    r64 = rows.to(tl.int64)
    tl.store(tokens_ptr + r64[:, None] * (GAMMA + 1) + kk, out.to(tl.int64), mask=live[:, None] & (kk <= GAMMA))
    tl.store(num_accepted_ptr + rows, tl.where(error, 0, final).to(tl.int32), mask=live)
    tl.store(status_ptr + rows, status, mask=live)


@triton.jit
def _chain_rejection_kernel(
    tokens_ptr,  # [B, GAMMA + 1] int64 out
    num_accepted_ptr,  # [B] int32 out
    status_ptr,  # [B] int32 out
    draft_token_ids_ptr,  # [B, GAMMA] int64
    num_draft_tokens_ptr,  # [B] int32
    draft_probs_ptr,  # [B, GAMMA, V]
    target_probs_ptr,  # [B, GAMMA + 1, V]
    u_accept_ptr,  # [B, GAMMA], compute dtype
    u_recover_ptr,  # [B, GAMMA + 1], compute dtype
    batch_size,
    vocab_size,
    GAMMA: tl.constexpr,
    ACC: tl.constexpr,
    PAD_ID: tl.constexpr,
    NOT_FOUND: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,  # next power of two >= GAMMA + 1
    BLOCK: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    live = rows < batch_size
    r64 = rows.to(tl.int64)
    n = tl.load(num_draft_tokens_ptr + rows, mask=live, other=0)
    bad_length = live & ((n < 0) | (n > GAMMA))
    n = tl.where(bad_length, 0, n)
    reads = live & (bad_length == 0)  # a request with a bad length owns no row
    final, x, bad_token = _first_rejection(
        draft_token_ids_ptr,
        draft_probs_ptr,
        target_probs_ptr,
        u_accept_ptr,
        r64,
        reads,
        n,
        vocab_size,
        GAMMA,
        ACC,
        BLOCK_K,
    )
    rejected = final < n
    invalid, mass_res, mass_tgt, last_res, last_tgt = _scan_rows(
        draft_probs_ptr, target_probs_ptr, r64, reads, n, final, rejected, vocab_size, GAMMA, ACC, BLOCK
    )
    error = (invalid != 0) | (bad_token != 0) | bad_length
    use_res = rejected & (mass_res > 0)
    last = tl.where(use_res, last_res, last_tgt)
    need = live & (error == 0) & (last >= 0)
    u = tl.load(u_recover_ptr + r64 * (GAMMA + 1) + final, mask=need, other=0.0)
    f64 = final.to(tl.int64)
    first = _inverse_cdf(
        target_probs_ptr + (r64 * (GAMMA + 1) + f64) * vocab_size,
        draft_probs_ptr + (r64 * GAMMA + f64) * vocab_size,
        use_res,
        need,
        u * tl.where(use_res, mass_res, mass_tgt),
        vocab_size,
        ACC,
        BLOCK_V,
        NOT_FOUND,
    )
    token = tl.where(need, tl.minimum(first, last), PAD_ID).to(tl.int64)
    status = (invalid != 0).to(tl.int32) | ((need == 0) & (error == 0)).to(tl.int32) * 2
    status = status | (bad_token != 0).to(tl.int32) * 4 | bad_length.to(tl.int32) * 8
    _store_round(
        tokens_ptr, num_accepted_ptr, status_ptr, rows, live, final, x, token, error, status, GAMMA, PAD_ID, BLOCK_K
    )


@triton.jit
def _categorical_kernel(
    tokens_ptr,  # [B] int64 out
    status_ptr,  # [B] int32 out
    probs_ptr,  # [B, V]
    uniforms_ptr,  # [B], compute dtype
    batch_size,
    vocab_size,
    ACC: tl.constexpr,
    PAD_ID: tl.constexpr,
    NOT_FOUND: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    live = rows < batch_size
    base = rows.to(tl.int64) * vocab_size
    cols0 = tl.arange(0, BLOCK_V)[None, :]
    bad = tl.zeros(cols0.shape, tl.int32) + live[:, None] * 0
    acc = bad.to(ACC)
    last = bad - 1
    for v0 in range(0, vocab_size, BLOCK_V):
        cols = v0 + cols0
        m = live[:, None] & (cols < vocab_size)
        probs = tl.load(probs_ptr + base[:, None] + cols, mask=m, other=0.0).to(ACC)
        bad = bad | (m & (((probs >= 0) & (probs < float("inf"))) == 0)).to(tl.int32)
        acc += probs
        last = tl.maximum(last, tl.where(probs > 0, cols, -1))
    invalid = tl.max(bad, axis=1)
    last = tl.max(last, axis=1)
    need = live & (invalid == 0) & (last >= 0)
    u = tl.load(uniforms_ptr + rows, mask=need, other=0.0)
    first = _inverse_cdf(
        probs_ptr + base, probs_ptr + base, rows < 0, need, u * tl.sum(acc, axis=1), vocab_size, ACC, BLOCK_V, NOT_FOUND
    )
    token = tl.where(need, tl.minimum(first, last), PAD_ID).to(tl.int64)
    status = (invalid != 0).to(tl.int32) | ((invalid == 0) & (last < 0)).to(tl.int32) * 2
    tl.store(tokens_ptr + rows, token, mask=live)
    tl.store(status_ptr + rows, status, mask=live)


INTERPRETED = type(_chain_rejection_kernel).__name__ == "InterpretedFunction"


def _blocks(batch: int, vocab: int, rows: int = 1) -> tuple[int, int, int]:
    """(BLOCK_B, BLOCK, BLOCK_V): requests per program, flat chunk of the validation pass (``rows`` rows of V per
    request), vocabulary chunk of the search.

    Examples
    --------
    >>> _blocks(1, 100)[0], _blocks(1, 100)[2]  # one request; the vocabulary chunk is V's next power of two
    (1, 128)
    """
    if INTERPRETED:  # programs and ops cost time here, not elements: big tiles, capped at 2**18 elements
        block = min(triton.next_power_of_2(rows * vocab), 4096)
        block_v = min(triton.next_power_of_2(vocab), 4096)
        return min(triton.next_power_of_2(batch), 1024, 2**18 // block), block, block_v
    # one request per program: enough programs to fill the chip, and the 2-D accumulators of the validation pass
    # (five [1, BLOCK] tiles) stay in registers with 8 warps (_NUM_WARPS)
    return 1, 2048, min(triton.next_power_of_2(vocab), 2048)


def _check_device(tensor: torch.Tensor) -> None:
    from specverify.errors import check

    check(
        INTERPRETED or tensor.is_cuda,
        f"tensors on {tensor.device} but the triton kernels were defined for CUDA: pass CUDA tensors, use "
        "backend='torch', or set TRITON_INTERPRET=1 before specverify.kernels loads its triton module.",
    )


def chain_rejection_sample_triton(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_recover: torch.Tensor,
) -> ChainResult:
    """Launch the chain kernel; arguments already shape-checked (``ops.chain_rejection_sample``)."""
    check_contiguous(draft_probs=draft_probs, target_probs=target_probs)
    _check_device(target_probs)
    batch, gamma = draft_token_ids.shape
    vocab = target_probs.shape[2]
    acc = compute_dtype(target_probs.dtype)
    device = target_probs.device
    tokens = torch.empty((batch, gamma + 1), dtype=torch.int64, device=device)
    num_accepted = torch.empty(batch, dtype=torch.int32, device=device)
    status = torch.empty(batch, dtype=torch.int32, device=device)
    if batch == 0:
        return ChainResult(tokens, num_accepted, status)
    block_b, block, block_v = _blocks(batch, vocab, gamma + 1)
    _chain_rejection_kernel[(triton.cdiv(batch, block_b),)](
        tokens,
        num_accepted,
        status,
        draft_token_ids.to(torch.int64).contiguous(),
        num_draft_tokens.to(torch.int32).contiguous(),
        draft_probs,
        target_probs,
        u_accept.to(acc).contiguous(),
        u_recover.to(acc).contiguous(),
        batch,
        vocab,
        GAMMA=gamma,
        ACC=_TL_DTYPE[acc],
        PAD_ID=PAD_TOKEN_ID,
        NOT_FOUND=_NOT_FOUND,
        BLOCK_B=block_b,
        BLOCK_K=triton.next_power_of_2(gamma + 1),
        BLOCK=block,
        BLOCK_V=block_v,
        num_warps=_NUM_WARPS,
    )
    return ChainResult(tokens, num_accepted, status)


def categorical_sample_triton(probs: torch.Tensor, uniforms: torch.Tensor) -> CategoricalResult:
    """Launch the categorical kernel; arguments already shape-checked (``ops.categorical_sample``)."""
    check_contiguous(probs=probs)
    _check_device(probs)
    batch, vocab = probs.shape
    acc = compute_dtype(probs.dtype)
    tokens = torch.empty(batch, dtype=torch.int64, device=probs.device)
    status = torch.empty(batch, dtype=torch.int32, device=probs.device)
    if batch == 0:
        return CategoricalResult(tokens, status)
    block_b, _, block_v = _blocks(batch, vocab)
    _categorical_kernel[(triton.cdiv(batch, block_b),)](
        tokens,
        status,
        probs,
        uniforms.to(acc).contiguous(),
        batch,
        vocab,
        ACC=_TL_DTYPE[acc],
        PAD_ID=PAD_TOKEN_ID,
        NOT_FOUND=_NOT_FOUND,
        BLOCK_B=block_b,
        BLOCK_V=block_v,
        num_warps=_NUM_WARPS,
    )
    return CategoricalResult(tokens, status)
