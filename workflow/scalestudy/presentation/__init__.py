"""Pages, plots and side files made from the analysis's tables.

page.py                  blocks, renderers and number text (knows nothing of what a page says)
glossary.py              the analysis's definitions, in the order the report lists them
plots.py                 every figure of a study
report.py                the report page: the overview, each study's section, the definitions
scaling_section.py       a study's scaling table, its summary sentence, Amdahl, cost, breakdown, memory
variants_section.py      variant verdicts against their baseline (per figure and per message-size band)
runs_section.py          a study's runs (failures, pending, packed, settings proof) and provenance side file
compare.py               two results directories (or a published record and one) compared: the page, the entries
comparison.py            what the comparison reads and finds: each side, the point table, curve and provenance changes
published.py             a published scaling table read as a study's runs
published_page.py        the page of a published record
scaling_models_page.py   the scaling models' section of a page
planned_predictions.py   the forecasts a plan prints, from earlier studies' models
"""
