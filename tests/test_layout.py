"""The package's structure: no import cycles between its modules, and one module that reads the options
(issue 37).

Every import counts, module level or inside a function: a lazy import still ties two modules together, and
a cycle is where a change to one silently needs the other. Read from the source with ast (no import runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_llmeval"


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package's __init__.py under the package's name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.with_suffix("").relative_to(package.parent).parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports (`from pkg import sub` names the submodule, not pkg)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package (or the package itself, for __init__)
                here = name.split(".")
                anchor = here[: len(here) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def package_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_names(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_cycles() -> None:
    graph = package_graph()
    found = cycles(graph)
    described = [
        " <-> ".join(c) + ": " + "; ".join(f"{a} imports {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in found
    ]
    assert not found, "import cycles:\n" + "\n".join(described)


def test_the_cycle_check_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    """The check itself, on a made-up package: a cycle through a function-level import and one through a
    relative import are found; `from pkg import sub` ties to the submodule, not to the package."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from pkg.a import f\n")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text("from ..sub import d\n")
    (pkg / "sub" / "d.py").write_text("from pkg.sub import c\n")
    (pkg / "e.py").write_text("from pkg import a\n")  # not a cycle through the package's __init__
    graph = package_graph(pkg)
    assert graph["pkg.e"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]


# The modules that may read pytest's parsed options, each with its reason. Every other module reads
# config.stash[SETTINGS_KEY], built once at pytest_configure: an option has one parser and one check, and a
# hook cannot read a raw value that configure refused or turned into something else (a path from the
# invocation folder, a downloaded adapter). hooks/options.py declares the options and reads none.
OPTION_READERS = {
    # Settings.from_config: every option parsed and checked once; and rootdir_from_option, which reads
    # pytest's own --rootdir, -c and positional arguments to ask how pytest chose its rootdir.
    "pytest_llmeval.settings",
}


def option_reads(path: Path) -> list[str]:
    """Where a module reads pytest's parsed options, as `line: source`: an attribute `.option` that is not
    called (config.option, pytestconfig.option; a function named option is not an option read), a call of
    `.getoption`, or getattr(..., "option")."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
            node.attr == "getoption" or (node.attr == "option" and id(node) not in called)
        ):
            found.append(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "option"
        ):
            found.append(node)
    return sorted(f"{n.lineno}: {ast.get_source_segment(source, n)}" for n in found)


def test_only_settings_reads_the_options() -> None:
    readers = {name: reads for name, path in module_names(PACKAGE).items() if (reads := option_reads(path))}
    outside = {name: reads for name, reads in readers.items() if name not in OPTION_READERS}
    assert not outside, "read config.stash[SETTINGS_KEY] instead of the options:\n" + "\n".join(
        f"{name}: {read}" for name, reads in sorted(outside.items()) for read in reads
    )
    # An exception no longer needed is taken out: it would let the next read in that module through.
    assert set(readers) >= OPTION_READERS


def test_the_option_check_sees_every_way_to_read_an_option(tmp_path: Path) -> None:
    """The check itself: config.option, a pytestconfig's, getoption and getattr are found; a function that
    happens to be called option is not."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f(config, session, judge):\n"
        "    a = config.option.llmeval_seed\n"
        "    b = session.config.getoption('--llmeval-seed')\n"
        "    c = getattr(config, 'option')\n"
        "    d = judge.option(config, 'runs')\n"
        "    opt = config.option\n"
    )
    assert option_reads(module) == [
        "2: config.option",
        "3: session.config.getoption",
        "4: getattr(config, 'option')",
        "6: config.option",
    ]


def test_the_entry_point_imports_every_hook_and_fixture_of_hooks() -> None:
    """pytest registers plugin.py alone (the pytest11 entry point) and finds hooks and fixtures among its
    attributes: one defined in hooks/ and not imported there would never run."""
    defined = set()
    for path in sorted((PACKAGE / "hooks").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
            if node.name.startswith("pytest_") or fixture:
                defined.add(node.name)
    plugin = ast.parse((PACKAGE / "plugin.py").read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in plugin.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "pytest_configure" in defined and "llm" in defined  # the hooks modules were read
    assert defined == imported - {"annotations"}


@pytest.mark.parametrize(
    "name",
    ["pytest_llmeval.ci", "pytest_llmeval.ci.__main__", "pytest_llmeval.__main__", "pytest_llmeval.cli"],
)
def test_the_command_line_modules_are_where_their_commands_run_them(name: str) -> None:
    """`python -m pytest_llmeval`, `python -m pytest_llmeval.ci` and the console script (pytest_llmeval.cli)
    find their modules."""
    assert name in module_names(PACKAGE)
