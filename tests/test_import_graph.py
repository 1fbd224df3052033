"""The import graph of ``operator/`` and ``trainer/``: no circle, and no upward import.

Every ``import`` and ``from ... import`` of every module counts, those inside functions too (a
lazy import that closes a circle still ties the two modules together; only ``if TYPE_CHECKING:``
blocks are left out, they never run). The dependency direction of ``../shared/DESIGN.md``:
``tenzro_operator`` may import ``tenzro_trainer``; ``tenzro_trainer`` imports neither the operator
nor a chain or IPFS client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"tenzro_operator": REPO / "operator" / "tenzro_operator",
            "tenzro_trainer": REPO / "trainer" / "tenzro_trainer"}
# what the trainer must never import (DESIGN.md: it knows nothing of chains or IPFS)
TRAINER_FORBIDDEN = ("tenzro_operator", "web3", "eth_account", "ape", "httpx")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [pkg, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(name: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The names ``node`` imports, resolved against the module ``name`` (a package's own name
    when ``path`` is its ``__init__.py``)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = node.module or ""
    if node.level:
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, base] if base else pkg)
    # `from pkg import sub` imports the module pkg.sub when there is one
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the two packages it imports (full dotted names)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            for target in _targets(name, path, node, modules):
                # the deepest module of ours that the dotted name is, or lies in
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (a few hundred)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_circle_finder_finds_a_circle_and_passes_a_chain():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports():
    g = import_graph()
    assert len(g) > 100
    # a module-level, a relative and an in-function import of modules that exist today
    assert any(t.startswith("tenzro_trainer") for t in g["tenzro_operator.spec.model"])
    assert all(not t.startswith("tenzro_operator") for m, ts in g.items() if m.startswith("tenzro_trainer")
               for t in ts)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle(package):
    found = [c for c in circles(import_graph()) if c[0].startswith(package)]
    assert not found, "import circles (each a set of modules that import each other, lazily or not): " + \
        "; ".join(" <-> ".join(c) for c in found)


def test_the_trainer_imports_no_chain_ipfs_or_operator_code():
    bad = []
    for path in PACKAGES["tenzro_trainer"].rglob("*.py"):
        for node in _imports(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            bad += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names
                    if n.split(".")[0] in TRAINER_FORBIDDEN and not getattr(node, "level", 0)]
    assert not bad, "\n".join(bad)


# What each package of the operator must not import (each says so in its docstring): the chain and
# IPFS clients sit below everything that uses them, the read model below the roles and the CLI.
LAYERS = {
    "tenzro_operator.chain": ("tenzro_operator.cli", "tenzro_operator.daemon", "tenzro_operator.ipfs",
                              "tenzro_operator.roles", "tenzro_operator.views", "tenzro_trainer"),
    "tenzro_operator.ipfs": ("tenzro_operator.chain", "tenzro_operator.cli", "tenzro_operator.daemon",
                             "tenzro_operator.roles", "tenzro_operator.views", "tenzro_trainer"),
    "tenzro_operator.views": ("tenzro_operator.cli", "tenzro_operator.daemon", "tenzro_operator.roles"),
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_each_package_imports_only_what_lies_below_it():
    g = import_graph()
    bad = [f"{m} imports {t}" for pkg, forbidden in LAYERS.items() for m, ts in g.items() if _within(m, pkg)
           for t in ts if any(_within(t, f) for f in forbidden)]
    # the verb groups register on the group `cli.main` hands them and never import it back
    bad += [f"{m} imports {t}" for m, ts in g.items() if m != "tenzro_operator.cli.__main__"
            for t in ts if t == "tenzro_operator.cli.main"]
    assert not bad, "\n".join(sorted(bad))
