"""Reports for people, made from results.json, and the PEFT-against-SFT comparison with its report.

Import from the module that holds a name; this package re-exports nothing.

- `rows`: a results.json row as the reports read it: what changed between base and adapter, what each side
  answered, its score in a few words.
- `spot_check`: which rows the spot check shows and why, and spot_check.md.
- `summary`: the terminal summary table.
- `html`: the self-contained HTML page (`html_report`): head, styles, script, header, and one section per
  benchmark with its rows table.
- `html_parts`: what every part of the page shares: escaping, the colour palette, a captioned table.
- `html_charts`: the page's SVG charts: difficulty bars, the differences' histogram, the confidence sequence,
  training curves.
- `html_sections`: the page's other sections: gates, statistics, sequential decision, perplexity, composite,
  fluency, training, PEFT against SFT, cost.
- `html_matrix`: the interference matrix as a heatmap table.
- `peft_sft_sides`: the PEFT and SFT sides of the comparison, read from results.json and training logs.
- `peft_sft`: PEFT against SFT compared: the §5.1 ratios, the §5.2 paired tests, the §7.2 criteria judged.
- `peft_sft_report`: that comparison for people: the terminal table, the §6.2 Markdown report, the
  recommendations.
- `viewer_page`: the history viewer's page (`pytest-llmeval view`): the payload of `viewer.py` embedded as
  escaped JSON, and `viewer.js`, the page's own script, inlined under a Content-Security-Policy.
"""
