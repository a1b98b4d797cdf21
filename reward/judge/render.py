"""Turn a template and an item into the exact token ids the judge model sees.

Both backends (vLLM over HTTP and in-process transformers) send these ids, so they grade the
very same prompt. Rendering to ids on our side is also what makes the prompt safe: trusted
pieces (the chat template's framing, our instructions) are tokenised with special tokens
parsed, while untrusted pieces (conversation, response, criterion) are tokenised with special
tokens split into plain text, so a completion containing ``<|im_end|>`` cannot close its turn.
Pieces are tokenised separately and concatenated, so every criterion of one rollout shares the
same prefix ids and hits the server's prefix cache.

Block alignment (``block_size``): a prefix cache reuses whole KV blocks only, so the partial last
block of a shared prefix is recomputed by every request that shares it. The renderer pads the
ids before the first response-level value (``response``, ``conversation_with_response``) and
before the first criterion-level value (``criterion``, ``points``, ``rubric_item``) to a multiple
of ``block_size`` with a neutral filler (repeats of one whitespace token, a run of blank lines
in the decoded prompt; ``.`` or ``-`` for a tokenizer without a one-token whitespace). The filler goes at the last blank line of the template text before that value
(after ``</response>``, before ``Criterion:``), so the template's own words around the value stay
as they are. The ids then depend on the block size: it is part of the judge's cache key (see
``Judge.__init__``), and both backends must use the same setting to see the same ids.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from functools import lru_cache

from reward.judge.templates import Template
from reward.judge.types import JudgeItem

# Answer pairs tried in order; the first whose first tokens differ is used. Where a word is
# several tokens, the first token decides it under the yes/no constraint, so p_yes is read on
# the first tokens (documented in the README).
ANSWER_PAIRS = (("yes", "no"), ("Yes", "No"), ("true", "false"), ("Y", "N"))

# Where ids are block-aligned: before the first value of each level (see the module docstring).
ALIGN_LEVELS = ({"response", "conversation_with_response"}, {"criterion", "points", "rubric_item"})
FILLER_TEXTS = ("\n", " ", ".", "-")  # the first that is one token is the filler

_SYS, _USR = "\x00RT_SYSTEM\x00", "\x00RT_USER\x00"


@dataclass(frozen=True)
class Framing:
    """The chat template's text around the system and user messages."""

    before_system: str
    between: str  # after the system text, before the user text
    after_user: str  # closes the user turn and opens the assistant's
    system_supported: bool


def chat_framing(tokenizer) -> Framing:
    """Read the chat template's framing by rendering markers and cutting around them."""
    kwargs = {"tokenize": False, "add_generation_prompt": True, "enable_thinking": False}
    if getattr(tokenizer, "chat_template", None) is None:
        return Framing("System: ", "\n\nUser: ", "\n\nAssistant: ", True)
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "system", "content": _SYS}, {"role": "user", "content": _USR}], **kwargs)
        a, rest = text.split(_SYS, 1)
        b, c = rest.split(_USR, 1)
        return Framing(a, b, c, True)
    except Exception:  # templates that refuse a system turn: instructions go into the user turn
        text = tokenizer.apply_chat_template([{"role": "user", "content": _USR}], **kwargs)
        a, c = text.split(_USR, 1)
        return Framing(a, "", c, False)


_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def tokenizer_lock(tokenizer) -> threading.Lock:
    """The one lock of a tokenizer object (a new one for an object that takes no weak reference)."""
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(tokenizer)
            if lock is None:
                lock = _LOCKS[tokenizer] = threading.Lock()
            return lock
        except TypeError:  # not weakly referenceable, or unhashable
            return threading.Lock()


class PromptRenderer:
    """Renders judge prompts to token ids for one tokenizer and knows its answer tokens."""

    def __init__(self, tokenizer, *, block_size: int = 0) -> None:
        self.tokenizer = tokenizer
        # A fast (Rust) tokenizer refuses a second borrow while one encode runs ("Already borrowed"),
        # and split_special_tokens switches a flag on it: a pool's start-up probes (a thread per
        # endpoint) and the identity watch render beside grading, so every call goes one at a time,
        # through one lock per tokenizer object (two renderers may share a tokenizer).
        self._lock = tokenizer_lock(tokenizer)
        self.block_size = int(block_size or 0)
        self.framing = chat_framing(tokenizer)
        self.yes_word, self.no_word, self.yes_id, self.no_id = self._answer_tokens()
        self._trusted = lru_cache(maxsize=4096)(self._encode_trusted)
        # Every criterion of a rollout repeats its conversation and response: tokenise them once,
        # not once per criterion (16 rollouts x 182 leaves of 1,800-token prompts rendered in
        # 10.7 s on 2 CPU cores, blocking the event loop; 0.23 s with this cache). Bounded, as
        # long texts hold many ids.
        self._untrusted = lru_cache(maxsize=1024)(self._encode_untrusted)
        self.filler_id = self._filler() if self.block_size else None

    def _filler(self) -> int:
        for text in FILLER_TEXTS:
            with self._lock:
                ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1:
                return ids[0]
        raise ValueError("the judge tokenizer has no one-token whitespace filler; set prefix_block=0")

    def _answer_tokens(self) -> tuple[str, str, int, int]:
        for yes, no in ANSWER_PAIRS:
            with self._lock:
                y = self.tokenizer.encode(yes, add_special_tokens=False)
                n = self.tokenizer.encode(no, add_special_tokens=False)
            if y and n and y[0] != n[0]:
                return yes, no, y[0], n[0]
        raise ValueError("the judge tokenizer gives no yes/no answer pair with distinct first tokens")

    def _encode_trusted(self, text: str) -> tuple[int, ...]:
        with self._lock:
            return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _encode_untrusted(self, text: str) -> tuple[int, ...]:
        with self._lock:
            return tuple(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def encode_untrusted(self, text: str) -> list[int]:
        """Tokenise graded text so that special-token strings in it stay plain text."""
        return list(self._untrusted(text))

    def render_ids(self, template: Template, item: JudgeItem) -> list[int]:
        f = self.framing
        ids: list[int] = []
        if f.system_supported:
            ids += self._trusted(f.before_system) + self._trusted(template.system) + self._trusted(f.between)
        else:
            ids += self._trusted(f.before_system) + self._trusted(template.system + "\n\n")
        pieces = template.named_pieces(item)
        if not self.block_size:
            for text, trusted, _ in pieces:
                ids += self._trusted(text) if trusted else self._untrusted(text)
            ids += self._trusted(f.after_user)
            return ids
        pending = [set(level) for level in ALIGN_LEVELS]
        for k, (text, trusted, _) in enumerate(pieces):
            nxt = pieces[k + 1][2] if k + 1 < len(pieces) else None
            level = next((lv for lv in pending if nxt in lv), None)
            if not trusted:
                ids += self._untrusted(text)
            elif level is None:
                ids += self._trusted(text)
            else:  # the template text before a level's first value: filler at its last blank line
                pending.remove(level)
                cut = max(text.rfind("\n\n"), 0)
                head, tail = self._trusted(text[:cut]), self._trusted(text[cut:])
                need = -(len(ids) + len(head) + len(tail)) % self.block_size
                ids += head + (self.filler_id,) * need + tail
        ids += self._trusted(f.after_user)
        return ids

    def prefix_key(self, template: Template, item: JudgeItem) -> tuple:
        """Items with the same key share every prompt token before the criterion."""
        return (template.version, item.conversation, item.response)


def load_tokenizer(name_or_path: str):
    """Load a transformers tokenizer (lazily imported: only judge backends need it)."""
    from reward._optional import require, require_model

    require_model(name_or_path, "the judge's tokenizer")
    transformers = require("transformers", "the judge prompt renderer")
    return transformers.AutoTokenizer.from_pretrained(name_or_path)
