"""The files of a LitGPT checkpoint directory (LitGPT 0.5's layout), named once: the app reads the
model config and points LitGPT at the weights; the offline stand-in assets write all of them.
Standard library only (the app registry imports every module of the package)."""

# A LitGPT checkpoint directory's files, as LitGPT names them: the weights, the model's config
# (litgpt.utils.save_config writes it), the tokenizer's files.
CHECKPOINT_WEIGHTS = "lit_model.pth"
CHECKPOINT_CONFIG = "model_config.yaml"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
