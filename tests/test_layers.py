"""The layering rules (DECISIONS.md §6, STYLE.md), read from the source: who may import whom, who may print or
read the environment, and that importing the package pulls in no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


from tests.paths import REPO

# Modules the app must not import: ingest's readers and what writes, and the engine (the app reads DuckDB only,
# through ingest.queries).
APP_FORBIDDEN = ("ingest.run", "ingest.formats", "ingest.tensorboard", "ingest.wandb", "ingest.wandb_files",
                 "ingest.console", "ingest.tabular", "ingest.mlflow", "ingest.lightning", "ingest.hf_trainer",
                 "ingest.configs", "ingest.checkpoints", "ingest.batches", "ingest.tensorfiles", "ingest.tensorstats",
                 "ingest.writes", "forensics.judge.engine", "forensics.judge.detectors", "forensics.services.analysis", "forensics.judge.settings")


def sources(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, `from a import b` giving both `a` and `a.b`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
    return out


def _label(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def offending_imports(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{_label(path)}:{line} imports {name}"
            for line, name in imported(path) if any(name == f or name.startswith(f + ".") for f in forbidden)]


def prints(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [f"{_label(path)}:{n.lineno} calls print" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]


def test_ingest_imports_nothing_from_forensics():
    bad = [o for p in sources("ingest") for o in offending_imports(p, ("forensics",))]
    assert bad == []


# Command-line entry points: the `forensics` command, and `python -m forensics.docs` (rewrites the README's sample).
ENTRY_POINTS = {Path("forensics/cli.py"), Path("forensics/docs.py")}


def test_nothing_below_the_cli_prints():
    bad = [o for folder in ("ingest", "forensics") for p in sources(folder) if _label(p) not in ENTRY_POINTS
           for o in prints(p)]
    assert bad == []


def environment_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    # Setting a CUDA library's own variable for determinism (replay) configures nothing of ours: allowed; so does
    # replay's determinism module, which sets and gives back exactly the libraries' variables it names in
    # LIBRARY_ENV (cuBLAS's workspace, inductor's deterministic flag): a line indexing LIBRARY_ENV.
    sets_cuda = {n.func.value.lineno for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "setdefault"
                 and n.args and isinstance(n.args[0], ast.Constant) and str(n.args[0].value).startswith("CUBLAS_")}
    sets_cuda |= {n.lineno for n in ast.walk(tree) if isinstance(n, ast.Subscript)
                  and isinstance(n.value, ast.Name) and n.value.id == "LIBRARY_ENV"}
    return [f"{_label(path)}:{n.lineno} reads the environment" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv", "environb")
            and isinstance(n.value, ast.Name) and n.value.id == "os" and n.lineno not in sets_cuda]


def test_nothing_below_the_cli_reads_the_environment():
    """$FORENSICS_DB and the cache folder are resolved in forensics/cli.py only (STYLE.md, Configuration)."""
    bad = [o for folder in ("ingest", "forensics") for p in sources(folder) if p.name != "cli.py"
           for o in environment_reads(p)]
    assert bad == []


def test_the_checks_catch_an_offender(tmp_path):
    """The import, print and environment checks find what they look for (a check that cannot fail proves nothing)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import forensics.judge.engine\nfrom ingest import wandb\nfrom ingest.queries import list_runs\n"
                   "def f():\n    print('x')\n    return os.environ.get('X')\n")
    assert offending_imports(bad, APP_FORBIDDEN) == [f"{bad}:1 imports forensics.judge.engine", f"{bad}:2 imports ingest.wandb"]
    assert offending_imports(bad, ("forensics",)) == [f"{bad}:1 imports forensics.judge.engine"]
    assert [ln for ln, _ in imported(bad)] == [1, 2, 2, 3, 3]
    assert prints(bad) == [f"{bad}:5 calls print"]
    assert environment_reads(bad) == [f"{bad}:6 reads the environment"]


def test_app_imports_neither_readers_nor_engine():
    files = sources("app")
    assert files
    bad = [o for p in files for o in offending_imports(p, APP_FORBIDDEN)]
    assert bad == []


# Modules whose job is to run a model (DECISIONS.md §6: torch "where a model runs"): replay's and probe's machinery,
# imported only inside `forensics replay` / `forensics probe`, and the capture helpers, imported by a training script
# that has torch loaded.
# The kit's modules that hold tensors are named one by one: the rest of the kit (entry point, config, the starting
# checkpoint's rule, device, threads) is imported by `analyze` and stays without torch.
RUNS_A_MODEL = ("forensics.usercode.replay.", "forensics.usercode.probe.", "forensics.capture",
                "forensics.usercode.kit.restore", "forensics.usercode.kit.batches", "forensics.usercode.kit.rng",
                "forensics.usercode.kit.modules")


def test_importing_every_module_of_forensics_and_ingest_loads_no_torch():
    """Torch (1 s) is imported only where tensors are read or a model runs: never at the import of any other
    module, the replay package itself (what the CLI imports) included."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import forensics, ingest\n"
        "names = [m.name for pkg in (forensics, ingest) for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.')]\n"
        f"names = [n for n in names if not n.startswith({RUNS_A_MODEL!r})]\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names), 'forensics.usercode.replay' in names and 'forensics.usercode.probe' in names, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    n, replay_checked, torch_loaded = out.split()
    assert int(n) > 40 and replay_checked == "True" and torch_loaded == "False"


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def import_graph(folders: tuple[str, ...] = ("ingest", "forensics", "app")) -> dict[str, set[str]]:
    """module -> the modules of ours it imports, at the top or inside a function (a lazy import that closes a
    loop is still a loop: each half needs the other to be read)."""
    ours = {module_of(p): p for folder in folders for p in sources(folder)}
    graph: dict[str, set[str]] = {}
    for name, path in ours.items():
        graph[name] = {m for _, m in imported(path) if m in ours and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    """Issue 25: findings.py <-> verdict.py and run.py <-> stats.py imported each other."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check finds one
    assert cycles(import_graph()) == []


def test_the_app_imports_nothing_from_the_cli():
    bad = [o for p in sources("app") for o in offending_imports(p, ("forensics.cli",))]
    assert bad == []


def test_cli_is_thin():
    """Each command's rendering lives in forensics/text/render.py or report.py, the server launcher in app/server.py."""
    assert len((REPO / "forensics" / "cli.py").read_text(encoding="utf-8").splitlines()) < 400


# forensics/'s layers, lowest first: a package imports only from those before it (and ingest). The judgement decides;
# text words it; the user's model runs on what was judged; the services wire it all; the CLI and docs sit on top.
LAYERS = ("forensics.judge", "forensics.text", "forensics.capture", "forensics.usercode", "forensics.services",
          "forensics.cli")


def layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")), None)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, targets in graph.items() for b in targets
                  if layer_of(a) is not None and layer_of(b) is not None and layer_of(b) > layer_of(a))


def test_forensics_packages_import_only_downward():
    assert upward_imports({"forensics.judge.run": {"forensics.text.render"}}) == [
        "forensics.judge.run imports forensics.text.render"]  # the check sees one
    assert upward_imports(import_graph()) == []


def test_forensics_top_level_is_its_layers():
    """A newcomer finds the room for a change in one look: forensics/ holds its layer packages and at most a few
    modules of its own (the CLI and its entry points)."""
    top = sorted(p.name for p in (REPO / "forensics").iterdir() if p.suffix == ".py")
    packages = sorted(p.name for p in (REPO / "forensics").iterdir() if (p / "__init__.py").is_file())
    assert len(top) <= 8, top
    assert set(packages) == {name.split(".")[1] for name in LAYERS if name.count(".") == 1 and name != "forensics.cli"}
    assert all(layer_of(module_of(p)) is not None or p.parent == REPO / "forensics" for p in sources("forensics"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(root: Path, folders: tuple[str, ...] = ("forensics", "app", "ingest")) -> list[str]:
    """Every import, at the top or inside a function, of a `_private` name (a function, class or module) of ours
    from another package than the importing module's own: `from forensics.usercode.replay import _device` in
    forensics/usercode/probe/ is one; the same import inside forensics/usercode/replay/ is not. A package is one
    folder: its subpackages are other packages."""
    out = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            mine = path.relative_to(root).parent.parts  # a module's package; an __init__.py's is the one it opens
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))),
                               key=lambda n: n.lineno):
                if isinstance(node, ast.Import):
                    dotted = [a.name.split(".") for a in node.names]
                else:  # `from .. import x` counts from this module's package
                    base = [*mine[:len(mine) - node.level + 1], *(node.module or "").split(".")] if node.level \
                        else node.module.split(".")
                    dotted = [[*filter(None, base), a.name] for a in node.names]
                for parts in dotted:
                    if parts[0] not in folders:
                        continue
                    for i, part in enumerate(parts[1:], 1):
                        # a name in a module belongs to the module's package
                        owner = parts[:i - 1] if i == len(parts) - 1 and not (root / Path(*parts[:i])).is_dir() \
                            else parts[:i]
                        if _private(part) and tuple(owner) != mine:
                            out.append(f"{path.relative_to(root)}:{node.lineno} imports {'.'.join(parts[:i + 1])}")
                            break
    return out


def test_no_module_imports_a_private_name_from_another_package():
    assert private_imports(REPO) == []


def test_the_private_import_check_catches_an_offender(tmp_path):
    for pkg in ("forensics/a", "forensics/b", "ingest"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "forensics/b/mod.py").write_text("_hidden = 1\n")
    (tmp_path / "forensics/a/x.py").write_text(
        "from forensics.a.y import _mine\n"           # same package: allowed
        "from forensics.b.mod import _hidden, shown\n"  # another package's private name
        "def f():\n    from forensics.b import _helper\n"  # lazily, from a package's __init__
        "from ingest._reader import read\n"           # another package's private module
        "import ingest._reader\n"
        "from torch.utils._python_dispatch import TorchDispatchMode\n"  # not ours: not judged here
        "from .. import _parent\n"                 # relative, from the package above
        "from . import _sibling\n")                # relative, its own package
    (tmp_path / "forensics/b/__init__.py").write_text("from forensics.b.mod import _hidden\n")  # its own package
    assert private_imports(tmp_path) == [
        "forensics/a/x.py:2 imports forensics.b.mod._hidden", "forensics/a/x.py:4 imports forensics.b._helper",
        "forensics/a/x.py:5 imports ingest._reader", "forensics/a/x.py:6 imports ingest._reader",
        "forensics/a/x.py:8 imports forensics._parent"]
