"""The root flow's wire messages and credits bookkeeping (`tenzro_operator.root_flow`), without a
chain: what the syncer accepts from pubsub, whose signature a reveal carries, and the credits a
claim proves."""

from __future__ import annotations

import json

import pytest
from eth_account import Account

from tenzro_operator.chain import SignedPayload, sign_outer_gradient
from tenzro_operator.credits import credit_halves, paid_credits
from tenzro_operator.root_flow import (
    MAX_MESSAGE_BYTES,
    CommitMessage,
    RevealMessage,
    RootFlowError,
    credits_proof,
    cumulative_credits,
    parse_message,
)
from tenzro_trainer import round_commitment as rc

TASK, BASE, REGISTRY, CHAIN_ID = b"\x11" * 32, b"\x22" * 32, "0x" + "ab" * 20, 31337


def _reveal(account, cid: str = "bafkqaaa") -> RevealMessage:
    payload = SignedPayload(b"\x33" * 32, 0x3F800000, cid, b"\x44" * 32)
    signed = sign_outer_gradient(account, CHAIN_ID, REGISTRY, TASK, 3, 1, BASE, payload)
    return RevealMessage.of(TASK, 3, 1, account.address, BASE, signed)


def test_a_reveal_travels_intact_and_names_its_signer():
    trainer = Account.create()
    m = _reveal(trainer)
    back = parse_message(m.encode())
    assert back == m
    assert back.signer(CHAIN_ID, REGISTRY) == trainer.address.lower()
    assert back.commitment() == rc.forced_commitment(back.struct_hash(), trainer.address)
    # the signature binds every field: another CID, chain or registry recovers someone else
    other = RevealMessage(**{**m.model_dump(), "cid": "bafkqaab"})
    assert other.signer(CHAIN_ID, REGISTRY) != trainer.address.lower()
    assert m.signer(1, REGISTRY) != trainer.address.lower()
    # a copier's re-signature of the same payload is its own, with another commitment
    copier = Account.create()
    copy = RevealMessage.of(TASK, 3, 1, copier.address, BASE, sign_outer_gradient(
        copier, CHAIN_ID, REGISTRY, TASK, 3, 1, BASE, m.signed_payload()))
    assert copy.struct_hash() == m.struct_hash() and copy.commitment() != m.commitment()


def test_a_signature_that_recovers_to_nobody_is_refused_not_raised():
    m = RevealMessage(**{**_reveal(Account.create()).model_dump(), "signature": "0x" + "00" * 65})
    assert m.signer(CHAIN_ID, REGISTRY) == ""


@pytest.mark.parametrize("data, why", [
    (b"x" * (MAX_MESSAGE_BYTES + 1), "exceeds"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "neither"),
    (json.dumps({"type": "vote"}).encode(), "neither"),
    (json.dumps({"type": "commit", "task": "0x12", "round": 0, "fragment": 0, "trainer": "0x" + "00" * 20,
                 "commitment": "0x" + "00" * 32}).encode(), "task"),
    (json.dumps({"type": "commit", "task": "0x" + "00" * 32, "round": -1, "fragment": 0,
                 "trainer": "0x" + "00" * 20, "commitment": "0x" + "00" * 32}).encode(), "round"),
    (json.dumps({"type": "commit", "task": "0x" + "00" * 32, "round": 0, "fragment": 0,
                 "trainer": "0x" + "00" * 20, "commitment": "0x" + "00" * 32, "signature": "0x" + "00" * 65,
                 "extra": 1}).encode(), "extra"),
    (json.dumps({"type": "commit", "task": "0x" + "00" * 32, "round": 0, "fragment": 0,
                 "trainer": "0x" + "00" * 20, "commitment": "0x" + "00" * 32}).encode(), "signature"),
])
def test_malformed_messages_are_refused_with_the_reason(data, why):
    with pytest.raises(RootFlowError, match=why):
        parse_message(data)


def test_a_commit_message_is_parsed_as_one():
    m = CommitMessage(task="0x" + TASK.hex(), round=0, fragment=2, trainer="0x" + "01" * 20,
                      commitment="0x" + "02" * 32, signature="0x" + "03" * 65)
    assert parse_message(m.encode()) == m


def test_credits_are_the_sum_of_the_accepted_fragment_sizes_and_prove_a_claim():
    sizes = [40, 24, 8]
    rounds = {0: {"acceptedBitmaps": [0b111, 0b011, 0]}, 1: {"acceptedBitmaps": [0b100, 0b111, 0b001]}}
    credits = cumulative_credits(rounds, sizes, 3)
    assert credits == [72 + 8, 64 + 72, 40]
    root = rc.credits_tree(credits).root
    for i, c in enumerate(credits):
        proof = credits_proof(credits, i, root)
        assert rc.verify_path(root, rc.credit_leaf(i, c), i, proof, 4)
    with pytest.raises(RootFlowError, match="registry holds"):
        credits_proof([c + 1 for c in credits], 0, root)


def test_unendorsed_credits_go_to_the_high_half_of_the_word_and_are_paid_up_to_the_endorsed():
    sizes = [40, 24, 8]
    rounds = {0: {"acceptedBitmaps": [0b111, 0b011, 0b001], "unendorsedBitmaps": [0, 0b010, 0b001]},
              1: {"acceptedBitmaps": [0b100, 0b111, 0b001], "unendorsedBitmaps": [0b100, 0b111, 0b001]}}
    credits = cumulative_credits(rounds, sizes, 3)
    assert [credit_halves(c) for c in credits] == [(72, 8), (40, 24 + 72), (0, 80)]
    # paid: the endorsed plus the unendorsed up to the endorsed (the registry's claim)
    assert [paid_credits(c) for c in credits] == [72 + 8, 40 + 40, 0]
    root = rc.credits_tree(credits).root
    assert rc.verify_path(root, rc.credit_leaf(1, credits[1]), 1, credits_proof(credits, 1, root), 4)


def test_credits_refuse_a_gap_or_a_bitmap_list_of_another_length():
    with pytest.raises(RootFlowError, match="round 0"):
        cumulative_credits({1: {"acceptedBitmaps": [1]}}, [4], 1)
    with pytest.raises(RootFlowError, match="2 accepted and 2 unendorsed bitmaps for 3"):
        cumulative_credits({0: {"acceptedBitmaps": [1, 1]}}, [4], 3)
    with pytest.raises(RootFlowError, match="2 accepted and 1 unendorsed bitmaps for 2"):
        cumulative_credits({0: {"acceptedBitmaps": [1, 1], "unendorsedBitmaps": [1]}}, [4], 2)
