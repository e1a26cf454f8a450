#!/usr/bin/python3
"""PyTorch eager baseline for spotps-bench-trainer.

Trains the same GPT shape as trainer/model/gpt_model.cc (pre-LayerNorm
blocks, tied head, tanh GELU, causal attention) the way a PyTorch user would
write it: BF16 CPU autocast, AdamW, gradient clipping at 1.0, the given
number of intra-op threads. Random token batches (the data pipeline costs
nothing next to a step). Prints `torch_tokens_per_s=X` as its last line.

With --ddp=N it runs N processes that train data-parallel with
DistributedDataParallel over the gloo backend on loopback (each its own
batch, gradients all-reduced in buckets during backward, as DDP users do),
and X is their tokens/s together.

Run with Debian's /usr/bin/python3 (python3-torch); needs no network.
"""
import argparse
import math
import os
import socket
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # vocab_size, context_len, n_layer, n_head, d_model
    "tiny": (256, 128, 4, 4, 128),
    "small": (256, 256, 6, 6, 384),
    "gpt2-124m": (50257, 1024, 12, 12, 768),
}


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attn_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.mlp_proj = nn.Linear(4 * d_model, d_model)

    def attention(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.n_head))
        scores = scores.masked_fill(mask[:t, :t], float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x, mask):
        x = x + self.attention(self.ln_1(x), mask)
        return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, n_layer, n_head, d_model):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t))
        # Made per step, not a buffer: DDP would broadcast it, and gloo
        # cannot broadcast bools.
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        for block in self.blocks:
            x = block(x, mask)
        return F.linear(self.ln_f(x), self.wte.weight)


def train(args, rank=0, world=1):
    """The timed loop; returns tokens/s of this process."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(rank)
    vocab = PRESETS[args.model][0]
    model = Gpt(*PRESETS[args.model])
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    start = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if world > 1:
                torch.distributed.barrier()
            start = time.perf_counter()
        tokens = torch.randint(0, vocab, (args.batch, args.seq_len + 1))
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
    seconds = time.perf_counter() - start
    print(f"torch {torch.__version__} rank {rank}/{world}: {args.steps} steps in {seconds:.2f} s, "
          f"{seconds / args.steps * 1000:.0f} ms/step, threads {torch.get_num_threads()}",
          flush=True)
    return args.steps * args.batch * args.seq_len / seconds


def ddp_worker(rank, args, port, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=args.ddp)
    results[rank] = train(args, rank, args.ddp)
    torch.distributed.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="small", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq_len", type=int, default=256)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--ddp", type=int, default=0, help="processes of a DDP (gloo) job; 0: one, no DDP")
    args = p.parse_args()
    if args.ddp > 0:
        import torch.multiprocessing as mp
        results = mp.Manager().dict()
        mp.spawn(ddp_worker, args=(args, free_port(), results), nprocs=args.ddp, join=True)
        print(f"torch_tokens_per_s={sum(results.values()):.1f}")
        return
    print(f"torch_tokens_per_s={train(args):.1f}")


if __name__ == "__main__":
    main()
