# LitGPT, local study only: the offline stand-ins for Llama-2-7b and its data, which the
# local overlay's points read from {results_dir}/assets/litgpt-tiny.
from scalestudy.apps.litgpt.assets import settings_param, tiny_asset_files  # noqa: E402


rule litgpt_tiny_assets:
    output:
        **tiny_asset_files(LAYOUT.litgpt_tiny),
    params:
        shape=settings_param(STUDY.settings.assets.get("litgpt_tiny", {})),
    log:
        f"{LAYOUT.litgpt_tiny}/make.log",
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.apps.litgpt.assets import make_tiny_assets_from_config

        make_tiny_assets_from_config(output, params.shape, log[0])
