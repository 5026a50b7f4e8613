# LitGPT, local study only: the offline stand-ins for Llama-2-7b and its data, which the
# local overlay's points read from {results_dir}/assets/litgpt-tiny. The Snakefile includes
# this file from the app's folder (scalestudy.apps.registry.rules_files); the files, their
# settings (the sweep's `assets:` entry the app names, LitGPT.assets_key) and how they are
# made are the app's (assets.py); this rule only wires them.
from scalestudy.apps.litgpt.assets import settings_param, tiny_asset_files, tiny_folder  # noqa: E402

LITGPT = APPS["litgpt"]


rule litgpt_tiny_assets:
    output:
        **tiny_asset_files(tiny_folder(LAYOUT)),
    params:
        shape=settings_param(STUDY.settings.assets.get(LITGPT.assets_key, {})),
    log:
        f"{tiny_folder(LAYOUT)}/make.log",
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.apps.litgpt.assets import make_tiny_assets_from_config

        make_tiny_assets_from_config(output, params.shape, log[0])
