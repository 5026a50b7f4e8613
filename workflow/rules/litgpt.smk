# LitGPT, local study only: the offline stand-ins for Llama-2-7b and its data, which the
# local overlay's points read from {results_dir}/assets/litgpt-tiny.
from scalestudy.apps.litgpt_assets import settings_param  # noqa: E402


rule litgpt_tiny_assets:
    output:
        weights=f"{LAYOUT.litgpt_tiny}/checkpoint/lit_model.pth",
        config=f"{LAYOUT.litgpt_tiny}/checkpoint/model_config.yaml",
        tokenizer=f"{LAYOUT.litgpt_tiny}/checkpoint/tokenizer.json",
        tokenizer_config=f"{LAYOUT.litgpt_tiny}/checkpoint/tokenizer_config.json",
        data=f"{LAYOUT.litgpt_tiny}/alpaca.json",
    params:
        shape=settings_param(STUDY.assets.get("litgpt_tiny", {})),
    log:
        f"{LAYOUT.litgpt_tiny}/make.log",
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.apps.litgpt_assets import make_tiny_assets_from_config

        make_tiny_assets_from_config(output, params.shape, log[0])
