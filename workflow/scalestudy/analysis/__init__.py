"""What a study's records say: read after the runs, from a results directory's state
(scalestudy.results) and a site's usage records, never from a scheduler or a running job.

tables.py           runs.csv, scaling.csv and variants.csv: records, statistics, laws, verdicts
accounting.py       a site's own record of a batch job's resource use (Gadi's usage block)
breakdown.py        where a step's time went (compute, communication, ...)
sizes.py            collectives' figures per message size
scaling_models.py   PMNF scaling models fitted to the curves, and their forecasts
"""
