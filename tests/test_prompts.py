"""prompts.py and the prompt half of generation.py: layers, few-shot draws, Jinja templates, sidecars,
adapter metadata, and the prompts build_prompt renders with a real (offline) tokenizer."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_llmeval.generation import (
    PLAIN_TEMPLATE,
    PLAIN_TEMPLATE_NO_INPUT,
    build_prompt,
    chat_messages,
    user_message,
)
from pytest_llmeval.prompts import (
    ADAPTER,
    BENCHMARK,
    COMMAND_LINE,
    ROW,
    Example,
    Layer,
    PromptError,
    PromptSpec,
    Template,
    adapter_layer,
    check,
    compile_template,
    load_benchmark_prompt,
    pick_examples,
    render_template,
    resolve,
)

# --- resolve -----------------------------------------------------------------------------------------------

ROW_T = Template("{{ instruction }}", "bench.jsonl:3")
BENCH_T = Template("{{ input }}", "bench.llmeval.toml")
CLI_T = Template("{{ system }}", "cli.jinja")


def test_resolve_takes_each_field_from_the_most_specific_layer_that_sets_it() -> None:
    spec = resolve(
        [
            (ROW, Layer(system="row system")),
            (BENCHMARK, Layer(template=BENCH_T, fewshot=2)),
            (ADAPTER, Layer(system="adapter system", template=ROW_T)),
            (COMMAND_LINE, Layer(system="cli system", template=CLI_T, fewshot=5)),
        ]
    )
    assert (spec.system, spec.template, spec.fewshot) == ("row system", BENCH_T, 2)
    assert spec.sources == {"system": ROW, "template": BENCHMARK, "fewshot": BENCHMARK}


def test_resolve_falls_through_to_less_specific_layers() -> None:
    spec = resolve(
        [(ROW, Layer()), (BENCHMARK, Layer()), (ADAPTER, Layer()), (COMMAND_LINE, Layer(CLI_T.source))]
    )
    assert spec.system == CLI_T.source
    assert spec.sources == {"system": COMMAND_LINE}
    assert spec.template is None and spec.fewshot == 0


def test_a_zero_fewshot_is_a_setting_not_an_absence() -> None:
    spec = resolve([(BENCHMARK, Layer(fewshot=0)), (ADAPTER, Layer(fewshot=3))])
    assert spec.fewshot == 0
    assert spec.sources == {"fewshot": BENCHMARK}


@pytest.mark.parametrize("override", [0, 1, 7])
def test_fewshot_override_wins_over_every_layer(override: int) -> None:
    spec = resolve([(ROW, Layer(fewshot=2)), (BENCHMARK, Layer(fewshot=4))], fewshot_override=override)
    assert spec.fewshot == override
    assert spec.sources["fewshot"] == COMMAND_LINE == "command line"


def test_empty_layers_give_the_plain_prompt() -> None:
    assert resolve([]) == PromptSpec()
    spec = resolve([(ROW, Layer()), (BENCHMARK, Layer()), (ADAPTER, Layer()), (COMMAND_LINE, Layer())])
    assert spec == PromptSpec()
    assert spec.plain and not spec.sources
    assert not resolve([(ROW, Layer(system=""))]).plain  # an empty system prompt is still one


# --- pick_examples ---------------------------------------------------------------------------------------

IDS = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=6)
POOLS = st.lists(IDS, unique=True, max_size=14).map(
    lambda ids: [Example(i, f"do {i}", f"in {i}", f"out {i}", n + 1) for n, i in enumerate(ids)]
)


@st.composite
def draws(draw: st.DrawFn) -> tuple[str, list[Example], int]:
    """A pool, a row id (often one of the pool's own: a benchmark's rows are its own pool), a k."""
    pool = draw(POOLS)
    own = [e.id for e in pool]
    own_row = bool(own) and draw(st.booleans())
    row_id = draw(st.sampled_from(own)) if own_row else draw(IDS)
    return row_id, pool, draw(st.integers(-1, 16))


def ids(examples: list[Example]) -> list[str]:
    return [e.id for e in examples]


@settings(max_examples=200, deadline=None)
@given(draws())
def test_pick_never_the_row_itself_and_as_many_as_it_can(case: tuple[str, list[Example], int]) -> None:
    row_id, pool, k = case
    picked = pick_examples(row_id, pool, k)
    others = [e for e in pool if e.id != row_id]
    assert row_id not in ids(picked)
    assert len(picked) == max(0, min(k, len(others)))
    assert all(e in pool for e in picked)


@settings(max_examples=200, deadline=None)
@given(draws())
def test_pick_is_deterministic_and_in_pool_order(case: tuple[str, list[Example], int]) -> None:
    row_id, pool, k = case
    picked = pick_examples(row_id, pool, k)
    assert picked == pick_examples(row_id, list(pool), k)
    positions = [pool.index(e) for e in picked]
    assert positions == sorted(positions)


@settings(max_examples=200, deadline=None)
@given(draws(), st.randoms(use_true_random=False))
def test_pick_chooses_the_same_set_whatever_the_pool_order(
    case: tuple[str, list[Example], int], rng: random.Random
) -> None:
    row_id, pool, k = case
    shuffled = list(pool)
    rng.shuffle(shuffled)
    picked = pick_examples(row_id, shuffled, k)
    assert set(ids(picked)) == set(ids(pick_examples(row_id, pool, k)))
    assert [shuffled.index(e) for e in picked] == sorted(shuffled.index(e) for e in picked)


@settings(max_examples=300, deadline=None)
@given(draws(), IDS, st.integers(0, 20))
def test_adding_an_example_changes_at_most_one_pick(
    case: tuple[str, list[Example], int], new_id: str, where: int
) -> None:
    row_id, pool, k = case
    assume(new_id != row_id and new_id not in ids(pool))
    grown = list(pool)
    grown.insert(min(where, len(grown)), Example(new_id, "new", "", "new out"))
    before = set(ids(pick_examples(row_id, pool, k)))
    after = set(ids(pick_examples(row_id, grown, k)))
    # Each example's draw is a hash of (row, example): the newcomer either enters the top k, pushing out
    # at most one, or changes nothing.
    assert after - before <= {new_id}
    assert len(before - after) <= 1
    if len(before) < k:  # room left: nothing is pushed out, the newcomer joins
        assert after == before | {new_id}


def test_pick_examples_spreads_over_rows() -> None:
    """Not every row gets the same examples: the draw depends on the row (a constant key would pass the
    properties above)."""
    pool = [Example(f"e{i}", "i", "", "o") for i in range(20)]
    chosen = {tuple(ids(pick_examples(f"row{r}", pool, 3))) for r in range(30)}
    assert len(chosen) > 10


# --- templates ------------------------------------------------------------------------------------------

EXAMPLES = (
    Example("a", "Add.", "1 + 1", "2", 1),
    Example("b", "Name a colour.", "", "red", 2),
)


def render(source: str, *, eos_token: str | None = "</s>", origin: str = "bench.llmeval.toml") -> str:
    return render_template(
        Template(source, origin),
        system="Be brief.",
        instruction="Add.",
        input="2 + 3",
        examples=EXAMPLES,
        eos_token=eos_token,
    )


def test_template_renders_every_variable() -> None:
    source = (
        "{{ system }}\n"
        "{% for e in examples %}"
        "Q: {{ e.instruction }} {{ e.input }}\nA: {{ e.output }}{{ eos_token }}\n"
        "{% endfor %}"
        "Q: {{ instruction }} {{ input }}\nA:"
    )
    assert (
        render(source)
        == "Be brief.\nQ: Add. 1 + 1\nA: 2</s>\nQ: Name a colour. \nA: red</s>\nQ: Add. 2 + 3\nA:"
    )


def test_template_keeps_its_trailing_newline_and_eos_may_be_missing() -> None:
    assert render("{{ instruction }}{{ eos_token }}\n", eos_token=None) == "Add.\n"


def test_undefined_variable_is_an_error_naming_the_origin() -> None:
    with pytest.raises(PromptError, match=r"bench\.llmeval\.toml does not render: 'question' is undefined"):
        render("{{ instruction }} {{ question }}")
    with pytest.raises(PromptError, match="has no attribute 'answer'"):
        render("{{ examples[0].answer }}")  # an example has instruction, input and output only


def test_syntax_error_names_the_template_line() -> None:
    template = Template("{{ instruction }}\n{% if %}\n", "my.jinja")
    with pytest.raises(PromptError, match=r"prompt template my\.jinja, line 2: "):
        compile_template(template)
    with pytest.raises(PromptError, match="line 2"):
        render(template.source, origin="my.jinja")


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ instruction.__class__.__mro__ }}",
        "{{ ''.__class__.__base__.__subclasses__() }}",
        "{{ examples.append(1) }}",  # immutable: a template cannot change what it is given
    ],
)
def test_sandbox_refuses_unsafe_access(source: str) -> None:
    with pytest.raises(PromptError, match="unsafe") as info:
        render(source)
    assert "<class" not in str(info.value)


def test_check_raises_at_the_row_line() -> None:
    spec = PromptSpec(template=Template("{{ nope }}", "bench.jsonl:7"))
    with pytest.raises(PromptError) as info:
        check(spec, "i", "x", (), 7)
    assert info.value.line == 7
    check(PromptSpec(), "i", "x", (), 7)  # no template: nothing to check


@pytest.mark.parametrize("source", ["{{ instruction + 1 }}", "{{ 1 / 0 }}", "{{ range(10**9) | list }}"])
def test_a_template_that_fails_at_render_time_is_a_prompt_error(source: str) -> None:
    with pytest.raises(PromptError, match="does not render"):
        render(source)


# --- the benchmark sidecar ------------------------------------------------------------------------------


def benchmark(tmp_path: Path, sidecar: str | None = None, fewshot: str | None = None) -> Path:
    path = tmp_path / "dates.jsonl"
    path.write_text('{"id": "r1"}\n', encoding="utf-8")
    if sidecar is not None:
        (tmp_path / "dates.llmeval.toml").write_text(sidecar, encoding="utf-8")
    if fewshot is not None:
        (tmp_path / "dates.fewshot.jsonl").write_text(fewshot, encoding="utf-8")
    return path


def shot(id: str, **extra: Any) -> str:
    return json.dumps(
        {"id": id, "instruction": f"do {id}", "input": f"in {id}", "expected_output": id, **extra}
    )


def test_no_sidecar_is_an_empty_layer_and_the_rows_as_pool(tmp_path: Path) -> None:
    found = load_benchmark_prompt(benchmark(tmp_path))
    assert found.layer.empty
    assert found.pool is None and found.sidecar is None and found.fewshot_file is None
    assert found.to_json() == {"sidecar": None, "fewshot_pool": "the benchmark's other rows"}


def test_sidecar_with_system_template_and_fewshot(tmp_path: Path) -> None:
    found = load_benchmark_prompt(
        benchmark(
            tmp_path, '[prompt]\nsystem = "Be brief."\ntemplate = "Q: {{ instruction }}"\nfewshot = 3\n'
        )
    )
    assert found.layer == Layer("Be brief.", Template("Q: {{ instruction }}", "dates.llmeval.toml"), 3)
    assert found.sidecar == tmp_path / "dates.llmeval.toml"
    assert found.pool is None


def test_template_file_is_relative_to_the_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "qa.jinja").write_text("Q: {{ instruction }}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "prompts")  # not the working directory's
    found = load_benchmark_prompt(benchmark(tmp_path, '[prompt]\ntemplate_file = "prompts/qa.jinja"\n'))
    assert found.layer.template is not None
    assert found.layer.template.source == "Q: {{ instruction }}\n"
    assert Path(found.layer.template.origin) == tmp_path / "prompts" / "qa.jinja"


def test_fewshot_jsonl_beside_the_benchmark_is_the_pool(tmp_path: Path) -> None:
    found = load_benchmark_prompt(benchmark(tmp_path, fewshot=f"{shot('s1')}\n\n{shot('s2', tags=['x'])}\n"))
    assert found.layer.empty and found.sidecar is None
    assert found.pool == (Example("s1", "do s1", "in s1", "s1", 1), Example("s2", "do s2", "in s2", "s2", 3))
    assert found.to_json()["fewshot_pool"] == "dates.fewshot.jsonl (2 examples)"


def test_fewshot_file_key_is_relative_to_the_sidecar_and_wins(tmp_path: Path) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "mine.jsonl").write_text(shot("m1") + "\n", encoding="utf-8")
    path = benchmark(
        tmp_path, '[prompt]\nfewshot_file = "shots/mine.jsonl"\n', fewshot=shot("ignored") + "\n"
    )
    found = load_benchmark_prompt(path)
    assert found.pool is not None and [e.id for e in found.pool] == ["m1"]
    assert found.fewshot_file == tmp_path / "shots" / "mine.jsonl"


def test_an_example_without_input_has_an_empty_one(tmp_path: Path) -> None:
    row = json.dumps({"id": "s", "instruction": "i", "expected_output": "o"})
    found = load_benchmark_prompt(benchmark(tmp_path, fewshot=row + "\n"))
    assert found.pool == (Example("s", "i", "", "o", 1),)


@pytest.mark.parametrize(
    ("sidecar", "message"),
    [
        ('[prompt]\nsystem = "unterminated\n', r"^dates\.llmeval\.toml: .*line 2"),
        ('[prompts]\nsystem = "x"\n', r"dates\.llmeval\.toml: unknown table or key 'prompts'"),
        ('[prompt]\nsytem = "x"\n', r"dates\.llmeval\.toml: unknown prompt key 'sytem'"),
        ('prompt = "x"\n', r"`prompt` must be a table"),
        ("[prompt]\nsystem = 3\n", r"system must be a string"),
        ('[prompt]\ntemplate = "a"\ntemplate_file = "b.jinja"\n', r"template or template_file, not both"),
        ("[prompt]\ntemplate = 3\n", r"template must be a string"),
        ('[prompt]\ntemplate = "x\\n{% if %}"\n', r"prompt template dates\.llmeval\.toml, line 2"),
        ("[prompt]\nfewshot = -1\n", r"fewshot must be a whole number >= 0, got -1"),
        ("[prompt]\nfewshot = true\n", r"fewshot must be a whole number >= 0, got True"),
        ('[prompt]\nfewshot = "3"\n', r"fewshot must be a whole number >= 0, got '3'"),
        ("[prompt]\nfewshot = 2.0\n", r"fewshot must be a whole number"),
        (
            '[prompt]\ntemplate_file = "missing.jinja"\n',
            r"dates\.llmeval\.toml: template_file missing\.jinja is not a file",
        ),
        (
            '[prompt]\nfewshot_file = "missing.jsonl"\n',
            r"dates\.llmeval\.toml: fewshot_file missing\.jsonl is not a file",
        ),
        ("[prompt]\nfewshot_file = 3\n", r"fewshot_file must be a path"),
    ],
)
def test_bad_sidecars(tmp_path: Path, sidecar: str, message: str) -> None:
    with pytest.raises(PromptError, match=message) as info:
        load_benchmark_prompt(benchmark(tmp_path, sidecar))
    assert info.value.line == 1  # a benchmark-wide setting


@pytest.mark.parametrize(
    ("fewshot", "message"),
    [
        (f"{shot('s1')}\n{{not json\n", r"^dates\.fewshot\.jsonl:2: "),
        (
            f"{shot('s1')}\n\n{json.dumps({'id': 's2', 'instruction': 'i'})}\n",
            r"^dates\.fewshot\.jsonl:3: .*'expected_output'",
        ),
        (
            json.dumps({"id": 1, "instruction": "i", "expected_output": "o"}),
            r"^dates\.fewshot\.jsonl:1: .*'id'",
        ),
        (shot("s1", input=["x"]), r"^dates\.fewshot\.jsonl:1: .*'input'"),
        ("[1, 2]\n", r"^dates\.fewshot\.jsonl:1: "),
        ("", r"^dates\.fewshot\.jsonl: no few-shot examples"),
        ("\n\n", r"^dates\.fewshot\.jsonl: no few-shot examples"),
    ],
)
def test_bad_fewshot_files(tmp_path: Path, fewshot: str, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        load_benchmark_prompt(benchmark(tmp_path, fewshot=fewshot))


def test_fewshot_file_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = benchmark(tmp_path)
    (tmp_path / "dates.fewshot.jsonl").write_bytes(shot("s1").encode() + b"\n\xff\n")
    with pytest.raises(PromptError, match=r"^dates\.fewshot\.jsonl:2: not valid UTF-8"):
        load_benchmark_prompt(path)


# --- the adapter's layer ---------------------------------------------------------------------------------


def test_adapter_without_prompt_is_an_empty_layer(tmp_path: Path) -> None:
    assert adapter_layer({}, tmp_path) == Layer()
    assert adapter_layer({"prompt": None, "base_model": "x"}, tmp_path).empty


def test_adapter_prompt_with_system_and_template_file(tmp_path: Path) -> None:
    assert adapter_layer({"prompt": {"system": "Be brief."}}, tmp_path) == Layer(system="Be brief.")
    (tmp_path / "chat.jinja").write_text("{{ system }}|{{ instruction }}", encoding="utf-8")
    layer = adapter_layer({"prompt": {"template_file": "chat.jinja", "fewshot": 4}}, tmp_path)
    assert layer.template == Template("{{ system }}|{{ instruction }}", str(tmp_path / "chat.jinja"))
    assert layer.fewshot is None  # the number of examples is the benchmark's or the command line's


@pytest.mark.parametrize("prompt", ["Be brief.", ["Be brief."], 3])
def test_adapter_prompt_not_an_object_names_metadata_json(tmp_path: Path, prompt: Any) -> None:
    with pytest.raises(PromptError, match=r"metadata\.json: `prompt` must be an object") as info:
        adapter_layer({"prompt": prompt}, tmp_path)
    assert str(tmp_path / "metadata.json") in str(info.value)


def test_adapter_prompt_bad_key_names_metadata_json(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match=r"metadata\.json: unknown prompt key 'sys'"):
        adapter_layer({"prompt": {"sys": "x"}}, tmp_path)


# --- build_prompt with a real tokenizer -----------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_tokenizer() -> Any:
    """The embedded SmolLM2 tokenizer: a real ChatML template, no BOS token in front of encodings."""
    from transformers import AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    assert tokenizer.chat_template
    return tokenizer


@pytest.fixture(scope="module")
def plain_tokenizer() -> Any:
    """The same tokenizer without its chat template (a base model's)."""
    from transformers import AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    tokenizer.chat_template = None
    return tokenizer


@pytest.fixture(scope="module")
def bos_tokenizer() -> Any:
    """A word-level tokenizer built in memory that starts every encoding with <s> (like Llama 2's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, "x": 3}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    inner.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(
        tokenizer_object=inner, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def test_plain_row_prompt_is_unchanged(chat_tokenizer: Any, plain_tokenizer: Any) -> None:
    """No system, no examples, no template: the prompt every row had before prompts.py."""
    expected = chat_tokenizer.apply_chat_template(
        [{"role": "user", "content": "Add.\n\n2 + 3"}], tokenize=False, add_generation_prompt=True
    )
    assert build_prompt(chat_tokenizer, "Add.", "2 + 3") == expected
    assert chat_messages("Add.", "2 + 3") == [{"role": "user", "content": "Add.\n\n2 + 3"}]
    assert build_prompt(plain_tokenizer, "Add.", "2 + 3") == PLAIN_TEMPLATE.format(
        instruction="Add.", input="2 + 3"
    )
    assert build_prompt(plain_tokenizer, "Add.") == PLAIN_TEMPLATE_NO_INPUT.format(instruction="Add.")


def test_chat_prompt_with_system_and_examples(chat_tokenizer: Any) -> None:
    messages = chat_messages("Add.", "2 + 3", system="Be brief.", examples=EXAMPLES)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages] == [
        "Be brief.",
        user_message("Add.", "1 + 1"),
        "2",
        "Name a colour.",
        "red",
        "Add.\n\n2 + 3",
    ]
    text = build_prompt(chat_tokenizer, "Add.", "2 + 3", system="Be brief.", examples=EXAMPLES)
    assert text == chat_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "named SmolLM" not in text  # our system prompt replaces the template's default one
    turns = [
        "<|im_start|>user\nAdd.\n\n1 + 1<|im_end|>",
        "<|im_start|>assistant\n2<|im_end|>",
        "<|im_start|>user\nName a colour.<|im_end|>",
        "<|im_start|>assistant\nred<|im_end|>",
        "<|im_start|>user\nAdd.\n\n2 + 3<|im_end|>",
    ]
    positions = [text.index(t) for t in turns]
    assert positions == sorted(positions)
    assert text.endswith("<|im_start|>assistant\n")


def test_plain_prompt_with_system_and_examples(plain_tokenizer: Any) -> None:
    text = build_prompt(plain_tokenizer, "Add.", "2 + 3", system="Be brief.", examples=EXAMPLES)
    assert text == "\n\n".join(
        [
            "Be brief.",
            PLAIN_TEMPLATE.format(instruction="Add.", input="1 + 1") + "2",
            PLAIN_TEMPLATE_NO_INPUT.format(instruction="Name a colour.") + "red",
            PLAIN_TEMPLATE.format(instruction="Add.", input="2 + 3"),
        ]
    )


TEMPLATE = Template(
    "{{ system }}\n{% for e in examples %}{{ e.instruction }}={{ e.output }}{{ eos_token }}\n{% endfor %}"
    "{{ instruction }} {{ input }} =",
    "test.jinja",
)


@pytest.mark.parametrize("name", ["chat_tokenizer", "plain_tokenizer"])
def test_template_renders_the_whole_prompt(name: str, request: pytest.FixtureRequest) -> None:
    tokenizer = request.getfixturevalue(name)
    text = build_prompt(tokenizer, "Add.", "2 + 3", system="Be brief.", examples=EXAMPLES, template=TEMPLATE)
    # No chat template around it, no BOS (SmolLM2 adds none); eos_token is the tokenizer's.
    assert text == "Be brief.\nAdd.=2<|im_end|>\nName a colour.=red<|im_end|>\nAdd. 2 + 3 ="


def test_template_prompt_starts_with_bos_when_the_tokenizer_adds_one(bos_tokenizer: Any) -> None:
    text = build_prompt(
        bos_tokenizer, "Add.", "2 + 3", system="Be brief.", examples=EXAMPLES, template=TEMPLATE
    )
    assert text == "<s>Be brief.\nAdd.=2</s>\nName a colour.=red</s>\nAdd. 2 + 3 ="


def test_template_errors_reach_build_prompt(chat_tokenizer: Any) -> None:
    with pytest.raises(PromptError, match="'question' is undefined"):
        build_prompt(chat_tokenizer, "Add.", template=Template("{{ question }}", "test.jinja"))


def test_fewshot_files_are_not_benchmarks(tmp_path: Path) -> None:
    from pytest_llmeval.prompts import is_fewshot_file

    (tmp_path / "dates.jsonl").write_text("", encoding="utf-8")
    assert is_fewshot_file(tmp_path / "dates.fewshot.jsonl")
    assert not is_fewshot_file(tmp_path / "dates.jsonl")
    (tmp_path / "pool.jsonl").write_text("", encoding="utf-8")
    assert not is_fewshot_file(tmp_path / "pool.jsonl")
    (tmp_path / "dates.llmeval.toml").write_text('[prompt]\nfewshot_file = "pool.jsonl"\n', encoding="utf-8")
    assert is_fewshot_file(tmp_path / "pool.jsonl")
    assert not is_fewshot_file(tmp_path / "dates.jsonl")
    (tmp_path / "other.llmeval.toml").write_text("not toml [", encoding="utf-8")  # its own file's error
    assert is_fewshot_file(tmp_path / "pool.jsonl")
