#!/usr/bin/python3
"""Files that break the TorchScript model contract, for torchscript_test.cc.

    write_bad_models.py OUT_DIR GOOD_MODEL.pt

Writes into OUT_DIR: state_dict.pt (torch.save of a state dict), pickled.pt
(torch.save of a whole module, non-zip), truncated.pt (GOOD_MODEL's first
half), random.pt (random bytes), signature.pt (forward of three tensors),
rank.pt (logits [B, V] for an lm), nan.pt (NaN logits), bf16.pt (BF16
parameters), frozen.pt (no parameter requires grad).
"""
import os
import sys

import torch
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 16)
        self.out = nn.Linear(16, 256)


class ThreeArgs(Small):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(a))


class WrongRank(Small):
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(input_ids)).mean(1)


class NanLogits(Small):
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(input_ids)) * float("nan")


class Plain(Small):
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(input_ids))


def main():
    out, good = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    torch.save(Plain().state_dict(), os.path.join(out, "state_dict.pt"))
    torch.save(Plain(), os.path.join(out, "pickled.pt"), _use_new_zipfile_serialization=False)
    data = open(good, "rb").read()
    open(os.path.join(out, "truncated.pt"), "wb").write(data[: len(data) // 2])
    open(os.path.join(out, "random.pt"), "wb").write(os.urandom(4096))
    torch.jit.script(ThreeArgs()).save(os.path.join(out, "signature.pt"))
    torch.jit.script(WrongRank()).save(os.path.join(out, "rank.pt"))
    torch.jit.script(NanLogits()).save(os.path.join(out, "nan.pt"))
    torch.jit.script(Plain().to(torch.bfloat16)).save(os.path.join(out, "bf16.pt"))
    frozen = Plain()
    for p in frozen.parameters():
        p.requires_grad_(False)
    torch.jit.script(frozen).save(os.path.join(out, "frozen.pt"))
    print("bad models written to", out)


if __name__ == "__main__":
    main()
