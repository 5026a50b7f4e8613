"""The configuration layer: the sweep file and the cluster files, read, validated for
shape and expanded into points (config.sweep), the machine's facts (config.clusters), the
NCCL value rules (config.nccl) and what a point asks of a batch system (config.requests).
It knows nothing of any app: the app's own checks are added one layer up
(scalestudy.config.study), so that apps depend on the model alone.
"""
