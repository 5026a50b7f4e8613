"""scalestudy: an HPC scaling study as one Snakemake workflow.

Everything the rules do lives here; the rules only wire paths and resources.
"""

__version__ = "0.1.0"
