"""Who a run evaluates: the base model and, beside it, every other column of the same rows.

A column is an adapter on the base weights (`--adapter`, repeatable), another full model
(`--llmeval-model NAME=PATH`: a full fine-tune, another base; `NAME=ID@URL`: a model served at an
OpenAI-compatible URL, beside the columns evaluated in this process), or the reference
(`--llmeval-reference NAME`: one of those models marked as the upper bound, reported everywhere, never
gated). Each column's name is the key of its side in every row record (records.RowRecord `models`).

Pure: no pytest, no torch. settings.py builds the roster from the options; the evaluator, the gate items and
results.py read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pytest_llmeval import gates
from pytest_llmeval.records import ADAPTER, BASE, Domain

KINDS = ("base", "adapter", "model", "reference")


class RosterError(ValueError):
    """The columns asked for do not make a run (a name twice, a reference that is no model); says which."""


@dataclass(frozen=True)
class Member:
    """One column beside the base."""

    side: str  # the key of its side in row records
    name: str  # what reports call it: the adapter's metadata name, or --llmeval-model's NAME
    kind: str  # "adapter" | "model" | "reference"
    source: str  # the adapter folder, or the model's folder or hub id
    gated: bool  # its gates compare it with the base: every adapter, and models named by --llmeval-gate-model
    domain_globs: tuple[str, ...] = ()  # the benchmark files of its domain (in-domain: better_than_base)
    path: Path | None = None  # the adapter folder (an adapter's domain also covers the files under it)
    url: str | None = None  # `NAME=ID@URL`: the /v1 URL serving model id `source`; None: not served apart


@dataclass(frozen=True)
class Roster:
    """The columns of a run beside the base, in the order given: adapters, then models."""

    members: tuple[Member, ...] = ()

    @cached_property  # asked for once per row scored (evaluated)
    def adapters(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.kind == "adapter")

    @property
    def models(self) -> tuple[Member, ...]:
        """The full models (the reference among them)."""
        return tuple(m for m in self.members if m.kind in ("model", "reference"))

    @property
    def gated(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.gated)

    @property
    def reference(self) -> Member | None:
        return next((m for m in self.members if m.kind == "reference"), None)

    @property
    def served_apart(self) -> tuple[Member, ...]:
        """The columns served at their own URL (`--llmeval-model=NAME=ID@URL`)."""
        return tuple(m for m in self.members if m.url is not None)

    @property
    def several(self) -> bool:
        """More than one column beside the base: gate items then name their column (`gate::x[name]`)."""
        return len(self.members) > 1

    def member(self, side: str) -> Member:
        found = next((m for m in self.members if m.side == side), None)
        if found is None:
            raise KeyError(side)
        return found

    def sides(self) -> list[str]:
        """Every column of a row, the base first."""
        return [BASE, *(m.side for m in self.members)]

    def domains(self, benchmark: str, rootdir: Path) -> dict[str, Domain]:
        """In or out of each gated column's domain, for one benchmark file (its path from the rootdir)."""
        return {m.side: "in" if in_domain(benchmark, m, rootdir) else "out" for m in self.gated}

    def evaluated(self, domains: Mapping[str, Domain]) -> str:
        """The column whose score passes or fails a row: the adapter whose domain the benchmark is (the
        first such), else the first adapter, else the base."""
        if not self.adapters:
            return BASE
        adapters = [m.side for m in self.adapters]
        inside = [side for side in adapters if domains.get(side) == "in"]
        if inside:
            return inside[0]
        return adapters[0] if adapters else BASE

    def to_json(self, base: Mapping[str, object]) -> list[dict[str, object]]:
        """results.json's `models`: every column, the base first, with its kind and source."""
        out: list[dict[str, object]] = [{"name": BASE, "column": BASE, "kind": "base", **base}]
        for m in self.members:
            out.append(
                {
                    "name": m.name,
                    "column": m.side,
                    "kind": m.kind,
                    "source": m.source,
                    "gated": m.gated,
                    "domain_benchmarks": list(m.domain_globs),
                }
            )
        return out


def in_domain(benchmark: str, member: Member, rootdir: Path) -> bool:
    """Is a benchmark file in a column's domain (gates.in_domain: under its folder, or matched by a glob)."""
    return gates.in_domain(benchmark, member.path, member.domain_globs, rootdir)


def parse_model_option(value: str) -> tuple[str, str]:
    """`NAME=PATH_OR_ID` of --llmeval-model into (name, source)."""
    name, sep, source = value.partition("=")
    name, source = name.strip(), source.strip()
    if not sep or not name or not source:
        raise RosterError(f"--llmeval-model: expected NAME=PATH_OR_ID or NAME=ID@URL, got {value!r}")
    return name, source


def served_at(source: str) -> tuple[str, str | None]:
    """(model id, URL) of a source written `ID@URL` (a model served apart); (source, None) otherwise. The
    URL is the part from the first `@http://` or `@https://` on, so it may carry credentials of its own."""
    for scheme in ("@http://", "@https://"):
        model_id, sep, rest = source.partition(scheme)
        if sep and model_id:
            return model_id, scheme[1:] + rest
    return source, None


def served_sides(ids: Sequence[str]) -> dict[str, str]:
    """Each served adapter's column name -> its model id: a lone adapter keeps the column `adapter` (as
    models.adapter_sides), several are named by their ids."""
    if len(ids) == 1:
        return {ADAPTER: ids[0]}
    sides: dict[str, str] = {}
    for model_id in ids:
        if model_id in sides:
            raise RosterError(f"--adapter {model_id} is given twice")
        if model_id in (BASE, ADAPTER):
            raise RosterError(f"--adapter {model_id}: the name '{model_id}' is reserved for a column")
        sides[model_id] = model_id
    return sides


def split_domain_globs(values: Sequence[str], names: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """--llmeval-domain values: `NAME=GLOB` for the column NAME, a bare GLOB for the first gated column."""
    plain: list[str] = []
    named: dict[str, list[str]] = {}
    for value in values:
        name, sep, glob = value.partition("=")
        if sep and name in names:
            named.setdefault(name, []).append(glob)
        elif sep and "/" not in name and "*" not in name:
            known = ", ".join(names) or "none"
            raise RosterError(f"--llmeval-domain {value}: no column is named '{name}' (columns: {known})")
        else:
            plain.append(value)
    return plain, named


def build_roster(
    *,
    adapters: Mapping[str, tuple[Path | str, str, Sequence[str]]],
    models: Sequence[str] = (),
    reference: str | None = None,
    gate_models: Sequence[str] = (),
    domain: Sequence[str] = (),
) -> Roster:
    """The roster from the options.

    adapters: column -> (folder, name, the metadata's domain_benchmarks), in the order given (models.
    adapter_sides names the columns; a str in place of the folder is a served model id, with no folder);
    models: --llmeval-model values; reference: --llmeval-reference;
    gate_models: --llmeval-gate-model; domain: --llmeval-domain values.
    """
    parsed = [parse_model_option(v) for v in models]
    taken = {BASE, ADAPTER, *adapters}
    for side, (_, name, _) in adapters.items():
        if side != ADAPTER:
            taken.add(name)
    seen: set[str] = set()
    for name, _ in parsed:
        if name in taken or name in seen:
            raise RosterError(
                f"--llmeval-model {name}=...: the name '{name}' is taken"
                + (" (reserved)" if name in (BASE, ADAPTER) else " by another column")
                + ": give each model its own name"
            )
        seen.add(name)
    model_names = [n for n, _ in parsed]
    if reference is not None and reference not in model_names:
        raise RosterError(
            f"--llmeval-reference {reference}: no --llmeval-model is named '{reference}' "
            f"(models: {', '.join(model_names) or 'none'})"
        )
    for name in gate_models:
        if name not in model_names:
            raise RosterError(
                f"--llmeval-gate-model {name}: no --llmeval-model is named '{name}' "
                f"(models: {', '.join(model_names) or 'none'})"
            )
        if name == reference:
            raise RosterError(f"--llmeval-gate-model {name}: the reference is reported, never gated")
    names = [*adapters, *(n for _, n, _ in adapters.values()), *model_names]
    plain, named = split_domain_globs(domain, names)
    members: list[Member] = []
    for index, (side, (path, name, meta_globs)) in enumerate(adapters.items()):
        globs = [*meta_globs, *named.get(side, []), *named.get(name, [])]
        if index == 0:
            globs += plain
        folder = path if isinstance(path, Path) else None
        members.append(Member(side, name, "adapter", str(path), True, tuple(globs), folder))
    first_gated_model = not adapters
    for name, source in parsed:
        gated = name in gate_models
        globs = list(named.get(name, []))
        if gated and first_gated_model:
            globs += plain
            first_gated_model = False
        kind = "reference" if name == reference else "model"
        model_id, url = served_at(source)
        members.append(Member(name, name, kind, model_id, gated, tuple(globs), url=url))
    return Roster(tuple(members))
