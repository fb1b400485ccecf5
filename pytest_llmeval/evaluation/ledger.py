"""The cost ledger: what each row cost each column (costs.side_cost: tokens, seconds, dollars) and the
budget those costs spend (--llmeval-max-tokens, --llmeval-max-cost). Once the budget is spent, no further
chunk is sent to a model; the rows already scored are kept."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmeval.run_options import RunOptions

if TYPE_CHECKING:
    from pytest_llmeval.costs import Budget, Price


class Ledger:
    """This process's costs, by row and column, and its share of the run's budget."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        # What each row cost each column (costs.side_cost), node id -> column -> cost; the budget it spends.
        self.costs: dict[str, dict[str, dict[str, Any]]] = {}
        self.stopped: str | None = None  # why later rows were not run (the budget ran out)
        self._budget: Budget | None = None

    def budget(self) -> Budget:
        """What this process may still spend (--llmeval-max-tokens, --llmeval-max-cost), and has spent."""
        if self._budget is None:
            from pytest_llmeval.costs import Budget

            self._budget = Budget(self.options.max_tokens, self.options.max_cost, share=self.options.workers)
        return self._budget

    def exhausted(self) -> str | None:
        """Why nothing more may be sent to a model (remembered as `stopped`); None while budget is left."""
        stop = self.budget().exhausted()
        if stop is not None:
            self.stopped = stop
        return stop

    def spend(
        self,
        column: str,
        rows: Sequence[str],
        seconds: float,
        tokens: Mapping[str, tuple[int | None, int | None]],
        price: Price | None = None,
    ) -> None:
        """Record what one column spent on `rows` in `seconds` (shared equally among them): `tokens` holds
        each generated row's (prompt, generated) tokens, a row missing from it came from the cache."""
        from pytest_llmeval.costs import side_cost

        share = seconds / len(rows) if rows else 0.0
        for n in rows:
            prompt, generated = tokens.get(n, (0, 0))
            cost = side_cost(
                prompt_tokens=prompt,
                generated_tokens=generated,
                cached=n not in tokens,
                seconds=share,
                price=price,
            )
            self.costs.setdefault(n, {})[column] = cost
            self.budget().spend((prompt or 0) + (generated or 0), cost["usd"] or 0.0)
