"""What the model measures instead of, or besides, generating: perplexity of texts, the log-likelihood of
multiple-choice answers, the judge's sampled grades, the fluency of generated texts.

Each function takes a loaded model and a chunk's cases or texts, runs them in shared batches, and returns
JSON-able measurements (one per row, base and adapter) for the scorers. evaluator.py decides which rows and
keeps the results. torch is imported inside the functions it calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmeval.benchmark import Case
from pytest_llmeval.models import LoadedModel
from pytest_llmeval.records import BASE, FluencyRecord, variant_of

if TYPE_CHECKING:
    from pytest_llmeval.endpoint import Answer, Request

Columns = dict[str, list[dict[str, Any]]]  # column (records.BASE, an adapter's) -> one measurement per row


def _by_column(loaded: LoadedModel, columns: Sequence[str], measure: Any) -> Columns:
    """`measure()` once per column: the base with every adapter off, then each adapter on in turn (a model
    loaded without adapters is one column whatever its name)."""
    out: Columns = {}
    for column in columns:
        with loaded.active(None if column == BASE or variant_of(column) else column):
            out[column] = list(measure())
    return out


def text_perplexities(
    loaded: LoadedModel,
    texts: Sequence[str],
    max_length: int | None,
    stride: int | None,
    *,
    columns: Sequence[str],
) -> Columns:
    """Per text: perplexity, NLL, tokens, characters, bytes and the per-script shares (fast tokenizers)."""
    from pytest_llmeval.perplexity import perplexity

    def measure() -> list[dict[str, Any]]:
        result = perplexity(
            loaded.model,
            loaded.tokenizer,
            texts,
            max_length=max_length,
            stride=stride,
            by_script=bool(getattr(loaded.tokenizer, "is_fast", False)),
        )
        return [
            {
                "perplexity": t.perplexity,
                "cross_entropy": t.nll / t.n_tokens,
                "nll": t.nll,
                "n_tokens": t.n_tokens,
                "n_chars": t.n_chars,
                "n_bytes": t.n_bytes,
                "bits_per_character": t.bits_per_character,
                "bits_per_byte": t.bits_per_byte,
                "scripts": None if t.scripts is None else {k: v.to_json() for k, v in t.scripts.items()},
                "max_length": result.max_length,
                "stride": result.stride,
                "first_token": result.first_token,
            }
            for t in result.texts
        ]

    return _by_column(loaded, columns, measure)


# lm-eval's model window when neither the config nor the tokenizer names one (HFLM._DEFAULT_MAX_LENGTH).
ROLLING_DEFAULT_LENGTH = 2048


def rolling_perplexities(loaded: LoadedModel, texts: Sequence[str], *, columns: Sequence[str]) -> Columns:
    """Per text, as lm-eval's loglikelihood_rolling scores it (continuations.rolling_windows): every token
    once, the first after the model's BOS (else EOS) token, in disjoint windows of the model's whole context;
    the keys text_perplexities gives, so that the corpus figures read both alike."""
    import math

    from pytest_llmeval.continuations import continuation_nll, rolling_windows
    from pytest_llmeval.generation import context_length

    tok = loaded.tokenizer
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if prefix is None:
        raise ValueError("rolling windows need a BOS or EOS token to score a text's first token after")
    length = context_length(loaded.config, tok) or ROLLING_DEFAULT_LENGTH
    windows: list[list[tuple[list[int], list[int]]]] = []
    for index, text in enumerate(texts):
        found = rolling_windows(tok(text, add_special_tokens=False)["input_ids"], int(prefix), length)
        if not found:
            raise ValueError(f"text {index} is empty: it has no token to score")
        windows.append(found)
    pairs = [pair for own in windows for pair in own]
    shown = tok.convert_ids_to_tokens(int(prefix))

    def measure() -> list[dict[str, Any]]:
        nll = continuation_nll(loaded.model, tok, pairs)
        out = []
        start = 0
        for text, own in zip(texts, windows, strict=True):
            total = sum(nll[start : start + len(own)])  # in window order, as lm-eval adds them
            start += len(own)
            tokens = sum(len(cont) for _, cont in own)
            size = len(text.encode("utf-8"))
            out.append(
                {
                    "perplexity": math.exp(total / tokens),
                    "cross_entropy": total / tokens,
                    "nll": total,
                    "n_tokens": tokens,
                    "n_chars": len(text),
                    "n_bytes": size,
                    "bits_per_character": total / math.log(2) / len(text),
                    "bits_per_byte": total / math.log(2) / size,
                    "scripts": None,
                    "max_length": length,
                    "stride": length,
                    "first_token": f"scored after {shown} (lm-eval's rolling windows)",
                }
            )
        return out

    return _by_column(loaded, columns, measure)


def choice_likelihoods(
    loaded: LoadedModel,
    cases: Sequence[Case],
    *,
    columns: Sequence[str],
    prompts: Sequence[str] | None = None,
) -> Columns:
    """Per multiple-choice row: every choice's NLL after the row's prompt, all choices in shared batches.

    `prompts`: each row's prompt when it is not the one build_prompt makes (cut to fit the context)."""
    from pytest_llmeval.continuations import continuation_scores, encode_pair
    from pytest_llmeval.generation import build_prompt, raw_prompt
    from pytest_llmeval.planning import completion_mode
    from pytest_llmeval.scorers import SCORERS

    tok = loaded.tokenizer
    pairs: list[tuple[list[int], list[int]]] = []
    starts: list[int] = []  # each row's first pair
    options: list[list[str]] = []  # each row's options: its scorer's (a choice each, or a continuation)
    for index, case in enumerate(cases):
        config = case.evaluation_config
        spec = SCORERS[case.evaluation_type]
        assert spec.options is not None and spec.pair is not None, case.evaluation_type
        starts.append(len(pairs))
        options.append(spec.options(case.expected_output, config))
        if completion_mode(case):
            # lm-eval's pairs: the raw context, then delimiter + choice (or, a choice in the context, the
            # row's continuation), split where the context's own tokens end (encode_pair), so that a
            # converted task scores as lm-eval scores it.
            prompt = raw_prompt(tok, case.input) if prompts is None else prompts[index]
            for option in options[-1]:
                pairs.append(encode_pair(tok, *spec.pair(config, prompt, option)))
            continue
        # The prompt as generation sees it; an option is what the assistant would answer.
        prompt = build_prompt(tok, case.instruction, case.input) if prompts is None else prompts[index]
        context: list[int] = tok(prompt, add_special_tokens=False)["input_ids"]
        for option in options[-1]:
            pairs.append((context, tok(option, add_special_tokens=False)["input_ids"]))

    def measure() -> list[dict[str, Any]]:
        scored = continuation_scores(loaded.model, tok, pairs)
        out = []
        for case, start, own in zip(cases, starts, options, strict=True):
            choices = [
                {
                    "text": text,
                    "nll": scored[start + i][0],
                    "n_tokens": len(pairs[start + i][1]),
                    "n_chars": len(text),
                    "greedy": scored[start + i][1],
                }
                for i, text in enumerate(own)
            ]
            expected = SCORERS[case.evaluation_type].expected_option
            out.append(
                {"choices": choices}
                | (
                    {}
                    if expected is None
                    else {"expected_index": expected(case.expected_output, case.evaluation_config)}
                )
            )
        return out

    return _by_column(loaded, columns, measure)


# (row, its config, the output graded) -> (the judge's prompt, how its input was cut or None); ValueError:
# the request cannot be fitted to the judge.
JudgeFit = Callable[[Case, Mapping[str, Any], str], tuple[str, dict[str, Any] | None]]
# (prompts, limits, temperature, seeds) -> (texts, notes): a prompt without a text has why in its note; one
# with a text may have a note of what was done to it (a served answer cut to its max_tokens).
JudgeProduce = Callable[[list[str], list[int], float, list[int]], tuple[list[str | None], list[str | None]]]
JudgeRuns = tuple[list[dict[str, dict[str, Any]] | None], dict[int, str]]


def judge_runs(
    judge: LoadedModel,
    name: str,
    cases: Sequence[Case],
    outputs: Sequence[Mapping[str, str]],
    *,
    batch_size: int,
    context_overflow: str = "error",
) -> JudgeRuns:
    """Per llm_judge row, for each column's output (column -> text): the judge's `runs` sampled grades.

    Run r of a row uses seed `seed + r`, each prompt its own generator (generation.Sampling), and every
    request of the chunk is generated in shared batches, grouped by temperature. A request longer than the
    judge's context is fitted by `context_overflow` (generation.fit_text: the row's input is what is cut);
    a row whose request cannot be fitted gets None and its error in the second value, by row index.
    """
    from pytest_llmeval.generation import Sampling, build_prompt, context_length, fit_text, generate
    from pytest_llmeval.scorers import llm_judge

    context = context_length(judge.config, judge.tokenizer) or 2**62

    def fit(case: Case, config: Mapping[str, Any], text: str) -> tuple[str, dict[str, Any] | None]:
        def render(given: str) -> str:
            request = llm_judge.judge_request(
                config["rubric"], case.instruction, given, case.expected_output, text, config
            )
            return build_prompt(judge.tokenizer, request)

        return fit_text(
            judge.tokenizer,
            render,
            case.input,
            max_new_tokens=int(llm_judge.option(config, "judge_max_new_tokens")),
            context=context,
            policy=context_overflow,
            reserved="judge_max_new_tokens",
        )

    def produce(
        prompts: list[str], limits: list[int], temperature: float, seeds: list[int]
    ) -> tuple[list[str | None], list[str | None]]:
        with judge.adapter_enabled(False):
            texts = generate(
                judge.model,
                judge.tokenizer,
                prompts,
                max_new_tokens=limits,
                batch_size=batch_size,
                sampling=Sampling(temperature=temperature, seeds=seeds),
            )
        return list(texts), [None] * len(texts)

    return _judge_runs(name, cases, outputs, fit, produce)


def judge_runs_served(
    complete: Callable[[Sequence[Request]], list[Answer]],
    model: str,
    name: str,
    cases: Sequence[Case],
    outputs: Sequence[Mapping[str, str]],
) -> JudgeRuns:
    """judge_runs with a judge behind an OpenAI-compatible endpoint (`complete`: endpoint.Endpoint's): each
    request is the judge's user message, sampled at the row's temperature with seed `seed + r` (where the
    server honours seeds). The server fits nothing: a request too long for it is that row's error."""
    from pytest_llmeval.endpoint import Request
    from pytest_llmeval.scorers import llm_judge

    def fit(case: Case, config: Mapping[str, Any], text: str) -> tuple[str, dict[str, Any] | None]:
        request = llm_judge.judge_request(
            config["rubric"], case.instruction, case.input, case.expected_output, text, config
        )
        return request, None

    def produce(
        prompts: list[str], limits: list[int], temperature: float, seeds: list[int]
    ) -> tuple[list[str | None], list[str | None]]:
        answers = complete(
            [
                Request(model=model, prompt=p, max_tokens=n, temperature=temperature, seed=seed)
                for p, n, seed in zip(prompts, limits, seeds, strict=True)
            ]
        )
        # Stripped as generation.generate strips its outputs.
        texts = [None if a.text is None else a.text.strip() for a in answers]
        return texts, [a.error if a.text is None else a.note for a in answers]

    return _judge_runs(name, cases, outputs, fit, produce)


def _judge_runs(
    name: str,
    cases: Sequence[Case],
    outputs: Sequence[Mapping[str, str]],
    fit: JudgeFit,
    produce: JudgeProduce,
) -> JudgeRuns:
    """The judge's runs of every row and column: requests fitted by `fit`, made by `produce` in groups of
    one temperature; a row whose request cannot be fitted or made gets None and its error."""
    from pytest_llmeval.scorers import llm_judge

    errors: dict[int, str] = {}
    truncated: dict[tuple[int, str], dict[str, Any]] = {}
    requests: list[tuple[int, str, int]] = []  # (row, side, run)
    prompts: list[str] = []
    seeds: list[int] = []
    limits: list[int] = []
    for index, (case, sides) in enumerate(zip(cases, outputs, strict=True)):
        config = case.evaluation_config
        for side, text in sides.items():
            try:
                prompt, cut = fit(case, config, text)
            except ValueError as exc:
                errors[index] = f"the judge's request for the {side} output: {exc}"
                continue
            if cut is not None:
                truncated[(index, side)] = cut
            for run in range(int(llm_judge.option(config, "runs"))):
                requests.append((index, side, run))
                prompts.append(prompt)
                seeds.append(int(llm_judge.option(config, "seed")) + run)
                limits.append(int(llm_judge.option(config, "judge_max_new_tokens")))
    by_temperature: dict[float, list[int]] = {}
    for i, (index, _, _) in enumerate(requests):
        temperature = float(llm_judge.option(cases[index].evaluation_config, "temperature"))
        by_temperature.setdefault(temperature, []).append(i)
    texts: list[str | None] = [None] * len(requests)
    notes: list[str | None] = [None] * len(requests)
    for temperature, members in by_temperature.items():
        made, said = produce(
            [prompts[i] for i in members],
            [limits[i] for i in members],
            temperature,
            [seeds[i] for i in members],
        )
        for i, answer, note in zip(members, made, said, strict=True):
            texts[i], notes[i] = answer, note
            index, side, _ = requests[i]
            if answer is None and index not in errors:
                errors[index] = f"the judge's request for the {side} output failed: {note}"
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for (index, side, run), seed, output, note in zip(requests, seeds, texts, notes, strict=True):
        made_run: dict[str, Any] = {"run": run, "seed": seed, "output": output}
        if output is not None and note is not None:
            made_run["note"] = note
        runs.setdefault((index, side), []).append(made_run)

    def graded(i: int, side: str) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": name, "runs": runs[(i, side)]}
        if (i, side) in truncated:
            out["prompt_truncated"] = truncated[(i, side)]
        return out

    return [
        None if i in errors else {side: graded(i, side) for side in outputs[i] if (i, side) in runs}
        for i in range(len(cases))
    ], errors


def fluency(
    scorer: LoadedModel,
    references: Sequence[str],
    outputs: Sequence[str | None],
    *,
    column: str | None,
    scorer_name: str,
    external: bool = False,
    max_length: int | None = None,
    stride: int | None = None,
    batch_size: int | None = None,
) -> list[FluencyRecord]:
    """Per row: NLL, tokens and characters of the output and of the reference under `scorer`, and the
    chest X-ray document's per-study figures from them (summaries.study_figures).

    `column`: the scorer's adapter to turn on (an adapter measuring its own outputs), None for none.
    `external`: the scorer is --llmeval-ppl-model, not the model that wrote the outputs. max_length,
    stride, batch_size: perplexity.perplexity's window and windows per forward pass (None: its defaults).
    ValueError: the window does not fit the scorer (perplexity.perplexity's message).
    """
    from pytest_llmeval.perplexity import perplexity
    from pytest_llmeval.summaries import study_figures

    # One call for every text of the chunk: they share forward passes. Empty texts have no token to score.
    texts = sorted({t for t in [*references, *outputs] if t and t.strip()})
    measured: dict[str, dict[str, Any]] = {}
    if texts:
        with scorer.active(column):
            result = perplexity(
                scorer.model,
                scorer.tokenizer,
                texts,
                max_length=max_length,
                stride=stride,
                batch_size=batch_size,
            )
        for t in result.texts:
            measured[texts[t.index]] = {"nll": t.nll, "n_tokens": t.n_tokens, "n_chars": t.n_chars}
    records: list[FluencyRecord] = []
    for ref, out in zip(references, outputs, strict=True):
        output, reference = measured.get(out or ""), measured.get(ref)
        figures = study_figures(output, reference)
        records.append(
            {
                "scorer": scorer_name,
                "external": external,
                "output": output,
                "reference": reference,
                "perplexity_generated": figures["perplexity_generated"],
                "perplexity_reference": figures["perplexity_reference"],
                "perplexity_ratio": figures["perplexity_ratio"],
                "cross_entropy_generated": figures["cross_entropy_generated"],
                "cross_entropy_reference": figures["cross_entropy_reference"],
                "cross_entropy_difference": figures["cross_entropy_difference"],
            }
        )
    return records
