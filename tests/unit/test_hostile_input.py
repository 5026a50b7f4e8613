"""Hostile input, as properties over generated values (hypothesis): no sweep value is ever
executed by a shell, each value reaches the launcher as one argument, and names with
shell metacharacters or path separators are refused before anything runs. Then, a case per
kind of mistake that used to get past the load (issue 23): each now stops there in one line
naming the key, what is wrong and what is allowed."""

import re

import pytest
from hostile import SHELL_BITS
from hypothesis import given, settings
from hypothesis import strategies as st
from scalestudy.model.errors import SweepError
from scalestudy.study import load

VALID_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def sweep_with(study="s", mpi_set="default", nccl_set="default", axis_value=2):
    return {
        "mpi_flag_sets": {mpi_set: {}},
        "nccl_env_sets": {nccl_set: {}},
        "studies": {
            study: {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "mpi_flags": [mpi_set],
                    "nccl_env": [nccl_set], "params": {"iterations": [axis_value, 10**6]}}
        },
    }  # fmt: skip


NAMES = st.one_of(
    st.text(min_size=1, max_size=12), st.from_regex(VALID_NAME, fullmatch=True).filter(lambda s: len(s) < 60)
)


@settings(max_examples=150, deadline=None)
@given(name=NAMES, where=st.sampled_from(["study", "mpi_set", "nccl_set"]))
def test_names_are_refused_unless_they_are_safe_path_segments(name, where):
    safe = bool(VALID_NAME.match(name)) and len(name) <= 64
    try:
        loaded = load(sweep_with(**{where: name}))
    except SweepError as error:
        assert not safe, error.problems
        assert any(repr(name) in problem or "name" in problem for problem in error.problems)
        return
    assert safe
    for p in loaded.points:
        assert all(VALID_NAME.match(part) for part in p.id.split("/"))


SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.text(min_size=1, max_size=12), SHELL_BITS))
def test_axis_values_that_cannot_name_a_directory_are_refused(value):
    params = {"method": "lora", "checkpoint_dir": "/ckpt", "max_steps": 1, "global_batch_size": 8,
              "micro_batch_size": 1, "data_path": [value, "other.json"]}  # fmt: skip
    config = {"studies": {"s": {"app": "litgpt", "nodes": [1], "ranks_per_node": [1], "params": params}}}
    try:
        loaded = load(config)
    except SweepError as error:
        assert not SAFE_SEGMENT.match(value) or value == "other.json", error.problems
        assert any(p.startswith("studies.s.params.data_path") for p in error.problems)
        return
    assert SAFE_SEGMENT.match(value)
    assert {p.id.split("/")[0] for p in loaded.points} == {f"data_path-{value}", "data_path-other.json"}


def refusals(config):
    with pytest.raises(SweepError) as raised:
        load(config)
    return raised.value.problems


# ---------------------------------------------------------------- app parameters that cannot work together


def torch_parallel(ranks=2, **params):
    return {"cluster": "local", "studies": {"t": {"app": "torch-parallel", "nodes": [1], "ranks_per_node": [ranks],
                                                  "params": {"model": "gpt2", **params}}}}  # fmt: skip


def test_attention_heads_must_divide_the_hidden_size():
    # The rank program's attention reshapes width into heads x (width // heads): 64 / 3 fails
    # in the job, and 12 / 8 silently trains 12 heads of one value each.
    assert refusals(torch_parallel(width=64, heads=3)) == [
        "studies.t.params.heads: 3 does not divide width 64; allowed: a divisor of width (1, 2, 4, 8, 16, 32, 64)"
    ]
    assert refusals(torch_parallel(width=12, heads=8))[0].startswith("studies.t.params.heads: 8 does not divide")
    # heads means nothing to a model without attention: not checked there.
    assert load(torch_parallel(model="cnn", heads=3)).points


def test_an_image_family_is_no_deeper_than_its_image_can_be_halved():
    assert refusals(torch_parallel(model="cnn", depth=6)) == [
        "studies.t.params.depth: cnn halves its image's side at every layer, so depth 6 leaves nothing of the "
        "32x32 image; allowed: 1 to 5"
    ]
    assert load(torch_parallel(model="autoencoder", depth=5)).points


def test_converging_on_fewer_samples_than_one_global_batch_is_refused():
    assert refusals(torch_parallel(mode="converge", samples=16, batch_size=16)) == [
        "studies.t.params.samples: 16 is less than one global batch at 2 ranks (batch_size 16 x 2 replicas = 32): "
        "no step would run; allowed: at least 32"
    ]
    # A pipeline is one replica: one batch of samples is enough.
    assert load(torch_parallel(mode="converge", samples=16, batch_size=16, strategy="pipeline")).points


def test_an_integer_parameter_outside_its_allowed_values_is_one_line_not_a_type_error():
    assert refusals(torch_parallel(strategy="fsdp", zero_stage=4)) == [
        "studies.t.params.zero_stage: 4 is not allowed; allowed: 1, 2, 3"
    ]


def with_tiny_assets(**settings):
    return {"cluster": "local", "assets": {"litgpt_tiny": settings},
            "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2]}}}  # fmt: skip


def test_litgpt_stand_in_shapes_litgpt_rejects_are_refused():
    assert refusals(with_tiny_assets(n_embd=64, n_head=3)) == [
        "assets.litgpt_tiny.n_head: 3 does not divide n_embd 64 (LitGPT splits the embedding into heads); "
        "allowed: a divisor of n_embd (1, 2, 4, 8, 16, 32, 64)"
    ]
    assert refusals(with_tiny_assets(vocab_size=100)) == [
        "assets.litgpt_tiny.vocab_size: 100 is less than the byte-level tokenizer's 256 bytes and 3 special "
        "tokens; allowed: at least 259"
    ]


def test_the_smallest_vocabulary_is_the_tokenizer_librarys_alphabet_and_special_tokens():
    # The reference is the tokenizers library's own byte alphabet, not a number written here.
    from scalestudy.apps import litgpt_assets
    from tokenizers import pre_tokenizers

    alphabet = len(pre_tokenizers.ByteLevel.alphabet())
    assert litgpt_assets.MIN_VOCAB == alphabet + len(litgpt_assets.SPECIAL_TOKENS)
