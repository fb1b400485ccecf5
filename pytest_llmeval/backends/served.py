"""Columns served by OpenAI-compatible servers: each column (and the judge) is a model id at
--llmeval-endpoint, or at its own URL (`--llmeval-model=NAME=ID@URL`, beside columns evaluated in this
process: backends/mixed.py), reached through endpoint.py's client; no weights here.

Generated rows go to /v1/chat/completions (or /v1/completions for a raw prompt). Log-likelihood rows read the
server's log-probabilities of given text (logprobs.py): a perplexity row's text echoed through
/v1/completions, a multiple-choice row's options each continued as the assistant's answer under the server's
own chat template (vLLM's continue_final_message with prompt_logprobs), or after the raw prompt through
/v1/completions for a completion-style row. They run only on a server whose log-probabilities passed the
probe's check (endpoint.Endpoint.probe); elsewhere they are skipped with the probe's finding, which names the
server's defect.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Capability, Source, capabilities, production, unavailable
from pytest_llmeval.backends.base import (
    BackendError,
    Columns,
    GenRequest,
    JudgeRuns,
    MeasureRequest,
    Prompted,
    Result,
    RowPrompt,
)
from pytest_llmeval.planning import completion_mode
from pytest_llmeval.records import BASE, FluencyRecord
from pytest_llmeval.roster import Roster

if TYPE_CHECKING:
    from pytest_llmeval.benchmark import Case
    from pytest_llmeval.cache import FileIndex, ModelIdentity
    from pytest_llmeval.costs import Price
    from pytest_llmeval.endpoint import Endpoint, EndpointSettings, ServedModel
    from pytest_llmeval.logprobs import Echoed
    from pytest_llmeval.run_options import RunOptions


def served_seed(served: ServedModel) -> int | None:
    """The seed every request to a served model carries: 0 where the server accepts one (its greedy
    answers do not depend on it, but a server that samples anyway is then repeatable), else none."""
    return 0 if served.accepts_seed else None


class ServedLLM:
    """The `llm` fixtures' handle on a column served at --llmeval-endpoint: `generate` as LLM's (greedy,
    the row's prompt as the user message; chat=False sends it raw to /v1/completions), no perplexity."""

    def __init__(self, backend: ServedBackend, column: str) -> None:
        self.backend = backend
        self.column = column
        self.adapter = column != BASE
        self.max_new_tokens = backend.options.max_new_tokens

    @property
    def name(self) -> str:
        return f"{self.backend.model_id(self.column)} (served)"

    def __repr__(self) -> str:
        return f"<LLM {self.name}>"

    def generate(
        self, prompts: Sequence[str], *, max_new_tokens: int | None = None, chat: bool = True
    ) -> list[str]:
        """Greedy completions from the server; a request that fails after its retries raises BackendError."""
        from pytest_llmeval.endpoint import Request

        model_id = self.backend.model_id(self.column)
        seed = served_seed(self.backend.served_model(self.column))
        limit = max_new_tokens or self.max_new_tokens
        answers = self.backend.endpoint(self.column).complete(
            [Request(model=model_id, prompt=p, max_tokens=limit, chat=chat, seed=seed) for p in prompts]
        )
        failed = [a.error for a in answers if a.text is None]
        if failed:
            raise BackendError(
                f"{model_id} at the endpoint: {len(failed)} of {len(answers)} failed: {failed[0]}"
            )
        return [str(a.text).strip() for a in answers]  # stripped as generation.generate strips

    def perplexity(self, *args: Any, **kwargs: Any) -> Any:
        raise BackendError(
            f"{self.name}: the llm fixture measures perplexity in process only; a benchmark file's "
            "perplexity rows run over a server whose log-probabilities pass the probe, or in process"
        )


@dataclass
class _Place:
    """The columns served at one set of URLs, and what the probe found there (once per process)."""

    settings: EndpointSettings
    columns: list[str]
    endpoint: Endpoint | None = None
    models: dict[str, ServedModel] | None = None  # served model id -> what the probe found
    error: str | None = None  # the probe failed: every row that needs these servers fails
    at: str | None = None  # when the probe ran (UTC, ISO 8601): the models' date


class ServedBackend:
    """Every column a model id at an OpenAI-compatible URL (base.Backend)."""

    source: Source = "served"
    kind = "endpoint"  # results.json's `backend`
    capabilities = capabilities("served")
    metered = True
    shapes_output = True

    def __init__(
        self,
        options: RunOptions,
        roster: Roster,
        columns: Sequence[str],
        urls: Mapping[str, EndpointSettings] | None = None,
    ) -> None:
        """`urls`: each column's servers (columns served beside local ones); default --llmeval-endpoint's."""
        self.options = options
        self.roster = roster
        self.columns = list(columns)
        places: dict[EndpointSettings, _Place] = {}
        for column in self.columns:
            settings = urls[column] if urls is not None else options.endpoint
            assert settings is not None
            places.setdefault(settings, _Place(settings, [])).columns.append(column)
        self._places = list(places.values())
        # The judge is served too in a run at --llmeval-endpoint (its own id, else the base's).
        self._judged = options.endpoint is not None

    def first_settings(self) -> EndpointSettings:
        """The client settings of the first servers (every place shares the options' knobs)."""
        return self._places[0].settings

    def _place(self, column: str) -> _Place:
        return next(p for p in self._places if column in p.columns)

    def model_id(self, column: str) -> str:
        """The model id a column's requests name: --base-model for the base, else the column's source."""
        if column == BASE:
            return str(self.options.spec.base_model)
        return self.roster.member(column).source

    def model_ids(self) -> list[str]:
        """Every model id the run sends requests to, each once: the columns', then the judge's."""
        ids = [self.model_id(c) for c in self.columns]
        if self._judged and self.options.judge_model is not None:
            ids.append(self.options.judge_model)
        return list(dict.fromkeys(ids))

    def endpoint(self, column: str = BASE) -> Endpoint:
        """The endpoint.Endpoint serving a column (default: the base's, --llmeval-endpoint), built once."""
        place = self._place(column) if column in self.columns else self._places[0]
        if place.endpoint is None:
            from pytest_llmeval.endpoint import Endpoint

            place.endpoint = Endpoint(place.settings)
        return place.endpoint

    def probe(self) -> None:
        """Every URL probed (endpoint.Endpoint.probe): an unreachable URL, an id a server does not serve,
        raises EndpointError, and is remembered for every later row."""
        for place in self._places:
            self._probe(place)

    def _probe(self, place: _Place) -> dict[str, ServedModel]:
        from pytest_llmeval.endpoint import EndpointError

        if place.error is not None:
            raise EndpointError(place.error)
        if place.models is None:
            import datetime

            scored = [self.model_id(c) for c in place.columns]
            ids = list(scored)
            if self._judged and self.options.judge_model is not None and BASE in place.columns:
                ids.append(self.options.judge_model)
            try:
                place.models = self.endpoint(place.columns[0]).probe(ids, scored=scored)
            except EndpointError as exc:
                place.error = str(exc)
                raise
            place.at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return place.models

    def served_model(self, column: str) -> ServedModel:
        """What the probe found of a column's model (EndpointError: the probe failed)."""
        return self._probe(self._place(column))[self.model_id(column)]

    def _probed(self, column: str) -> ServedModel:
        from pytest_llmeval.endpoint import EndpointError

        try:
            return self.served_model(column)
        except EndpointError as exc:
            raise BackendError(str(exc)) from None

    def quantization(self, served: ServedModel) -> str | None:
        return served.quantization or self.options.quantization

    # --- what it can produce -----------------------------------------------------------------------------

    def production(self, measure: str | None) -> Capability | None:
        """How a row whose scorer measures `measure` is produced here (backends.production)."""
        return production(self.source, measure)

    def unavailable(self, measure: str | None, kind: str) -> str | None:
        """Why rows of evaluation type `kind` are skipped here; None: they run. Log-likelihood rows run
        only where every column's server passed the probe's check of its prompt log-probabilities."""
        static = unavailable(self.source, measure, kind)
        if static is not None or measure not in ("choices", "continuation", "perplexity"):
            return static
        from pytest_llmeval.endpoint import EndpointError

        for column in self.columns:
            try:
                served = self.served_model(column)
            except EndpointError as exc:
                return str(exc)
            reason = served.loglikelihood_error
            if reason is None and measure in ("choices", "continuation") and not served.prompt_logprobs:
                reason = (
                    f"{served.server or 'the server'} does not return vLLM's prompt_logprobs, which scoring "
                    "an option under the server's own chat template needs"
                )
            if reason is not None:
                return f"{kind} rows need the log-likelihoods of {column} ({self.model_id(column)}): {reason}"
        return None

    # --- the protocol ------------------------------------------------------------------------------------

    def groups(self, columns: Sequence[str], same_prompt: Callable[[str, str], bool]) -> list[list[str]]:
        """One group per column: each is prompted for its own server-side template."""
        return [[c] for c in columns]

    def prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        """A completion-style row's input and a row under a template of the run's (rendered whole) go raw to
        /v1/completions; the others are a chat request, the server applying its template: the user message
        alone, or with a system prompt and few-shot turns, the whole conversation (chat_messages)."""
        from pytest_llmeval.generation import chat_messages, user_message
        from pytest_llmeval.prompts import PromptError, render_template

        out: dict[str, Prompted | str] = {}
        for row in rows:
            case, spec = row.case, row.spec
            try:
                if completion_mode(case):
                    out[row.node] = Prompted(
                        prompt=case.input, shown=case.input, chat=False, key={"chat": False}
                    )
                elif spec.template is not None:
                    text = render_template(
                        spec.template,
                        system=spec.system,
                        instruction=case.instruction,
                        input=case.input,
                        examples=list(row.examples),
                        eos_token=None,
                    )
                    out[row.node] = Prompted(prompt=text, shown=text, chat=False, key={"chat": False})
                elif spec.system is None and not row.examples:
                    text = user_message(case.instruction, case.input)
                    out[row.node] = Prompted(prompt=text, shown=text)
                else:
                    messages = chat_messages(
                        case.instruction, case.input, system=spec.system, examples=list(row.examples)
                    )
                    out[row.node] = Prompted(
                        prompt=str(messages[-1]["content"]),
                        shown=json.dumps(messages),
                        messages=tuple(messages),
                        key={"messages": messages},  # a system prompt, few-shot turns
                    )
            except PromptError as exc:
                out[row.node] = f"{row.where}: {exc}"
        return out

    def generate(self, column: str, requests: Sequence[GenRequest]) -> list[Result]:
        """The column's requests in flight together (--llmeval-concurrency); a request that still fails
        after its retries is that request's error. A request's stop strings go to the server (`stop`)."""
        from pytest_llmeval.endpoint import Request
        from pytest_llmeval.generation import cut_at_stops

        model_id = self.model_id(column)
        seed = served_seed(self._probed(column))
        answers = self.endpoint(column).complete(
            [
                Request(
                    model=model_id,
                    prompt=r.prompted.prompt,
                    max_tokens=r.limit,
                    chat=r.prompted.chat,
                    messages=r.prompted.messages,
                    temperature=0.0 if r.sampled is None else r.sampled[0],
                    # Each sample its own seed where the server takes one: a rerun draws the same samples.
                    seed=r.sampled[1] if r.sampled is not None and seed is not None else seed,
                    stop=r.stop,
                )
                for r in requests
            ]
        )
        return [
            Result(
                # Cut again here as generation cuts a local output (cut_at_stops, in the stops' order): a
                # server may end at a stop string and keep it, or end at another one than lm-eval would cut.
                value=a.text if a.text is None or r.stop is None else cut_at_stops(a.text, r.stop),
                error=None if a.text is not None else f"{column} ({model_id}) at the endpoint: {a.error}",
                tokens=(a.prompt_tokens, a.completion_tokens),
                note=None if a.note is None else f"{column} ({model_id}) at the endpoint: {a.note}",
            )
            for r, a in zip(requests, answers, strict=True)
        ]

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """Each option's NLL after its row's prompt, read off the server's own tokens: a chat row's option
        continued as the assistant's answer under the server's template (prompt_logprobs), a raw prompt's
        option echoed after it through /v1/completions. One request per option, all in flight together."""
        from pytest_llmeval.endpoint import Request
        from pytest_llmeval.scorers import SCORERS

        column = columns[0]
        model_id = self.model_id(column)
        self._usable(column)
        asked: list[tuple[int, str, str, Request]] = []  # (request index, option, text scored, its request)
        for i, r in enumerate(requests):
            prompted = r.prompted
            assert prompted is not None
            config = r.row.case.evaluation_config
            spec = SCORERS[r.row.case.evaluation_type]
            assert spec.options is not None and spec.pair is not None
            for option in spec.options(r.row.case.expected_output, config):
                context, scored = (
                    (prompted.prompt, option) if prompted.chat else spec.pair(config, prompted.prompt, option)
                )
                if prompted.chat:
                    user = ({"role": "user", "content": prompted.prompt},)
                    messages = (*(prompted.messages or user), {"role": "assistant", "content": option})
                    request = Request(
                        model=model_id,
                        prompt=prompted.prompt,
                        max_tokens=1,
                        chat=True,
                        messages=messages,
                        continue_final=True,
                        prompt_logprobs=0,
                    )
                else:
                    request = Request(
                        model=model_id,
                        prompt=context + scored,
                        max_tokens=1,
                        chat=False,
                        echo=True,
                        # The top alternative at each place tells whether the option is the greedy one.
                        logprobs=1 if spec.needs_greedy else 0,
                    )
                asked.append((i, option, scored, request))
        answers = self.endpoint(column).complete([request for _, _, _, request in asked])
        choices: list[list[dict[str, Any]]] = [[] for _ in requests]
        errors: dict[int, str] = {}
        for (i, option, scored, request), answer in zip(asked, answers, strict=True):
            if i in errors:
                continue
            try:
                nll, tokens, greedy = _option_nll(request, scored, answer)
            except ValueError as exc:
                errors[i] = f"{self._where(column)}: option {option!r}: {exc}"
                continue
            if greedy is None and SCORERS[requests[i].row.case.evaluation_type].needs_greedy:
                errors[i] = (
                    f"{self._where(column)}: option {option!r}: the server lists no top log-probabilities "
                    "for it, so whether it is the greedy continuation is unknown"
                )
                continue
            choices[i].append(
                {"text": option, "nll": nll, "n_tokens": tokens, "n_chars": len(option), "greedy": greedy}
            )
        results = [
            Result(error=errors[i])
            if i in errors
            else Result(value=_measured(choices[i], r.row.case), tokens=(None, None))
            for i, r in enumerate(requests)
        ]
        return {column: results}

    def loglikelihood_rolling(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """The perplexity of each row's text from the server's log-probabilities of it echoed through
        /v1/completions. A text longer than the row's window (max_length, stride) is scored window by window
        as in this process (perplexity._windows), each window sent as the server's own token ids."""
        from pytest_llmeval.endpoint import Request
        from pytest_llmeval.scorers import perplexity as ppl_scorer

        column = columns[0]
        model_id = self.model_id(column)
        served = self._usable(column)
        texts = [
            str(getattr(r.row.case, ppl_scorer.text_field(r.row.case.evaluation_config))) for r in requests
        ]
        whole = [
            Request(
                model=model_id,
                prompt=text,
                max_tokens=1,
                chat=False,
                echo=True,
                logprobs=0,
                prompt_logprobs=0 if served.prompt_logprobs else None,
            )
            for text in texts
        ]
        answers = self.endpoint(column).complete(whole)
        results: list[Result] = []
        for r, text, answer in zip(requests, texts, answers, strict=True):
            max_length, stride = ppl_scorer.window(r.row.case.evaluation_config)
            if ppl_scorer.rolling(r.row.case.evaluation_config):
                # The first token is scored after the model's BOS token, which an echo does not give.
                results.append(
                    Result(
                        error=f"{self._where(column)}: rolling windows (lm-eval's loglikelihood_rolling) "
                        "score a text's first token after the model's BOS token, which a server's echo does "
                        "not return: run this row on a local model"
                    )
                )
                continue
            try:
                value = self._rolling(column, text, answer, max_length, stride)
            except ValueError as exc:
                results.append(Result(error=f"{self._where(column)}: {exc}"))
                continue
            results.append(Result(value=value, tokens=(None, None)))
        return {column: results}

    def _where(self, column: str) -> str:
        """Who answered a column's requests, as a row's error names it: `served (smol) at http://host/v1`."""
        return f"{column} ({self.model_id(column)}) at {', '.join(self.endpoint(column).public_urls())}"

    def _usable(self, column: str) -> ServedModel:
        """The column's model, whose log-probabilities the probe found usable (rows were skipped otherwise:
        BackendError, should one get here)."""
        served = self._probed(column)
        if served.loglikelihood_error is not None:
            raise BackendError(served.loglikelihood_error)
        return served

    def _rolling(
        self, column: str, text: str, answer: Any, max_length: int | None, stride: int | None
    ) -> dict[str, Any]:
        """One text's perplexity measurement (the keys measures.text_perplexities gives in process)."""
        from pytest_llmeval.logprobs import EchoError, parse_echo, perplexity_of, rolling_nll
        from pytest_llmeval.perplexity import LN2

        if answer.error is not None and answer.logprobs is None:
            raise EchoError(answer.error)
        echoed = parse_echo(
            answer.logprobs, text, answer.completion_tokens, answer.prompt_logprobs, answer.prompt_tokens
        )
        if max_length is not None and len(echoed) > max_length:
            nll, scored, first = self._windows(column, echoed, max_length, stride)
        else:
            nll, scored, first = rolling_nll(echoed)
        n_bytes = len(text.encode("utf-8"))
        return {
            "perplexity": perplexity_of(nll, scored),
            "cross_entropy": nll / scored,
            "nll": nll,
            "n_tokens": scored,
            "n_chars": len(text),
            "n_bytes": n_bytes,
            "bits_per_character": nll / LN2 / len(text),
            "bits_per_byte": nll / LN2 / n_bytes,
            "scripts": None,
            "max_length": max_length if max_length is not None else len(echoed),
            "stride": stride if stride is not None else (max_length or len(echoed)),
            "first_token": "scored after the server's BOS"
            if first
            else "not scored (the server adds no BOS)",
        }

    def _windows(
        self, column: str, echoed: Echoed, max_length: int, stride: int | None
    ) -> tuple[float, int, bool]:
        """A long text scored window by window as in this process (perplexity._windows: each window scores
        the tokens after the previous one's end, given the window's earlier tokens). The first window is read
        off the whole text's echo (the same tokens before each); each later one is sent as the server's own
        token ids, which no server tokenises again."""
        from pytest_llmeval.endpoint import Request
        from pytest_llmeval.logprobs import EchoError, parse_echo, window_nll
        from pytest_llmeval.perplexity import _windows

        step = stride if stride is not None else max(1, max_length // 2)
        windows = _windows(0, len(echoed), max_length, step)
        later = [w for w in windows if w.begin > 0]
        ids = echoed.ids
        if later and (ids is None or any(i is None for i in ids[1:])):
            raise EchoError(
                f"the text has {len(echoed)} tokens, more than its max_length {max_length}, and the server "
                "returns no token ids (vLLM's prompt_logprobs) to cut it into windows of its own tokens"
            )
        model_id = self.model_id(column)
        answers = self.endpoint(column).complete(
            [
                Request(
                    model=model_id,
                    prompt=tuple(int(i) for i in (ids or ())[w.begin : w.end] if i is not None),
                    max_tokens=1,
                    chat=False,
                    echo=True,
                    logprobs=0,
                )
                for w in later
            ]
        )
        answered = dict(zip((w.begin for w in later), answers, strict=True))
        total, scored = 0.0, 0
        for window in windows:
            if window.begin == 0:
                nll, count = window_nll(echoed.head(window.end), window.first_scored)
            else:
                answer = answered[window.begin]
                if answer.logprobs is None:
                    raise EchoError(f"a window of the text got no log-probabilities: {answer.error}")
                got = parse_echo(answer.logprobs, "", answer.completion_tokens, None, answer.prompt_tokens)
                if len(got) != window.length:
                    raise EchoError(f"a window of {window.length} token ids was echoed as {len(got)} tokens")
                nll, count = window_nll(got, window.first_scored)
            total += nll
            scored += count
        # The text's first token is scored when the server put a BOS before it.
        first = echoed.starts[0] is not None and echoed.starts[0] < 0
        return total, scored, first

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        """The judge is served too: --llmeval-judge-model's id, else the base's."""
        from pytest_llmeval.measures import judge_runs_served

        model_id = self.options.judge_model or self.model_id(BASE)
        name = f"{model_id} (served)" if self.options.judge_model else f"{model_id} (the base model, served)"
        return judge_runs_served(self.endpoint(BASE).complete, model_id, name, cases, outputs)

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        raise BackendError(
            "an OpenAI-compatible endpoint returns no log-likelihood: name --llmeval-ppl-model"
        )

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        """A served model's identity in the generation cache: its id at its URLs (`ID@URL`), and everything
        the probe saw of it this run: what the server reports (model, system_fingerprint, quantization, its
        software, its /v1/models entry), its greedy answer to the probe, its greedy token and that token's
        log-probability (to a tenth of a nat: a server's last digits vary between runs), the seed sent, and
        this client's code. Weights a client never sees can only be known by what they answer: another model
        behind the same URL and name answers otherwise, and is a miss, never a stale answer."""
        from pytest_llmeval.cache import SERVED_CODE_PATHS, ModelIdentity, code_fingerprint, sha256_json

        served = self._probed(column)
        alignment = served.alignment
        greedy = None
        if alignment is not None and alignment.generated_token is not None:
            value = alignment.generated_logprob
            greedy = [alignment.generated_token, None if value is None else round(value, 1)]
        return ModelIdentity(
            base=sha256_json(
                {
                    "served_model": served.id,
                    "urls": sorted(self.endpoint(column).public_urls()),
                    "reported_model": served.reported_model,
                    "system_fingerprint": served.system_fingerprint,
                    "quantization": self.quantization(served),
                    "server": served.server,
                    "entry": served.entry,
                    "probe_answer": served.probe_answer,
                    "greedy": greedy,
                    "seed": served_seed(served),
                }
            ),
            adapter=None,
            tokenizer="as served",
            dtype="as served",
            device="endpoint",
            software={"code": code_fingerprint(SERVED_CODE_PATHS)},
            batch_invariant=True,  # each request stands alone: no batch of ours shapes its output
        )

    def price(self, column: str) -> Price | None:
        return self.options.prices.get(self.model_id(column))

    def handle(self, column: str) -> ServedLLM:
        return ServedLLM(self, column)

    # --- provenance --------------------------------------------------------------------------------------

    def base_name(self) -> str | None:
        return None

    def evaluated_names(self) -> tuple[str | None, str | None]:
        """(adapter, base) as history names this run: the first adapter's name, else the base's model id."""
        adapters = self.roster.adapters
        return (adapters[0].name, None) if adapters else (None, self.model_id(BASE))

    def describe(self, entry: dict[str, Any], column: str) -> None:
        """A served column's `models` entry: no fingerprint of weights we never see; what the server said."""
        entry["fingerprint"] = None
        entry["served"] = self.served_meta(column)

    def described(self) -> bool:
        return all(place.models is not None for place in self._places)

    def served_meta(self, column: str) -> dict[str, Any] | None:
        """A served column as results.json records it: the URLs without credentials, the id requested,
        what the server reported (model, system_fingerprint, quantization, its software), when, the settings
        sent, and the probe's findings: the ids it lists, and whether its prompt log-probabilities are
        usable (with the numbers that decided). None before this process probed it. No API key in any."""
        place = self._place(column)
        if place.models is None:
            return None
        served = place.models[self.model_id(column)]
        return {
            "urls": self.endpoint(column).public_urls(),
            "model": served.id,
            "reported_model": served.reported_model,
            "system_fingerprint": served.system_fingerprint,
            "quantization": self.quantization(served),
            "server": served.server,
            "listed": None if served.listed is None else list(served.listed),
            "loglikelihood": None if served.alignment is None else served.alignment.to_json(),
            "prompt_logprobs": served.prompt_logprobs,
            "date": place.at,
            "settings": {
                "temperature": 0.0,
                "top_p": 1.0,
                "seed": served_seed(served),
                "max_tokens": "evaluation_config.max_new_tokens, else --llmeval-max-new-tokens",
                "api": "chat.completions (each row as chat messages: system, few-shot turns, user)",
            },
        }

    def load_seconds(self) -> dict[str, float]:
        return {}

    def run_meta(self, meta: dict[str, Any], hardware: dict[str, Any] | None) -> dict[str, Any]:
        """meta() of a run at --llmeval-endpoint: the served ids as the base and adapter, the servers as
        the hardware, the client's settings as the inference config."""
        import platform
        import sys

        settings = self.options.endpoint
        assert settings is not None
        adapters = self.roster.adapters
        urls = ", ".join(self.endpoint(BASE).public_urls())
        meta["base_model"] = self.model_id(BASE)
        meta["adapter"] = adapters[0].source if adapters else None
        meta["adapter_name"] = adapters[0].name if adapters else None
        meta["adapter_version"] = None
        meta["quantization"] = self.options.quantization
        if self._places[0].models is not None:
            meta["quantization"] = self.quantization(self.served_model(BASE))
        meta["hardware"] = {
            "device": "endpoint",
            "device_name": f"served at {urls}",
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
        inference = meta["inference_config"]
        inference["device"] = "endpoint"
        inference["dtype"] = "as served"
        inference["endpoint"] = self.endpoint_meta(settings)
        inference["prompt_template"] = (
            "the server's: each row is sent as chat messages (its system prompt and few-shot turns, if any, "
            "then the user message); under a prompt template, its rendered text goes to /v1/completions"
        )
        return meta

    def endpoint_meta(self, settings: EndpointSettings) -> dict[str, Any]:
        """results.json's inference_config.endpoint: the client's settings, its requests, every column's
        served model (each with its own URLs)."""
        return {
            "urls": [url for place in self._places for url in self.endpoint(place.columns[0]).public_urls()],
            "concurrency": settings.concurrency,
            "timeout_s": settings.timeout_s,
            "deadline_s": settings.deadline_s,
            "max_retries": settings.max_retries,
            "requests": {
                key: sum(self.endpoint(place.columns[0]).stats[key] for place in self._places)
                for key in ("requests", "retries", "failures")
            },
            "models": {c: self.served_meta(c) for c in self.columns},
        }

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        return memory

    def keep(self) -> None:
        return None  # a server's answers are in the generation cache; nothing else is worked out here


def _measured(choices: list[dict[str, Any]], case: Any) -> dict[str, Any]:
    """A row's "choices" measurement: its options, and the right one's position where its scorer has one."""
    from pytest_llmeval.scorers import SCORERS

    expected = SCORERS[case.evaluation_type].expected_option
    found: dict[str, Any] = {"choices": choices}
    if expected is not None:
        found["expected_index"] = expected(case.expected_output, case.evaluation_config)
    return found


def _option_nll(request: Any, option: str, answer: Any) -> tuple[float, int, bool | None]:
    """(NLL, tokens, greedy or None where unknown) of one option from its answer (ValueError: the answer
    cannot give it)."""
    from pytest_llmeval.logprobs import (
        EchoError,
        answer_nll,
        continuation_greedy,
        continuation_nll,
        parse_echo,
        parse_prompt_logprobs,
    )

    if answer.logprobs is None and answer.prompt_logprobs is None:
        raise EchoError(answer.error or "no log-probabilities in the answer")
    if request.chat:
        return (
            *answer_nll(parse_prompt_logprobs(answer.prompt_logprobs, answer.prompt_tokens), option),
            None,
        )
    prompt = str(request.prompt)
    echoed = parse_echo(answer.logprobs, prompt, answer.completion_tokens, None, answer.prompt_tokens)
    boundary = len(prompt) - len(option)
    nll, tokens = continuation_nll(echoed, boundary)
    return nll, tokens, continuation_greedy(echoed, boundary)
