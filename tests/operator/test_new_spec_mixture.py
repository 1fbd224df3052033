"""`tenzro train new-spec --data builtin:mixture`: the zero-shot reference recipe's training mixture
as a devnet task (real + TSMixup + KernelSynth + TrendSeason series pinned as one dataset, its parameters
in the spec), with the shares of a member of the reference ensemble (``--mixture-shares``)."""

import pytest

from op_stack import fresh_task_name
from tenzro_operator.spec import load_spec
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.data import dataset_hash
from tenzro_trainer.data.mixture import MixtureConfig, mixture_shares, training_mixture
from tenzro_trainer.data.windows import train_heldout_split

pytestmark = pytest.mark.slow  # builds the mixture (KernelSynth's GP samples) and pins it


def test_mixture_spec_records_its_parameters_and_hash(run_cli, keystores, tmp_path):
    out = tmp_path / "recipe.json"
    res = run_cli("train", "new-spec", "--data", "builtin:mixture", "--mixture-shares", "0.02", "0.22", "0.36", "0.40",
                  "--task-id", fresh_task_name("recipe"), "--preset", "cpu-ref", "--trainers", "4", "--quorum", "4",
                  "--fragments", "4", "--inner-steps", "100", "--rounds", "30", "--out", str(out),
                  keystore=keystores["sponsor"])
    assert res.exit_code == 0, res.output
    spec = load_spec(out)
    cfg = MixtureConfig(**spec.metadata["training_mixture"])
    assert cfg == MixtureConfig(weight_kernelsynth=0.36, weight_trendseason=0.40)
    df = training_mixture(cfg)  # anyone can regenerate what the dataset hash covers
    assert spec.dataset_hash == "0x" + dataset_hash(df)
    assert mixture_shares(df) == pytest.approx({"real": cfg.weight_real, "tsmixup": cfg.weight_tsmixup,
                                                "kernelsynth": cfg.weight_kernelsynth,
                                                "trendseason": cfg.weight_trendseason}, abs=0.01)

    # the devnet trains on the split the simulator trains on: short series left-padded, not dropped
    runtime = TaskRuntime.from_spec(spec)
    split = runtime.split(df)
    unpadded = train_heldout_split(df, runtime.model_cfg.context_len, runtime.model_cfg.horizon, 0.1)
    assert runtime.model_cfg.masked and split.padded
    assert len(split.unique_ids) > len(unpadded.unique_ids)
