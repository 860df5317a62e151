"""The number a printed scalar stands for: a tensor's or a NumPy scalar's repr read as its value.

Training code prints and writes its numbers as the objects they are: `tensor(3.1304, device='cuda:0',
grad_fn=<DivBackward0>)`, a one-element `tensor([0.51])`, NumPy 2's `np.float32(0.51)`, TensorFlow's
`tf.Tensor(0.51, shape=(), dtype=float32)` (its `str`) or `<tf.Tensor: shape=(), dtype=float32, numpy=0.51>` (its
`repr`), hasktorch's `Tensor Float []  0.34`, a value a format string wrapped in literal braces (`{1.90}`) or a
one-element tuple (`(0.51,)`). Each stands for the one number inside it. The console reader reads
them inside a line (`ingest.console._REPR` adds its own printed forms to `SCALAR_REPR`), the table and JSON readers
as a whole cell (`cell_number`). A tensor of more than one element stands for no one number and is not read here.
"""

from __future__ import annotations

import re

NUM = (r"[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
       r"|(?:[Nn]a[Nn]|NAN|[Ii]nf(?:inity)?|INF)(?:\.\d)?)")  # the sign is the leading [-+]? alone: `--inf` is no number

# A repr's keyword arguments after its value (`, device='cuda:0', grad_fn=<AddBackward0>`, `, shape=(), dtype=...`):
# text with parentheses one level deep at most.
_ARGS = r"(?:,[^()]*(?:\([^()]*\)[^()]*)*)?"
_NUMPY_SCALAR = r"(?:np|numpy)\.(?:float|int|uint|double|single|half|longdouble)\d*"
# One named group per form; `repr_number` says which holds the value.
SCALAR_REPR = (
    rf"\btensor\(\s*(?:(?P<t>{NUM})|\[\s*(?P<tl>{NUM})\s*\])\s*{_ARGS}\)"  # torch, 0-d or one element
    rf"|\b{_NUMPY_SCALAR}\(\s*(?P<np>{NUM})\s*\)"  # NumPy 2's scalar
    rf"|\btf\.Tensor\(\s*(?:(?P<tf>{NUM})|\[\s*(?P<tfl>{NUM})\s*\])\s*{_ARGS}\)"  # str() of a TF tensor
    rf"|<tf\.Tensor:[^<>]*?\bnumpy=(?:(?P<tfn>{NUM})|array\(\[\s*(?P<tfa>{NUM})\s*\][^<>]*\))>"  # repr() of one
    rf"|\bTensor\s+[A-Z]\w*\s+\[\s*\]\s+(?P<h>{NUM})"  # hasktorch's 0-d tensor
    rf"|\{{\s*(?P<set>{NUM})\s*\}}"  # a value formatted inside literal braces (`f"loss : {{{x}}}"` as `{1.9027643}`)
    rf"|\(\s*(?P<tup>{NUM})\s*,\s*\)"  # a one-element tuple (`(0.51,)`)
)
_GROUPS = ("t", "tl", "np", "tf", "tfl", "tfn", "tfa", "h", "set", "tup")
REPR = re.compile(SCALAR_REPR)
# Whether a text may hold one (a cheap test before the regex; a polars regex too): each form's opening.
REPR_HINT = (rf"tensor\(|{_NUMPY_SCALAR}\(|tf\.Tensor|Tensor\s+[A-Z]\w*\s+\[\s*\]"
             rf"|\{{\s*[-+]?\.?\d[\d.eE+-]*\s*\}}|\(\s*[-+]?\.?\d[\d.eE+-]*\s*,\s*\)")


def repr_number(m: re.Match[str]) -> str | None:
    """The number (as its text) a match of a pattern holding `SCALAR_REPR` stands for; None when the match is of
    another alternative the caller added."""
    return next((v for g in _GROUPS if (v := m.group(g)) is not None), None)


def cell_number(text: str) -> str | None:
    """The number a cell that is one scalar's repr and nothing else stands for (`tensor(0.41, device='cuda:0')` ->
    `0.41`), else None."""
    m = REPR.fullmatch(text.strip())
    return repr_number(m) if m else None


def cell_float(value: object) -> float | None:
    """`cell_number` as a float, for a value that is a string (a JSON document's `"tensor(0.41)"`); else None."""
    if not isinstance(value, str) or (number := cell_number(value)) is None:
        return None
    try:
        return float(number)
    except ValueError:  # `nan.0`: a non-finite value printed with a decimal
        return float(number.rpartition(".")[0])
