"""Pages, plots and side files made from the analysis's tables.

page.py                  blocks, renderers and number text (knows nothing of what a page says)
glossary.py              the analysis's definitions, in the order the report lists them
plots.py                 every figure of a study
report.py                the report page of every study, and its provenance side files
compare.py               two results directories (or a published record and one) compared
published.py             a published scaling table read as a study's runs
published_page.py        the page of a published record
scaling_models_page.py   the scaling models' section of a page
planned_predictions.py   the forecasts a plan prints, from earlier studies' models
"""
