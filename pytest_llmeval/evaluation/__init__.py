"""Evaluating rows in one pytest process, by role. The facade items.py and the plugin call is
evaluator.Evaluator; behind it:

- prompting.py: each row's prompt settings and few-shot examples, per column (prompts.py decides).
- producer.py: one path from a chunk of rows to every column's outputs over the backend protocol
  (backends/): generation, measurement, judging, fluency.
- ledger.py: what each row cost each column, and the budget it spends.
- scoring.py: a row's outputs scored into its RowRecord, with the scorers' resources (sandbox, embedder).
- gating.py: a gate's rows gathered for the pure verdicts of gates.py.
- provenance.py: results.json's metadata of the run and its models.
- outputs.py: what a row produced, and how a row fails or is skipped.

The plans every process shares (columns, chunks, sequential order) are planning.py's.
"""
