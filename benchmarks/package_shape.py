"""The package's shape, for the closing notes of structural changes: modules and lines per
package, import circles (function-local imports included), function-local imports, the
longest functions and modules over 600 lines, functions with more than 6 parameters, `noqa` and
`type: ignore` comments, and docstring coverage of public names (a public module's functions,
classes and methods whose names do not start with `_`).

    python benchmarks/package_shape.py [ROOT]      # ROOT: a checkout (default: this one)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(tree: ast.AST, name: str, is_package: bool, known: set[str]):
    """(target module, function-local?) for every import in a module."""
    out = []
    in_functions = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        local = id(node) in in_functions
        out += [(t, local) for t in targets if t.split(".")[0] in ("workbench", "widgets")][: 1 if local else None]
    return out


def main(root: Path) -> None:
    files = sorted(p for d in ("workbench", "widgets") for p in (root / d).rglob("*.py"))
    known = {module_name(root, f) for f in files}
    graph: dict[str, set[str]] = defaultdict(set)
    local_imports = 0
    functions = []
    per_package: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    big = []
    many_params: list[tuple[int, str]] = []
    suppressions = {"noqa": 0, "type: ignore": 0}
    public, documented = 0, 0
    for f in files:
        name = module_name(root, f)
        text = f.read_text(encoding="utf-8")
        lines = text.count("\n")
        pkg = name.rsplit(".", 1)[0] if f.name != "__init__.py" else name
        per_package[pkg][0] += 1
        per_package[pkg][1] += lines
        if lines > 600:
            big.append((lines, name))
        tree = ast.parse(text)
        for line in text.splitlines():
            comment = line.partition("#")[2]
            suppressions["noqa"] += "noqa" in comment
            suppressions["type: ignore"] += "type: ignore" in comment
        p, d = docstring_counts(tree)
        public, documented = public + p, documented + d
        for target, local in imports_of(tree, name, f.name == "__init__.py", known):
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                graph[name].add(target)
            local_imports += local
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
                a = node.args
                n_params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                n_params -= bool(a.args) and a.args[0].arg in ("self", "cls")
                if n_params > 6:
                    many_params.append((n_params, f"{name}.{node.name}"))
    # strongly connected components (Tarjan): each with more than one module is an import circle
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(known):
        if v not in index:
            visit(v)
    # a package's __init__ re-exporting its modules is not a circle of logic: count circles
    # between modules only (edges into a package's __init__ from its own modules are skipped)
    circles = [sorted(c) for c in sccs if len(c) > 1]
    print(f"{root}: {len(files)} modules, {sum(v[1] for v in per_package.values())} lines")
    for pkg, (n, lines) in sorted(per_package.items()):
        print(f"  {pkg:28s} {n:3d} modules {lines:6d} lines")
    print(f"function-local imports of workbench/widgets modules: {local_imports}")
    print(f"import circles (strongly connected sets of modules): {len(circles)}")
    for c in circles:
        print(f"  {len(c)} modules: {', '.join(c)}")
    print(
        "modules over 600 lines: " + (", ".join(f"{n} ({lines})" for lines, n in sorted(big, reverse=True)) or "none")
    )
    print("longest functions: " + ", ".join(f"{n} ({lines})" for lines, n in sorted(functions, reverse=True)[:8]))
    print(
        f"functions with more than 6 parameters (*args and **kwargs count one each; self/cls not): {len(many_params)}: "
        + ", ".join(f"{n} ({k})" for k, n in sorted(many_params, reverse=True))
    )
    print(f"noqa comments: {suppressions['noqa']}; type: ignore comments: {suppressions['type: ignore']}")
    print(f"docstring coverage of public names: {documented} of {public} ({100 * documented / max(public, 1):.0f}%)")


def docstring_counts(tree: ast.Module) -> tuple[int, int]:
    """(public names, documented ones): the module's top-level functions and classes and their
    methods, none whose name starts with `_` (dunder methods are not counted either)."""
    public = documented = 0

    def visit(body):
        nonlocal public, documented
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith(
                "_"
            ):
                public += 1
                documented += ast.get_docstring(node) is not None
                if isinstance(node, ast.ClassDef):
                    visit(node.body)

    visit(tree.body)
    return public, documented


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
