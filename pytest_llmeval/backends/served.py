"""Columns served at --llmeval-endpoint: each column (and the judge) is a model id behind OpenAI-compatible
servers, reached through endpoint.py's client; no weights here. Generation only (base.Backend): the servers
return no log-likelihood of given text, so multiple-choice and perplexity rows are skipped
(backends.PRODUCTION).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Source, capabilities
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
    from pytest_llmeval.endpoint import Endpoint, ServedModel
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
        seed = served_seed(self.backend.served_models()[model_id])
        limit = max_new_tokens or self.max_new_tokens
        answers = self.backend.endpoint().complete(
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
            f"{self.name}: perplexity needs the model's log-likelihoods, which an OpenAI-compatible endpoint "
            "does not return; measure it on the model's folder"
        )


class ServedBackend:
    """Every column a model id at --llmeval-endpoint (base.Backend)."""

    source: Source = "served"
    kind = "endpoint"  # results.json's `backend`
    capabilities = capabilities("served")
    metered = True
    shapes_output = True

    def __init__(self, options: RunOptions, roster: Roster, columns: Sequence[str]) -> None:
        self.options = options
        self.roster = roster
        self.columns = list(columns)
        self._endpoint: Endpoint | None = None
        self._served: dict[str, ServedModel] | None = None  # served model id -> what the probe found
        self._served_error: str | None = None  # the probe failed: every row that needs the endpoint fails
        self._served_at: str | None = None  # when the probe ran (UTC, ISO 8601): the models' date

    def model_id(self, column: str) -> str:
        """The model id a column's requests name: --base-model for the base, else the column's source."""
        if column == BASE:
            return str(self.options.spec.base_model)
        return self.roster.member(column).source

    def model_ids(self) -> list[str]:
        """Every model id the run sends requests to, each once: the columns', then the judge's."""
        ids = [self.model_id(c) for c in self.columns]
        if self.options.judge_model is not None:
            ids.append(self.options.judge_model)
        return list(dict.fromkeys(ids))

    def endpoint(self) -> Endpoint:
        """The endpoint.Endpoint of --llmeval-endpoint, built once."""
        if self._endpoint is None:
            from pytest_llmeval.endpoint import Endpoint

            assert self.options.endpoint is not None
            self._endpoint = Endpoint(self.options.endpoint)
        return self._endpoint

    def served_models(self) -> dict[str, ServedModel]:
        """What the servers say of each model id (one tiny request each, once per process): an unreachable
        URL or an unknown id raises EndpointError, and is remembered for every later row."""
        from pytest_llmeval.endpoint import EndpointError

        if self._served_error is not None:
            raise EndpointError(self._served_error)
        if self._served is None:
            import datetime

            try:
                self._served = self.endpoint().probe(self.model_ids())
            except EndpointError as exc:
                self._served_error = str(exc)
                raise
            self._served_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return self._served

    def _probed(self) -> dict[str, ServedModel]:
        from pytest_llmeval.endpoint import EndpointError

        try:
            return self.served_models()
        except EndpointError as exc:
            raise BackendError(str(exc)) from None

    def quantization(self, served: ServedModel) -> str | None:
        return served.quantization or self.options.quantization

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
        after its retries is that request's error."""
        from pytest_llmeval.endpoint import Request

        model_id = self.model_id(column)
        seed = served_seed(self._probed()[model_id])
        answers = self.endpoint().complete(
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
                )
                for r in requests
            ]
        )
        return [
            Result(
                value=a.text,
                error=None if a.text is not None else f"{column} ({model_id}) at the endpoint: {a.error}",
                tokens=(a.prompt_tokens, a.completion_tokens),
            )
            for a in answers
        ]

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        raise BackendError("an OpenAI-compatible endpoint returns no log-likelihood of given text")

    loglikelihood_rolling = loglikelihood

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        """The judge is served too: --llmeval-judge-model's id, else the base's."""
        from pytest_llmeval.measures import judge_runs_served

        model_id = self.options.judge_model or self.model_id(BASE)
        name = f"{model_id} (served)" if self.options.judge_model else f"{model_id} (the base model, served)"
        return judge_runs_served(self.endpoint().complete, model_id, name, cases, outputs)

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        raise BackendError(
            "an OpenAI-compatible endpoint returns no log-likelihood: name --llmeval-ppl-model"
        )

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        """A served model's identity in the generation cache: its id, what the server reports of it (model,
        system_fingerprint, quantization), the seed sent, and this client's code. No URL: the same model
        spread over several machines, or moved, is the same model."""
        from pytest_llmeval.cache import SERVED_CODE_MODULES, ModelIdentity, code_fingerprint, sha256_json

        served = self._probed()[self.model_id(column)]
        return ModelIdentity(
            base=sha256_json(
                {
                    "served_model": served.id,
                    "reported_model": served.reported_model,
                    "system_fingerprint": served.system_fingerprint,
                    "quantization": self.quantization(served),
                    "seed": served_seed(served),
                }
            ),
            adapter=None,
            tokenizer="as served",
            dtype="as served",
            device="endpoint",
            software={"code": code_fingerprint(SERVED_CODE_MODULES)},
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
        return self._served is not None

    def served_meta(self, column: str) -> dict[str, Any] | None:
        """A served column as results.json records it: the URLs without credentials, the id requested,
        what the server reported (model, system_fingerprint, quantization), when, and the settings sent.
        None before this process probed the endpoint. The API key is in none of it."""
        if self._served is None:
            return None
        served = self._served[self.model_id(column)]
        return {
            "urls": self.endpoint().public_urls(),
            "model": served.id,
            "reported_model": served.reported_model,
            "system_fingerprint": served.system_fingerprint,
            "quantization": self.quantization(served),
            "date": self._served_at,
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
        urls = ", ".join(self.endpoint().public_urls())
        meta["base_model"] = self.model_id(BASE)
        meta["adapter"] = adapters[0].source if adapters else None
        meta["adapter_name"] = adapters[0].name if adapters else None
        meta["adapter_version"] = None
        meta["quantization"] = self.options.quantization
        if self._served is not None:
            meta["quantization"] = self.quantization(self._served[self.model_id(BASE)])
        meta["hardware"] = {
            "device": "endpoint",
            "device_name": f"served at {urls}",
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
        inference = meta["inference_config"]
        inference["device"] = "endpoint"
        inference["dtype"] = "as served"
        inference["endpoint"] = {
            "urls": self.endpoint().public_urls(),
            "concurrency": settings.concurrency,
            "timeout_s": settings.timeout_s,
            "deadline_s": settings.deadline_s,
            "max_retries": settings.max_retries,
            "requests": dict(self.endpoint().stats),
            "models": {c: self.served_meta(c) for c in self.columns},
        }
        inference["prompt_template"] = (
            "the server's: each row is sent as chat messages (its system prompt and few-shot turns, if any, "
            "then the user message); under a prompt template, its rendered text goes to /v1/completions"
        )
        return meta

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        return memory
