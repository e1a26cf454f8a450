#!/usr/bin/python3
"""Writes a transformer as a TorchScript file that spotps-trainer --model=FILE trains.

    /usr/bin/python3 tools/models/export_model.py --arch=gpt2 --out=gpt.pt
    /usr/bin/python3 tools/models/export_model.py --arch=llama --d_model=256 --out=llama.pt
    /usr/bin/python3 tools/models/export_model.py --arch=bert --num_classes=5 --out=bert.pt

Architectures (sizes from the flags, weights drawn from --seed):
  gpt2   GPT-2-style decoder: learned positions, pre-LayerNorm blocks, causal
         attention, tanh GELU, output head tied to the token embedding. Its
         parameters carry the names and order of spotps's built-in GPT, so the
         file and `--model=tiny|small` (same sizes) describe the same layout.
         With --task=classify it pools the hidden states of the tokens the
         attention mask keeps and adds a linear head (head.weight, head.bias).
  llama  Llama-style decoder: RMSNorm, rotary position embeddings (cos/sin
         tables as buffers), SwiGLU MLP, untied output head, no biases.
  bert   BERT-style encoder: learned positions, post-LayerNorm blocks,
         bidirectional attention over the tokens the mask keeps, erf GELU, a
         tanh pooler on the first token and a classifier (task classify).

The contract spotps checks when it loads the file:
  task lm:       forward(input_ids: int64 [B, T]) -> logits float [B, T, V]
  task classify: forward(input_ids, attention_mask: int64 [B, T]) -> logits [B, C]
  int attributes context_len, vocab_size and num_classes, when present, are
  checked against the data and flags. What is trained: named_parameters()
  that require grad, in the file's order; buffers stay as saved.

Use Debian's torch (/usr/bin/python3, torch 1.13): files from torch 2.x use
operators LibTorch 1.13 cannot load. --trace writes a traced module instead
of a scripted one (traced files keep no int attributes).
"""

import argparse
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def normal_init(module, std=0.02):
    for name, p in module.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif p.dim() == 1:  # Norm weights.
            nn.init.ones_(p)
        else:
            nn.init.normal_(p, 0.0, std)


def attend(qkv: torch.Tensor, n_head: int, bias: torch.Tensor) -> torch.Tensor:
    """Multi-head attention over one projection's q|k|v [B, T, 3C]; `bias` is
    added to the scores (-inf or -1e4 where a key is masked). Returns [B, T, C]."""
    b, t, c3 = qkv.shape
    c = c3 // 3
    hw = c // n_head
    q, k, v = qkv.split(c, dim=2)
    q = (q * (1.0 / math.sqrt(hw))).view(b, t, n_head, hw).transpose(1, 2)
    k = k.view(b, t, n_head, hw).transpose(1, 2)
    v = v.view(b, t, n_head, hw).transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-2, -1)) + bias
    y = torch.matmul(torch.softmax(scores, dim=-1), v)
    return y.transpose(1, 2).reshape(b, t, c)


class GptAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.proj(attend(self.qkv(x), self.n_head, bias))


class GptMlp(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class GptBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = GptAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = GptMlp(d_model)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        # LayerNorm in FP32 (CPU autocast would run it in BF16), the residual
        # stream in FP32, as spotps's built-in GPT does.
        x = x + self.attn(self.ln_1(x.float()), bias)
        return x + self.mlp(self.ln_2(x.float()))


class Gpt2(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.context_len: int = a.context_len
        self.vocab_size: int = a.vocab_size
        self.wte = nn.Embedding(a.vocab_size, a.d_model)
        self.wpe = nn.Embedding(a.context_len, a.d_model)
        self.blocks = nn.ModuleList([GptBlock(a.d_model, a.n_head) for _ in range(a.n_layer)])
        self.ln_f = nn.LayerNorm(a.d_model)
        normal_init(self)
        # GPT-2's scaled init of the residual projections.
        for block in self.blocks:
            nn.init.normal_(block.attn.proj.weight, 0.0, 0.02 / math.sqrt(2 * a.n_layer))
            nn.init.normal_(block.mlp.proj.weight, 0.0, 0.02 / math.sqrt(2 * a.n_layer))

    def hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.size(1)
        positions = torch.arange(t, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        bias = torch.full((t, t), float("-inf")).triu(1)
        for block in self.blocks:
            x = block(x, bias)
        return self.ln_f(x.float())

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.linear(self.hidden(input_ids), self.wte.weight).float()


class Gpt2Classifier(Gpt2):
    """The decoder above, its parameters under the same names (so a language
    model's weights load into it by name, --init_from), plus a head over the
    mean of the hidden states the attention mask keeps."""

    def __init__(self, a):
        super().__init__(a)
        self.num_classes: int = a.num_classes
        self.head = nn.Linear(a.d_model, a.num_classes)
        nn.init.normal_(self.head.weight, 0.0, 0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        keep = attention_mask.unsqueeze(-1).float()
        pooled = (self.hidden(input_ids) * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled).float()


class RmsNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Pairs (even, odd) of each head's features turn by the position's angle.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class LlamaAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        hw = c // self.n_head
        q = self.wq(x).view(b, t, self.n_head, hw).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_head, hw).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_head, hw).transpose(1, 2)
        q = rotate(q.float(), cos, sin).to(v.dtype) * (1.0 / math.sqrt(hw))
        k = rotate(k.float(), cos, sin).to(v.dtype)
        scores = torch.matmul(q, k.transpose(-2, -1)) + bias
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.wo(y.transpose(1, 2).reshape(b, t, c))


class SwiGlu(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d_model, bias=False)
        self.w3 = nn.Linear(d_model, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, hidden: int):
        super().__init__()
        self.attention_norm = RmsNorm(d_model)
        self.attention = LlamaAttention(d_model, n_head)
        self.ffn_norm = RmsNorm(d_model)
        self.feed_forward = SwiGlu(d_model, hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, bias)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.context_len: int = a.context_len
        self.vocab_size: int = a.vocab_size
        head_width = a.d_model // a.n_head
        hidden = 256 * ((int(8 * a.d_model / 3) + 255) // 256)
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.d_model)
        self.layers = nn.ModuleList([LlamaBlock(a.d_model, a.n_head, hidden)
                                     for _ in range(a.n_layer)])
        self.norm = RmsNorm(a.d_model)
        self.output = nn.Linear(a.d_model, a.vocab_size, bias=False)
        normal_init(self)
        freqs = 1.0 / (10000.0 ** (torch.arange(0, head_width, 2).float() / head_width))
        angles = torch.outer(torch.arange(a.context_len).float(), freqs)
        self.register_buffer("rope_cos", torch.cos(angles))
        self.register_buffer("rope_sin", torch.sin(angles))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.size(1)
        x = self.tok_embeddings(input_ids)
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        bias = torch.full((t, t), float("-inf")).triu(1)
        for layer in self.layers:
            x = layer(x.float(), cos, sin, bias)
        return self.output(self.norm(x)).float()


class BertLayer(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attn_out = nn.Linear(d_model, d_model)
        self.attn_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.ffn_in = nn.Linear(d_model, 4 * d_model)
        self.ffn_out = nn.Linear(4 * d_model, d_model)
        self.ffn_norm = nn.LayerNorm(d_model, eps=1e-12)

    def forward(self, x: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        x = self.attn_norm((x + self.attn_out(attend(self.qkv(x), self.n_head, key_bias))).float())
        return self.ffn_norm((x + self.ffn_out(F.gelu(self.ffn_in(x)))).float())


class BertClassifier(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.context_len: int = a.context_len
        self.vocab_size: int = a.vocab_size
        self.num_classes: int = a.num_classes
        self.word_embeddings = nn.Embedding(a.vocab_size, a.d_model)
        self.position_embeddings = nn.Embedding(a.context_len, a.d_model)
        self.embeddings_norm = nn.LayerNorm(a.d_model, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(a.d_model, a.n_head) for _ in range(a.n_layer)])
        self.pooler = nn.Linear(a.d_model, a.d_model)
        self.classifier = nn.Linear(a.d_model, a.num_classes)
        normal_init(self)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        t = input_ids.size(1)
        positions = torch.arange(t, dtype=torch.long, device=input_ids.device)
        x = self.embeddings_norm(
            (self.word_embeddings(input_ids) + self.position_embeddings(positions)).float())
        # Padding keys get -1e4, not -inf: a row of only padding stays finite.
        key_bias = ((1.0 - attention_mask.float()) * -1e4)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, key_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(pooled).float()


ARCHS = {"gpt2": {"lm": Gpt2, "classify": Gpt2Classifier},
         "llama": {"lm": Llama},
         "bert": {"classify": BertClassifier}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=sorted(ARCHS), required=True)
    p.add_argument("--task", choices=["lm", "classify"],
                   help="default: lm, except bert (classify)")
    p.add_argument("--vocab_size", type=int, default=256)
    p.add_argument("--context_len", type=int, default=128)
    p.add_argument("--n_layer", type=int, default=4)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--d_model", type=int, default=128)
    p.add_argument("--num_classes", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--trace", action="store_true", help="torch.jit.trace instead of script")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    task = a.task or ("classify" if a.arch == "bert" else "lm")
    if task not in ARCHS[a.arch]:
        p.error(f"--arch={a.arch} has no task {task} (it has {', '.join(ARCHS[a.arch])})")
    if a.d_model % a.n_head or (a.arch == "llama" and (a.d_model // a.n_head) % 2):
        p.error("--d_model must split into --n_head heads (of even width for llama)")
    torch.manual_seed(a.seed)
    model = ARCHS[a.arch][task](a).eval()
    if a.trace:
        ids = torch.randint(0, a.vocab_size, (2, min(16, a.context_len)))
        inputs = (ids,) if task == "lm" else (ids, torch.ones_like(ids))
        scripted = torch.jit.trace(model, inputs, check_trace=False)
    else:
        scripted = torch.jit.script(model)
    scripted.save(a.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"export: {a.out} arch={a.arch} task={task} parameters={n} "
          f"{'traced' if a.trace else 'scripted'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
