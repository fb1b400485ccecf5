"""The documentation stays true to the code: the generated option reference is current and complete, the
README stays a front page, every relative link and anchor resolves, the source documents' pages cite tests
that exist, and the MkDocs site builds strictly."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
OPTIONS_PAGE = DOCS / "reference" / "options.md"


gen_options_doc = load_script(REPO / "tools" / "gen_options_doc.py", "gen_options_doc")


def test_option_reference_is_the_generated_text() -> None:
    committed = OPTIONS_PAGE.read_text(encoding="utf-8")
    assert committed == gen_options_doc.render(), (
        "docs/reference/options.md differs from the plugin's options: run `python tools/gen_options_doc.py`"
    )


def test_options_are_grouped_by_concern_in_help() -> None:
    """`pytest --help` shows the plugin's options in groups by concern (issue 37), never one flat list."""
    parser = gen_options_doc.build_parser()
    groups = [(g.name, [o.names()[0] for o in g.options]) for g in parser._groups if g.options]
    concerns = ["models", "endpoint", "generation", "prompts", "selection", "gates", "hygiene", "training"]
    concerns.append("measures")
    assert [name for name, _ in groups] == [f"llmeval-{c}" for c in [*concerns, "budget", "outputs"]]
    assert all(len(options) <= 12 for _, options in groups), groups
    assert dict(groups)["llmeval-endpoint"][0] == "--llmeval-endpoint"


def test_check_mode_fails_on_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "docs" / "reference" / "options.md"
    monkeypatch.setattr(gen_options_doc, "REPO", tmp_path)
    monkeypatch.setattr(gen_options_doc, "OUTPUT", page)
    assert gen_options_doc.main(["--check"]) == 1  # no page at all
    assert gen_options_doc.main([]) == 0
    assert gen_options_doc.main(["--check"]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("--llmeval-batch-size", "--llmeval-batch"))
    capsys.readouterr()
    assert gen_options_doc.main(["--check"]) == 1
    assert "differs from the plugin's options" in capsys.readouterr().err


def test_option_reference_names_every_option(pytestconfig: pytest.Config) -> None:
    """Every option the loaded plugin defines (read from the live config, not from the generator)."""
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    dests = [dest for dest in vars(pytestconfig.option) if dest.startswith("llmeval_")]
    names = ["--adapter", "--base-model", *("--" + dest.replace("_", "-") for dest in dests)]
    assert len(names) > 40
    missing = [name for name in names if not re.search(rf"\| `{re.escape(name)}[ `]", page)]
    assert not missing, f"docs/reference/options.md lacks {missing}"
    assert "| `llmeval_files` |" in page  # the ini value


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move reference text into docs/"
    # The title, then the two commands, then what they need: before anything else.
    assert lines[:3] == ["# pytest-llmeval", "", "```bash"]
    assert lines[3].startswith("make demo   # set up")
    assert lines[4].startswith("make test   # set up the same way")
    assert lines[5:7] == ["```", ""]
    assert lines[7].startswith("Both commands work on a fresh machine")


def _without_code(text: str) -> str:
    """Markdown with fenced blocks and inline code blanked out: links inside them are not links."""
    kept: list[str] = []
    fence = ""
    for line in text.splitlines():
        marker = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = ""
            kept.append("")
        elif marker:
            fence = marker.group(1)
            kept.append("")
        else:
            kept.append(re.sub(r"(`+).+?\1", "", line))
    return "\n".join(kept)


def _anchors(path: Path) -> set[str]:
    """The heading ids GitHub gives a Markdown file (mkdocs.yml makes the site use the same slugs)."""
    seen: dict[str, int] = {}
    ids: set[str] = set()
    fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(`{3,}|~{3,})", line):
            fence = not fence
            continue
        heading = None if fence else re.match(r"#{1,6} (.+)", line)
        if not heading:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1)).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


MARKDOWN = [README, *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("source", MARKDOWN, ids=lambda path: str(path.relative_to(REPO)))
def test_relative_links_resolve(source: Path) -> None:
    text = _without_code(source.read_text(encoding="utf-8"))
    broken: list[str] = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (source.parent / file_part).resolve() if file_part else source
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with id {anchor!r}")
    assert not broken, f"{source.relative_to(REPO)}: {broken}"


# A test cited in a page of docs/sources/: `tests/<file>.py::<name>` (a parametrised id's `[...]` is not
# captured), or the file alone for a test being written.
CITED_TEST = re.compile(r"\btests/([\w/]+\.py)(?:::(\w+))?")


def _test_functions(path: Path) -> set[str]:
    """The names of the test functions a test file defines, read with ast (nothing is imported or run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }


def test_source_pages_cite_tests_that_exist() -> None:
    """Each requirement row of docs/sources/ names its tests or says "no test"; every test named is a test
    function of an existing file, and a file cited alone (a test being written) exists."""
    pages = sorted((DOCS / "sources").glob("*.md"))
    assert len(pages) == 6, [page.name for page in pages]  # the index and one page per source document
    functions: dict[Path, set[str]] = {}
    problems: list[str] = []
    cited = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for line in text.splitlines():
            header = line.startswith(("| requirement", "| ---"))
            if page.name == "index.md" or not line.startswith("| ") or header:
                continue  # the requirement tables' rows only
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            if len(cells) != 3:
                problems.append(f"{page.name}: a row without its three cells: {line[:80]}")
            elif "tests/" not in cells[2] and "no test" not in cells[2]:
                problems.append(f"{page.name}: a row names no test and does not say 'no test': {cells[0]}")
        for match in CITED_TEST.finditer(text):
            cited += 1
            path, name = REPO / "tests" / match.group(1), match.group(2)
            if not path.is_file():
                problems.append(f"{page.name}: {match.group(0)}: no such file")
                continue
            if path not in functions:
                functions[path] = _test_functions(path)
            if name is not None and name not in functions[path]:
                problems.append(f"{page.name}: {match.group(0)}: no test function {name} in that file")
    assert cited > 100  # the tables were read: a changed citation format would otherwise pass on nothing
    assert not problems, "\n".join(problems)


def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (the `dev` extra installs it)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (the `dev` extra installs it)")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    command = [str(mkdocs)] if mkdocs.exists() else [sys.executable, "-m", "mkdocs"]
    result = subprocess.run(
        [*command, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "reference" / "options" / "index.html").is_file()


def test_every_default_a_help_text_states_is_the_options_default() -> None:
    """Where an option's help says "default N", N is what the option defaults to (or, for the drops that
    --llmeval-criteria fills in, what the default criteria apply): a help text cannot drift from the code."""
    from pytest_llmeval.gates import DEFAULT_CRITERIA

    filled = {
        "--llmeval-warn-drop": DEFAULT_CRITERIA.warn_drop,
        "--llmeval-fail-drop": DEFAULT_CRITERIA.fail_drop,
    }
    checked = []
    for group in gen_options_doc.build_parser()._groups:
        for option in group.options:
            name, attrs = option.names()[0], option.attrs()
            default = filled.get(name, attrs.get("default"))
            text = attrs.get("help") or ""
            # "auto (default: what auto does)" names the default before the parenthesis; else "default N".
            said = re.search(r"([\w.-]+) \(default: ", text)
            if said is None and "default" not in (attrs.get("choices") or ()):  # a choice named "default"
                said = re.search(r"default[: ]+([^,;)\s]+)", text)
            if said is None or isinstance(default, (bool, list, tuple)) or default is None:
                continue
            token = said.group(1).rstrip(":.")
            if isinstance(default, (int, float)):
                assert float(token) == float(default), (name, token, default)
            else:
                assert token in (str(default), f"./{default}"), (name, token, default)
            checked.append(name)
    # The options whose help states a default: the test is not empty by accident.
    assert {"--llmeval-batch-size", "--llmeval-alpha", "--llmeval-min-rows", "--llmeval-fail-drop"} <= set(
        checked
    )
