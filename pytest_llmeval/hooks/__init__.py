"""pytest-llmeval's hooks and fixtures, one module per concern; plugin.py (the pytest11 entry point)
re-exports them, and pytest registers that one module.

options: the options and ini values (pytest_addoption); configure: the settings built once, the evaluator and
recorder, the checks before the run (pytest_configure, pytest_sessionstart, pytest_unconfigure); collection:
benchmark files into items, the subset, the plan; fixtures: llm, llm_base, llm_models; reporting: the header,
records from test reports, results.json and the reports at the end, the terminal summary; outputs: the run's
files checked and written; xdist: which process a hook runs in.
"""
