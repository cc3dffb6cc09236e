"""Throughput of the verification kernels, and the bytes they must move, to set against memory bandwidth.

Usage::

    python benchmarks/bench_kernels.py                      # CPU: the torch twin, B=4096, V=32000, γ=4, float32
    python benchmarks/bench_kernels.py --backend triton     # CUDA: the triton kernel (goal: >= 80 % of peak)

Bytes moved per request (the kernel's minimum traffic): every owned row once (target rows 0..n, draft rows
0..n-1: the validation pass, which also accumulates the final row's masses), the final row(s) once more (the
inverse-CDF search: target and draft after a rejection, target alone for a bonus), plus ids, uniforms and outputs.
The effective bandwidth is those bytes over the measured time; on a GPU compare it with the peak (``--peak-gbps``,
4800 for an H200). On CPU the same figure for the twin is printed next to a measured copy bandwidth for scale.
"""

from __future__ import annotations

import argparse
import time

import torch

from specverify.kernels import categorical_sample, chain_rejection_sample

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def make_inputs(batch, gamma, vocab, dtype, device, seed=0):  # a realistic round: drafts close to the target
    g = torch.Generator(device="cpu").manual_seed(seed)
    target = torch.rand(batch, gamma + 1, vocab, generator=g).pow_(3)
    target /= target.sum(-1, keepdim=True)
    draft = torch.rand(batch, gamma, vocab, generator=g).pow_(3)
    draft /= draft.sum(-1, keepdim=True)
    draft.mul_(0.3).add_(target[:, :gamma], alpha=0.7)
    ids = torch.multinomial(draft.view(-1, vocab), 1, generator=g).view(batch, gamma)
    n = torch.full((batch,), gamma, dtype=torch.int64)
    inputs = (
        ids,
        n,
        draft.to(dtype),
        target.to(dtype),
        torch.rand(batch, gamma, generator=g),
        torch.rand(batch, gamma + 1, generator=g),
    )
    return tuple(t.to(device) for t in inputs)


def chain_bytes(inputs, result) -> int:
    ids, n, draft, target, u_accept, u_recover = inputs
    elem, vocab = target.element_size(), target.shape[2]
    n = n.long().cpu()
    rejected = result.num_accepted.long().cpu() < n
    rows = (2 * n + 1) + 1 + rejected.long()  # owned rows once, final target row (+ draft row) again
    small = ids.shape[1] * 8 + 8 + u_accept.shape[1] * 4 + u_recover.shape[1] * 4 + result.tokens.shape[1] * 8 + 8
    return int(rows.sum()) * vocab * elem + n.shape[0] * small


def timed(fn, repeats, device) -> float:  # best of ``repeats`` wall times, in seconds
    fn()
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(device, gigabytes=1.0) -> float:  # GB/s of a device-local clone (read + write)
    x = torch.empty(int(gigabytes * 2**30) // 4, dtype=torch.float32, device=device).fill_(1.0)
    seconds = timed(lambda: x.clone(), 3, device)
    return 2 * x.numel() * 4 / seconds / 1e9


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--backend", choices=("auto", "torch", "triton"), default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peak-gbps", type=float, default=4800.0, help="GPU peak memory bandwidth (H200: 4800)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and args.backend != "torch" else "cpu"
    backend = args.backend if args.backend != "auto" else ("triton" if device == "cuda" else "torch")
    what = "triton kernel" if backend == "triton" else "torch twin"
    inputs = make_inputs(args.batch, args.gamma, args.vocab, DTYPES[args.dtype], device)
    result = chain_rejection_sample(*inputs, backend=backend)
    seconds = timed(lambda: chain_rejection_sample(*inputs, backend=backend), args.repeats, device)
    moved = chain_bytes(inputs, result)
    rate = moved / seconds / 1e9
    accepted = result.num_accepted.float().mean().item()
    print(
        f"chain_rejection_sample [{what}, {device}] B={args.batch} V={args.vocab} gamma={args.gamma} "
        f"{args.dtype}: {seconds * 1e3:.1f} ms/round, {args.batch / seconds:,.0f} requests/s, "
        f"{args.batch * (accepted + 1) / seconds:,.0f} tokens/s (mean accepted {accepted:.2f})"
    )
    print(f"  bytes moved {moved / 1e9:.3f} GB -> {rate:.1f} GB/s effective")
    probs, uniforms = inputs[3][:, 0].contiguous(), inputs[5][:, 0].contiguous()
    cat_seconds = timed(lambda: categorical_sample(probs, uniforms, backend=backend), args.repeats, device)
    cat_bytes = 2 * probs.numel() * probs.element_size() + probs.shape[0] * 12
    print(
        f"categorical_sample [{what}, {device}] B={args.batch} V={args.vocab}: {cat_seconds * 1e3:.1f} ms, "
        f"{args.batch / cat_seconds:,.0f} rows/s, {cat_bytes / cat_seconds / 1e9:.1f} GB/s effective"
    )
    if device == "cuda":
        print(
            f"  chain kernel at {100 * rate / args.peak_gbps:.1f} % of the {args.peak_gbps:.0f} GB/s peak "
            f"(goal >= 80 %); measured device copy: {copy_bandwidth(device):.0f} GB/s"
        )
    else:
        print(
            f"  measured CPU copy bandwidth for scale: {copy_bandwidth(device):.1f} GB/s "
            f"(twin at {100 * rate / copy_bandwidth(device):.0f} % of it)"
        )


if __name__ == "__main__":
    main()
