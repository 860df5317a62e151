"""Build the compiled cores of the TensorBoard and W&B readers (ingest/_tfevents.c, ingest/_wandblog.c).

Both are built with the machine's C compiler and need nothing but Python's headers; they share
ingest/_wire.h (CRC-32C, protobuf varints, interning). Both are mandatory: `pip install` builds them, and a
reader whose core is missing says how to build it (docs/wandb.md, "Compiled cores").

Everything else is declared in pyproject.toml; `pip install .` / `pip install -e .` run this.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ingest._tfevents",
            ["ingest/_tfevents.c"],
            depends=["ingest/_wire.h"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
        Extension(
            "ingest._wandblog",
            ["ingest/_wandblog.c"],
            depends=["ingest/_wire.h"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
    ]
)
