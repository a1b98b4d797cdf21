"""The shared system prompt: our own wording of the five qualities, and how it is applied."""

from __future__ import annotations

import pytest

from reward.healthbench.schema import Message
from training.system_prompt import SYSTEM_PROMPT, apply_system_prompt, system_prompt_id


def test_the_prompt_covers_the_five_qualities():
    text = SYSTEM_PROMPT.lower()
    for word in ("communicat", "instruction", "accura", "context", "complete", "emergency"):
        assert word in text


def test_ours_prepends_a_system_turn_and_none_leaves_the_conversation_alone():
    conv = [{"role": "user", "content": "hi"}]
    assert apply_system_prompt(conv, "ours") == [{"role": "system", "content": SYSTEM_PROMPT}, *conv]
    assert apply_system_prompt(conv, "none") == conv
    assert conv == [{"role": "user", "content": "hi"}]  # the input is not modified


def test_an_existing_system_turn_is_kept_after_ours():
    conv = [Message(role="system", content="You help a nurse."), Message(role="user", content="hi")]
    out = apply_system_prompt(conv, "ours")
    assert len(out) == 2 and out[0]["role"] == "system"
    assert out[0]["content"] == SYSTEM_PROMPT + "\n\nYou help a nurse."


def test_a_file_gives_the_text_and_an_id(tmp_path):
    f = tmp_path / "sp.txt"
    f.write_text("Be brief.\n")
    assert apply_system_prompt([{"role": "user", "content": "hi"}], str(f))[0]["content"] == "Be brief."
    ident = system_prompt_id(str(f))
    assert ident["mode"] == "file:sp.txt" and len(ident["sha256"]) == 16
    assert system_prompt_id("none") == {"mode": "none", "sha256": None}


def test_unknown_mode_is_an_error():
    with pytest.raises(FileNotFoundError, match="neither"):
        apply_system_prompt([{"role": "user", "content": "hi"}], "oursss")
