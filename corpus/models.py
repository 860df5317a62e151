"""Models the gallery lacks: a GRU classifier and the modular-arithmetic network for grokking."""

from __future__ import annotations

from torch import nn


class GRUClassifier(nn.Module):
    """Token embedding -> one GRU layer -> head on the last hidden state."""

    def __init__(self, vocab=8, d=16, hidden=32, n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        out, _ = self.gru(self.embed(x))
        return self.head(out[:, -1])


class ModularMLP(nn.Module):
    """(a, b) -> (a + b) mod p: shared token embedding, concatenated, one hidden ReLU layer, head."""

    def __init__(self, p: int, d: int = 64):
        super().__init__()
        self.embed = nn.Embedding(p, d)
        self.body = nn.Sequential(nn.Linear(2 * d, 4 * d), nn.ReLU())
        self.head = nn.Linear(4 * d, p)

    def forward(self, x):
        return self.head(self.body(self.embed(x).flatten(1)))
