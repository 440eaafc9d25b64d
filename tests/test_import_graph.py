"""The package's imports go one way: no module imports, directly or through others, a module
that imports it back (function-level imports count: they only move the circle to run time)."""

import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "bert_tf")


def _modules():
    """{dotted name: path} of every module of bert_tf (a package as its __init__)."""
    modules = {}
    for root, _, files in os.walk(PACKAGE):
        for file in files:
            if file.endswith(".py"):
                parts = os.path.relpath(os.path.join(root, file), REPO)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = os.path.join(root, file)
    return modules


def _imports(path, modules):
    """The bert_tf modules `path` imports: `from bert_tf.a import b` is bert_tf.a.b when that is
    a module, else bert_tf.a."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in modules else node.module)
    return {name for name in found if name in modules}


def _circles(graph):
    """Every strongly connected set of two or more modules (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_package_imports_have_no_circle():
    modules = _modules()
    # A package's __init__ re-exports its submodules: the edge from a submodule to its own
    # package's names is the package reaching down, not a circle of the design.
    graph = {name: {m for m in _imports(path, modules)
                    if not (name.startswith(m + ".") and m != "bert_tf")}
             for name, path in modules.items()}
    assert _circles(graph) == []


def test_a_circle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
