"""List mutmut's surviving mutants by module and by kind, from the `mutants/` folder a run leaves.

    .venv/bin/mutmut run --max-children 2
    .venv/bin/python tools/mutmut_survivors.py            # the table TESTING.md records
    .venv/bin/python tools/mutmut_survivors.py --show logic   # every survivor of one kind, as a diff

mutmut 3 writes each mutated function beside the original (`x_name__mutmut_orig`, `x_name__mutmut_N`) and
each mutant's exit code into `<module>.py.meta` (0 survived, 1 killed, 33 no test, -24 timeout, None not
run). A survivor's kind is read from its one-line difference:

- `message`: only the text inside a string literal changed ("XXabcXX", case): a message's wording.
- `message-none`: a call's argument became None where the original argument was a string or an f-string
  (a message or a label dropped).
- `logic`: anything else: an operator, a number, a branch, an argument. These are read one by one.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import tokenize
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

SURVIVED, KILLED, NO_TESTS, TIMEOUT = 0, 1, 33, -24


@dataclass(frozen=True)
class Survivor:
    key: str  # pytest_llmeval.gates.x_size__mutmut_7
    module: str  # pytest_llmeval.gates
    function: str  # size
    removed: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def kind(self) -> str:
        if _without_string_contents(self.removed) == _without_string_contents(self.added):
            return "message"
        if len(self.removed) == len(self.added) == 1 and _string_argument_became_none(
            self.removed[0], self.added[0]
        ):
            return "message-none"
        return "logic"


def _without_string_contents(lines: tuple[str, ...]) -> list[str]:
    """The lines with every string literal's contents blanked out (its prefix and quotes kept)."""
    out = []
    for line in lines:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            out.append(line.strip())
            continue
        parts = []
        for tok in tokens:
            if tok.type == tokenize.STRING:
                parts.append(re.sub(r"^([a-zA-Z]*)(['\"]{1,3}).*\2$", r"\1\2\2", tok.string, flags=re.S))
            elif tok.type == getattr(tokenize, "FSTRING_MIDDLE", None):  # Python 3.12+: f-strings tokenized
                parts.append("")
            else:
                parts.append(tok.string)
        out.append(" ".join(parts))
    return out


def _string_argument_became_none(before: str, after: str) -> bool:
    """One argument (positional or keyword) of a call went from a string or f-string to None."""
    matcher = difflib.SequenceMatcher(a=before, b=after)
    changed = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changed) != 1:
        return False
    _, i1, i2, j1, j2 = changed[0]
    new, old = after[j1:j2], before[i1:i2]
    # Widen the removed span to the whole literal it cut into.
    start = before.rfind(" ", 0, i1 + 1) + 1 if not old.startswith(("'", '"', 'f"', "f'")) else i1
    old_full = before[start:i2]
    return new.strip() == "None" and bool(re.match(r"""^(?:\w+=)?[fbr]*['"]""", old_full.strip()))


def _functions(source: str) -> dict[str, str]:
    """Every function's source by name, methods included (mutmut names them as `xǁClassǁname`)."""
    lines = source.splitlines()  # once: ast.get_source_segment splits the (2 MB) file on every call
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            found[node.name] = "\n".join(lines[node.lineno - 1 : node.end_lineno])
    return found


def survivors(root: Path, *, status: int = SURVIVED) -> list[Survivor]:
    found = []
    for meta in sorted(root.rglob("*.py.meta")):
        codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        wanted = [key for key, code in codes.items() if code == status]
        if not wanted:
            continue
        functions = _functions(meta.with_suffix("").read_text(encoding="utf-8"))
        for key in wanted:
            module, name = key.rsplit(".", 1)
            base = name.rsplit("__mutmut_", 1)[0]
            original = functions[f"{base}__mutmut_orig"].splitlines()
            # The def line differs by name only, unless a default argument was mutated.
            mutated = functions[name].replace(name, f"{base}__mutmut_orig", 1).splitlines()
            diff = list(difflib.unified_diff(original, mutated, lineterm="", n=0))
            removed = tuple(line[1:] for line in diff[2:] if line.startswith("-"))
            added = tuple(line[1:] for line in diff[2:] if line.startswith("+"))
            function = base[2:].replace("ǁ", ".").strip(".")
            found.append(Survivor(key, module, function, removed, added))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=Path("mutants"))
    parser.add_argument("--show", choices=["message", "message-none", "logic"], help="print these diffs")
    parser.add_argument("--module", help="only survivors of modules containing this text")
    args = parser.parse_args()
    found = [s for s in survivors(args.root) if not args.module or args.module in s.module]
    if args.show:
        for s in found:
            if s.kind == args.show:
                print(f"# {s.key}")
                print("\n".join(f"- {line.strip()}" for line in s.removed))
                print("\n".join(f"+ {line.strip()}" for line in s.added))
        return
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for s in found:
        by_module[s.module.removeprefix("pytest_llmeval.")][s.kind] += 1
    print("| module | message | message-none | logic | survivors |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [*sorted(by_module.items()), ("total", Counter(s.kind for s in found))]
    for module, kinds in rows:
        counts = " | ".join(str(kinds[kind]) for kind in ("message", "message-none", "logic"))
        print(f"| {module} | {counts} | {sum(kinds.values())} |")


if __name__ == "__main__":
    main()
