"""Model code of this run. Tiny models shared by every gallery run; this file is copied verbatim into each run's train.py.

It imports only torch, so a run's `forensics_entry.py` / `train.py` is self-contained.
"""

from collections import OrderedDict

import torch
from torch import nn


class MLP(nn.Module):
    """`depth` hidden layers named body.fc1/body.act1/...; `head` maps to the outputs."""

    def __init__(self, d_in, hidden, d_out, depth=2, act="relu", head=None):
        super().__init__()
        acts = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "gelu": nn.GELU}
        layers = OrderedDict()
        width = d_in
        for i in range(1, depth + 1):
            layers[f"fc{i}"] = nn.Linear(width, hidden)
            layers[f"act{i}"] = acts[act]()
            width = hidden
        self.body = nn.Sequential(layers)
        self.head = head if head is not None else nn.Linear(width, d_out)

    def forward(self, x):
        return self.head(self.body(x))


class LogSoftmaxByHand(nn.Module):
    """A head that returns log-probabilities as log(softmax(z)): log(0) = -inf once a probability underflows."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.log(torch.softmax(self.proj(x), dim=-1))


class SmallCNN(nn.Module):
    """Two conv layers on 1x12x12 images, then a linear head."""

    def __init__(self, n_classes=4, width=8):
        super().__init__()
        self.features = nn.Sequential(OrderedDict(
            conv1=nn.Conv2d(1, width, 3, padding=1), act1=nn.ReLU(), pool1=nn.MaxPool2d(2),
            conv2=nn.Conv2d(width, 2 * width, 3, padding=1), act2=nn.ReLU(), pool2=nn.AdaptiveAvgPool2d(1)))
        self.head = nn.Linear(2 * width, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class LSTMClassifier(nn.Module):
    """Token embedding -> one LSTM layer -> head on the last hidden state."""

    def __init__(self, vocab=8, d=16, hidden=32, n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1])


class NormNoEps(nn.Module):
    """A hand-written RMS-style norm: x / (sqrt(sum x^2) + eps). The eps sits OUTSIDE the sqrt, so an
    all-zero row is finite in the forward pass but d sqrt(u)/du = inf at u = 0 in the backward pass."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        norm = torch.sqrt((x * x).sum(-1, keepdim=True)) / x.shape[-1] ** 0.5
        return self.weight * x / (norm + self.eps)


class Block(nn.Module):
    def __init__(self, d, heads, norm):
        super().__init__()
        self.norm1 = norm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = norm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """A causal pre-norm transformer LM: embed (+ learned positions) -> blocks -> norm -> head."""

    def __init__(self, vocab=16, d=32, heads=2, layers=2, seq=16, norm="layernorm", pad_idx=None):
        super().__init__()
        norm_cls = {"layernorm": nn.LayerNorm, "custom": NormNoEps}[norm]
        self.embed = nn.Embedding(vocab, d, padding_idx=pad_idx)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads, norm_cls) for _ in range(layers))
        self.norm = norm_cls(d)
        self.head = nn.Linear(d, vocab)
        self.pad_idx = pad_idx

    def forward(self, x):
        t = x.shape[1]
        h = self.embed(x)
        if self.pad_idx is not None:  # padded positions carry no position either (all-zero rows)
            h = h + self.pos[:t] * (x != self.pad_idx).unsqueeze(-1)
        else:
            h = h + self.pos[:t]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=x.device), diagonal=1)
        for block in self.blocks:
            h = block(h, mask)
        return self.head(self.norm(h))


# ---- this run's model, loss and optimizer (DECISIONS.md §10 entry point) ----
def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    model = MLP(m["d_in"], m["hidden"], m["classes"], depth=m["depth"], act=m["act"])
    torch.nn.init.normal_(model.head.weight, std=8.0)  # BUG: meant 'std=1/sqrt(fan_in)'
    return model


def loss_fn(model, batch):
    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    o = config["optim"]
    return torch.optim.Adam(model.parameters(), lr=o["lr"])
