"""The rounds a syncer committed: its saved state (``<data_dir>/syncer-<task>.pt``: the round
finalized last and the outer optimizers), a restart's rebuild of missing rounds from their
transcripts (checked against the committed root), the answers to ``challengeWeights`` of its
committed rounds (PROTOCOL.md §5 "Weights availability"), and the seal after the last round's
challenge window.

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
import copy
import hashlib

import torch

from tenzro_operator.chain import ChunkOpening, RunStatus
from tenzro_operator.daemon import atomic_torch_save, load_state_file
from tenzro_operator.errors import ChainRevert, IpfsError, TenzroError
from tenzro_operator.receipt import weights_root
from tenzro_operator.root_flow import committed_round, committed_rounds, fragment_weights_roots
from tenzro_operator.task_assets import initial_weights
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.aggregation import trainer_key
from tenzro_trainer.fragments import fragment_state
from tenzro_trainer.outer import OuterOptimizer


log = logging.getLogger("tenzro.syncer")


class CommittedRounds:
    """The syncer's committed rounds: state, rebuilds, weights answers, the seal (see the module docstring)."""

    # pending weights challenges of the run, (round, fragment, momentum, chunk) -> deadline (chain
    # seconds); the next block to read WeightsChallenged events from (None: the run's start); the
    # RootRoundChecker that rebuilds a committed round from its pins (built at the first challenge)
    _weights_pending: dict
    _weights_next: int | None = None
    _weights_checker = None

    def persist(self) -> None:
        """Save the round finalized last and the outer optimizers (atomic, fsynced). The event
        cursor has a file of its own (`EventCursor.save`); a restarted syncer reads the open
        round's submissions again from the block the round opened in."""
        atomic_torch_save({"task": "0x" + self.task_id.hex(), "round": self.last_finalized,
                           "outers": [copy.deepcopy(o.state_dict()) for o in self.outers],
                           "credit": self.credit_state()}, self.state_path)

    def restore(self) -> None:
        """Bring the outer optimizers to the chain's open round (see the module docstring).

        A saved state ahead of the chain (a reorg dropped a commit this syncer saved, or the
        transaction never made it) is not trusted: the rounds are rebuilt from the transcripts the
        chain does hold, and the dropped round is committed again.

        Raises:
            TenzroError: a committed round without its event, or a rebuilt round that does not
                match its committed weights.
        """
        run = self.chain.get_run(self.task_id)
        done = run.current_round - 1 if run.status == RunStatus.TRAINING else run.max_rounds - 1
        saved = None
        for path in (self.state_path, self._legacy_state_path):
            if path.exists():
                saved = load_state_file(path)
                if saved.get("task") == "0x" + self.task_id.hex():
                    break
                saved = None
        if saved is not None and saved["round"] > done:
            self.chain.resync_nonce()  # the dropped commit's nonce is free again
            log.warning("syncer state %s is at round %d but the chain has committed only up to round %d (a reorg "
                        "dropped a commit, or it never landed): rebuilding from the chain's transcripts and "
                        "committing again", self.state_path, saved["round"], done)
            saved = None
        self._round = None  # the open round's submissions are read again from the chain
        self.load_credit_state(saved.get("credit") if saved is not None else None)
        if saved is not None:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in saved["outers"]]
            self.last_finalized = int(saved["round"])
            log.info("restored outer state after round %d from %s", self.last_finalized, self.state_path)
        else:
            state, _ = initial_weights(self.ipfs, self.spec, self.runtime, run.initial_weights_root)
            self.outers = [OuterOptimizer(fragment_state(state, names), self.outer_cfg)
                           for names in self.runtime.fragments]
            self.last_finalized = -1
            if done >= 0:
                log.warning("no state file %s: rebuilding rounds 0..%d from their transcripts", self.state_path, done)
        if done > self.last_finalized:
            commits = self.root_commits()  # one event scan for every round to rebuild
            for r in range(self.last_finalized + 1, done + 1):
                if r not in commits:
                    raise TenzroError(f"no RoundCommitted event for round {r} of task 0x{self.task_id.hex()}")
                self.rebuild_round(r, commits[r])
                self.last_finalized = r
                self.persist()

    def rebuild_round(self, r: int, commit: dict) -> None:
        """Re-run round r's aggregation and outer step from its pinned transcript and payloads
        (``commit``: its transcript and ``weightsRoot``, `root_commits`); checks the result against
        the committed weights root (over the §2 roots of the rebuilt weights, PROTOCOL.md §5) and
        the transcript's blob SHA-256s (bound by its hash)."""
        tr = RoundTranscript.parse(self.ipfs.cat(commit["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                   bytes(commit["transcriptHash"]))
        index = {a.lower(): i for i, a in enumerate(self.chain.trainers_of(self.task_id))}
        self._last_aggregate = {}
        for fr in sorted(tr.fragments, key=lambda x: x.fragment):
            updates = {}
            for s in fr.accepted:
                raw = self.ipfs.cat(s.cid, max_bytes=self.runtime.payload_cap(fr.fragment))
                if "0x" + hashlib.sha256(raw).hexdigest() != s.sha256.lower():
                    raise TenzroError(f"rebuilding round {r}: payload {s.cid} does not hash to {s.sha256}")
                updates[trainer_key(index[s.trainer.lower()])] = self.runtime.decode_payload(raw, fr.fragment)[0]
            outer = self.outers[fr.fragment]
            if updates:
                self._last_aggregate[fr.fragment] = self.rule(updates)
            outer.step(self._last_aggregate[fr.fragment] if updates else outer.zero_aggregate())
        blobs = self.runtime.encode_weights(self._state(), r)
        got = [hashlib.sha256(b).digest() for b in blobs]
        want = tr.weights_refs()[1]
        if weights_root(fragment_weights_roots(self._state(), self.runtime.fragments)) != commit["weightsRoot"]:
            raise TenzroError(f"rebuilding round {r} from its transcript gives other weights than the "
                              "committed root; cannot continue this run safely")
        if got != want:
            bad = [f for f in range(len(got)) if got[f] != want[f]]
            raise TenzroError(f"rebuilding round {r} from its transcript gives other weights (fragments {bad}) "
                              "than the committed ones; cannot continue this run safely")
        log.info("rebuilt round %d from its transcript (weights match the chain)", r)

    def _state(self) -> dict[str, torch.Tensor]:
        state: dict[str, torch.Tensor] = {}
        for o in self.outers:
            state.update(o.weights())
        return state

    def root_commits(self) -> dict[int, dict]:
        """``round -> commit`` of the run's committed rounds in the shape `rebuild_round` reads
        (``transcriptCid``, ``transcriptHash``, ``weightsRoot``)."""
        run = self.chain.get_run(self.task_id)
        upto = run.current_round if run.status == RunStatus.TRAINING else run.max_rounds  # not a discarded round
        return {r: {"transcriptCid": a["transcriptCid"], "transcriptHash": bytes(a["transcriptHash"]),
                    "weightsRoot": bytes(a["weightsRoot"])}
                for r, a in committed_rounds(self.chain, self.task_id, self._run_start, upto).items()}

    def _root_checker(self):
        """This run's `RootRoundChecker` (committed rounds rebuilt from their transcripts)."""
        from tenzro_operator.root_check import RootRoundChecker

        if self._weights_checker is None:
            self._weights_checker = RootRoundChecker(self.chain, self.ipfs, self.task_id, self.spec, self.runtime,
                                                     self._run_start)
        return self._weights_checker

    def root_answer_weights(self) -> int:
        """Answer every pending ``challengeWeights`` of this run (PROTOCOL.md §5 "Weights
        availability"): read the ``WeightsChallenged`` events since the last poll, and for each
        one whose deadline has not passed send ``answerWeights`` with the round's roots (its
        ``RoundCommitted`` event), the fragment leaf and its path, the round's fragment hashes (the
        leaves' §2 weights roots) and the chunk's opening. The round's state is rebuilt from what
        this syncer pinned when it committed it (the transcript names the weights and momentum
        blobs, `RootRoundChecker.committed`), so the answer survives a restart. A challenge the
        registry no longer holds (answered by someone else, voided, expired) is dropped; one that
        cannot be answered yet (a lagging node, IPFS) is retried on the next poll until its
        deadline. Returns the number answered by this call."""
        if self._weights_next is None:
            self._weights_next = self._run_start
        head = self.chain.block_number()
        if head >= self._weights_next:
            for ev in self.chain.get_logs(self._weights_next, head, ["WeightsChallenged"], task_id=self.task_id):
                a = ev["args"]
                key = (int(a["round"]), int(a["fragment"]), bool(a["momentum"]), int(a["chunkIndex"]))
                self._weights_pending[key] = int(a["deadline"])
                log.warning("round %d: %s challenged chunk %d of fragment %d's %s: answering", key[0],
                            a["challenger"], key[3], key[1], "momentum" if key[2] else "weights")
            self._weights_next = head + 1
        if not self._weights_pending:
            return 0
        now, answered = self.chain_now(), 0
        for key, deadline in sorted(self._weights_pending.items()):
            r, f, momentum, chunk = key
            if now > deadline:
                log.error("round %d: the weights challenge of fragment %d chunk %d passed its deadline unanswered",
                          r, f, chunk)
                del self._weights_pending[key]
                continue
            try:
                event = committed_round(self.chain, self.task_id, self._run_start, r, wait_s=30.0, sleep=self.sleep,
                                        poll_s=self.poll_s)
                c = self._root_checker().committed(r, event)
                tree = c.states[f].momentum if momentum else c.states[f].weights
                opening = (c.states[f].leaf.as_tuple(), rc.fragments_tree(c.leaves).path(f),
                           [s.leaf.weights_root for s in c.states], ChunkOpening.of(tree, chunk).to_abi())
                self.chain.answer_weights(self.task_id, r, f, momentum, c.roots, opening)
            except ChainRevert as exc:
                if exc.error_name in ("Registry__NoChallenge", "Registry__ChallengeDeadline"):
                    log.info("round %d: the weights challenge of fragment %d chunk %d is settled already (%s)", r, f,
                             chunk, exc.error_name)
                    del self._weights_pending[key]
                    continue
                log.error("round %d: answering the weights challenge of fragment %d chunk %d failed: %s", r, f,
                          chunk, exc)
                continue
            except (TenzroError, IpfsError) as exc:  # not readable yet: retried on the next poll
                log.warning("round %d: cannot answer the weights challenge of fragment %d chunk %d yet: %s", r, f,
                            chunk, exc)
                continue
            del self._weights_pending[key]
            answered += 1
            self._tally("weights_challenges_answered", 1)
            log.info("round %d: answered the weights challenge of fragment %d chunk %d (the bond is this syncer's)",
                     r, f, chunk)
        return answered

    def root_seal(self) -> bool:
        """``sealRootRun`` once the last round's challenge window has passed; True when the run is
        sealed (by this call or someone else's), False to try again on a later poll."""
        try:
            self.chain.seal_root_run(self.task_id)
        except ChainRevert as exc:
            if exc.error_name in ("Registry__ChallengeWindowOpen", "Registry__ChallengesPending"):
                if getattr(self, "_seal_wait_said", None) != self.task_id:  # once per run, not once per poll
                    self._seal_wait_said = self.task_id
                    log.info("every round is committed: the run stays COMPLETED until %s, then this syncer seals it",
                             "the last round's challenge window closes" if exc.error_name.endswith("WindowOpen")
                             else "its pending challenges are settled")
                self.nudge_devnet(self.chain_now())
                return False
            if exc.error_name != "Registry__WrongStatus":
                raise
            if self.chain.get_run(self.task_id).status == RunStatus.SEALED:  # not cancelled
                log.info("already sealed (by another account): the run ended sealed")
                self._tally("runs_sealed", 1)
            return True
        self._tally("runs_sealed", 1)
        log.info("sealed the root-flow run: claims are open")
        return True
