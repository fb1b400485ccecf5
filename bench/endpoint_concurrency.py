"""Rows per second over a real OpenAI-compatible server at concurrency 1 against 16, same rows, same run.

    python bench/endpoint_concurrency.py [--rows 48] [--server continuous|default|both]

Starts `transformers serve` on the embedded model (CPU, float32; tests/serving.py, as the tests do) and
sends the generated rows of the demo's benchmarks (dates and sentiment, alternating) through the plugin's
client (pytest_llmeval.endpoint, greedy, each row's max_new_tokens) four times, ABBA: concurrency 1, 16, 16,
1. Each pass asserts the answers are the same text as the first pass. Printed: rows/s per pass and the
ratio of the two means. `continuous` serves with --continuous-batching (concurrent requests share
forward passes); `default` without it (one generation at a time per model, so concurrency only hides the
network round trip).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/serving.py: the server the tests start

from serving import serve  # noqa: E402

from pytest_llmeval import models  # noqa: E402
from pytest_llmeval.endpoint import Endpoint, EndpointSettings, Request  # noqa: E402
from pytest_llmeval.generation import user_message  # noqa: E402
from pytest_llmeval.scorers import SCORERS  # noqa: E402

DEFAULT_MAX_NEW_TOKENS = 512  # the plugin's default for rows that name none


def requests_for(model: str, count: int) -> list[Request]:
    per_file = []
    for name in ("dates", "sentiment"):
        rows = [json.loads(line) for line in (REPO / "benchmarks" / f"{name}.jsonl").read_text().splitlines()]
        per_file.append([r for r in rows if SCORERS[r["evaluation_type"]].measure is None])
    mixed = [r for pair in zip(*per_file, strict=False) for r in pair][:count]
    return [
        Request(
            model=model,
            prompt=user_message(r["instruction"], r["input"]),
            max_tokens=int(r.get("evaluation_config", {}).get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)),
        )
        for r in mixed
    ]


def bench(server_args: list[str], label: str, rows: int) -> float:
    folder = models.embedded_model_dir()
    with serve(folder, extra_args=server_args) as served:
        endpoint = served.only
        requests = requests_for(endpoint.model, rows)
        rates: dict[int, list[float]] = {1: [], 16: []}
        first: list[str | None] | None = None
        for concurrency in (1, 16, 16, 1):
            client = Endpoint(EndpointSettings(urls=(endpoint.base_url,), concurrency=concurrency))
            start = time.perf_counter()
            answers = client.complete(requests)
            seconds = time.perf_counter() - start
            failed = [a.error for a in answers if a.text is None]
            if failed:
                raise SystemExit(f"{len(failed)} requests failed: {failed[0]}")
            texts = [a.text for a in answers]
            if first is None:
                first = texts
            elif texts != first:
                differ = sum(a != b for a, b in zip(texts, first, strict=True))
                raise SystemExit(f"{differ} answers differ from the first pass at concurrency {concurrency}")
            rates[concurrency].append(len(requests) / seconds)
            print(
                f"{label}: concurrency {concurrency:2d}: {len(requests)} rows in {seconds:.1f} s, "
                f"{len(requests) / seconds:.2f} rows/s"
            )
    one, sixteen = (sum(rates[c]) / len(rates[c]) for c in (1, 16))
    print(f"{label}: concurrency 16 / 1 = {sixteen:.2f} / {one:.2f} rows/s = {sixteen / one:.2f}x")
    return sixteen / one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--server", choices=("continuous", "default", "both"), default="both")
    args = parser.parse_args()
    kinds = ["continuous", "default"] if args.server == "both" else [args.server]
    for kind in kinds:
        extra = ["--continuous-batching"] if kind == "continuous" else []
        bench(extra, f"transformers serve ({kind} batching)", args.rows)


if __name__ == "__main__":
    main()
