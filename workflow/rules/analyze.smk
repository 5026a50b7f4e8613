# From metrics.json files to tidy tables. Cheap: always run on the login node.


rule aggregate:
    input:
        run_metrics,
    output:
        report(
            f"{RESULTS}/{{study}}/runs.csv",
            caption="../report/runs.rst",
            category="{study}",
            subcategory="tables",
        ),
    log:
        f"{RESULTS}/{{study}}/logs/aggregate.log",
    localrule: True
    run:
        from scalestudy.analysis import aggregate

        aggregate(input).to_csv(output[0], index=False)


rule scaling:
    input:
        f"{RESULTS}/{{study}}/runs.csv",
    output:
        report(
            f"{RESULTS}/{{study}}/scaling.csv",
            caption="../report/scaling.rst",
            category="{study}",
            subcategory="tables",
        ),
    log:
        f"{RESULTS}/{{study}}/logs/scaling.log",
    localrule: True
    run:
        import pandas as pd
        from scalestudy.analysis import scaling

        scaling(pd.read_csv(input[0])).to_csv(output[0], index=False)
