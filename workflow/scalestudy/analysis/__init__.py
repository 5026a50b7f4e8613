"""What a study's records say: read after the runs, from a results directory's state
(scalestudy.bookkeeping) and a site's usage records, never from a scheduler or a running job.
Imports go one way, down this list (an import-linter contract):

scaling_models.py   PMNF scaling models fitted to the curves, and their forecasts
intervals.py        their calibrated prediction intervals (arrays in, no table)
pmnf.py             the PMNF fitter, Extra-P's way (arrays in, no table)
sizes.py            figures that are curves over message size: statistics and verdicts per size band
breakdown.py        where a step's time went (compute, communication, ...)
verdicts.py         variants.csv: speed ratios of each set against its baseline, the verdicts that
                    hold (the scaling rule's second step)
scaling.py          scaling.csv: curves, the figures of model.scaling_figures, scaling laws, cost
                    choices; the scaling rule's entry
records.py          runs.csv: records read and checked, pending points; reading and writing tables
statistics.py       statistics of repeats: mean and CI, trimmed mean, median CI, outliers, rank tests
accounting.py       a site's own record of a batch job's resource use (Gadi's usage block)
"""
