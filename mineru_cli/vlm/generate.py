"""The decoding loop every runtime shares: greedy, with MinerU's vLLM logit rules.

A runtime (ONNX with a KV cache, transformers, a test fake) only turns inputs into next-token
logits; selection, penalties, the n-gram ban and stopping all live here, so every runtime
decodes the same way.

Per step and per sequence, on a float32 copy of the logits:
  1. presence/frequency penalties over the tokens generated so far (not the prompt):
     logits -= presence * (count > 0) + frequency * count
  2. no-repeat n-gram ban: a token that would complete an n-gram already present in the
     generated tokens gets -inf (vLLM logits processor of mineru-vl-utils; prompt not counted)
  3. argmax (the first index on ties)
A stop token ends the sequence (it is not part of the returned tokens); reaching the
max-new-tokens cap ends it as truncated. The cap, per sequence: its params.max_new_tokens when
set, else `max_new_tokens`, and never past the context (`context_length` minus the prompt, as
vLLM's max_model_len stops MinerU's own runs); with neither given, DEFAULT_MAX_NEW_TOKENS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, Sequence

import numpy as np

from .protocol.profiles import SamplingParams

DEFAULT_MAX_NEW_TOKENS = 8192  # the cap when neither a cap nor the context length is given


class Runtime(Protocol):
    """A model that keeps per-row decoding state (e.g. a KV cache) between calls.

    prefill(inputs) starts a batch: one element per sequence (whatever the runtime needs:
    token ids, pixel values, grids, position ids) and returns the logits for each sequence's
    next token, shape (B, V). step(token_ids) appends one token per live row, shape (B,), and
    returns (B, V). retain(rows) keeps only those rows (indices into the current batch, in
    order) for later steps: the loop calls it when sequences finish, so a KV-cache runtime can
    compact its cache and a batched runtime stops computing finished rows.
    """

    def prefill(self, inputs: Sequence[Any]) -> np.ndarray: ...

    def step(self, token_ids: np.ndarray) -> np.ndarray: ...

    def retain(self, rows: Sequence[int]) -> None: ...


@dataclass
class Generation:
    tokens: list[int]
    finish_reason: str  # "stop" (a stop token) or "length" (the cap)
    stop_token: int | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class NGramBan:
    """Tokens that would repeat an n-gram of the tokens seen so far (HF/vLLM semantics).

    n <= 0 disables the ban; n = 1 bans every token seen (HF's meaning).
    """

    def __init__(self, n: int):
        self.n = n
        self._seen: dict[tuple[int, ...], set[int]] = {}
        self._tokens: list[int] = []

    def add(self, token: int) -> None:
        self._tokens.append(token)
        if self.n > 0 and len(self._tokens) >= self.n:
            gram = self._tokens[-self.n :]
            self._seen.setdefault(tuple(gram[:-1]), set()).add(gram[-1])

    def banned(self) -> Iterable[int]:
        if self.n <= 0 or len(self._tokens) < self.n - 1:
            return ()
        prefix = tuple(self._tokens[len(self._tokens) - self.n + 1 :])
        return self._seen.get(prefix, ())


@dataclass
class _Sequence:
    params: SamplingParams
    max_new_tokens: int
    tokens: list[int] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    ban: NGramBan = field(init=False)  # from params.no_repeat_ngram_size

    def __post_init__(self) -> None:
        self.ban = NGramBan(self.params.no_repeat_ngram_size)

    def adjust(self, logits: np.ndarray) -> np.ndarray:
        """The logits after penalties and the n-gram ban (a new float32 array)."""
        logits = np.array(logits, dtype=np.float32, copy=True)
        p = self.params
        if self.counts and (p.presence_penalty or p.frequency_penalty):
            ids = np.fromiter(self.counts.keys(), dtype=np.int64, count=len(self.counts))
            counts = np.fromiter(self.counts.values(), dtype=np.float32, count=len(self.counts))
            # two subtractions in vLLM's order, so float32 rounding matches it
            logits[ids] -= np.float32(p.frequency_penalty) * counts
            logits[ids] -= np.float32(p.presence_penalty)
        banned = list(self.ban.banned())
        if banned:
            logits[banned] = -np.inf
        return logits

    def select(self, logits: np.ndarray) -> int:
        return int(np.argmax(self.adjust(logits)))

    def append(self, token: int) -> None:
        self.tokens.append(token)
        self.counts[token] = self.counts.get(token, 0) + 1
        self.ban.add(token)


def token_cap(max_new_tokens: int | None, prompt_tokens: int, context_length: int | None) -> int:
    """New tokens a sequence may take: the cap, and no more than the context leaves after the
    prompt (DEFAULT_MAX_NEW_TOKENS when neither is known)."""
    caps = [int(max_new_tokens)] if max_new_tokens is not None else []
    if context_length is not None:
        caps.append(int(context_length) - int(prompt_tokens))
    return min(caps) if caps else DEFAULT_MAX_NEW_TOKENS


def generate(
    runtime: Runtime,
    inputs: Sequence[Any],
    params: Sequence[SamplingParams] | SamplingParams,
    stop_token_ids: Iterable[int],
    max_new_tokens: int | None = None,
    context_length: int | None = None,
) -> list[Generation]:
    """Decode a batch to the end; results are in input order and do not depend on batching.

    params: one SamplingParams per input, or one for all. A sequence's own
    params.max_new_tokens, when set, replaces `max_new_tokens` (the caller's cap; None: none).
    context_length: the model's context (prompt + answer tokens); a sequence stops as truncated
    when it fills it. stop_token_ids: read from the tokenizer by the caller (e.g. <|im_end|>).
    """
    if isinstance(params, SamplingParams):
        params = [params] * len(inputs)
    if len(params) != len(inputs):
        raise ValueError(f"{len(params)} sampling params for {len(inputs)} inputs")
    if not inputs:
        return []
    stops = frozenset(int(t) for t in stop_token_ids)
    seqs = [
        _Sequence(
            p,
            token_cap(
                p.max_new_tokens if p.max_new_tokens is not None else max_new_tokens,
                len(x) if context_length else 0,
                context_length,
            ),
        )
        for p, x in zip(params, inputs)
    ]
    if any(s.max_new_tokens < 1 for s in seqs):
        raise ValueError("max_new_tokens must be at least 1 (or the prompt fills the context)")
    results: list[Generation | None] = [None] * len(inputs)

    logits = np.asarray(runtime.prefill(inputs))
    live = list(range(len(inputs)))  # input index of each runtime row
    while True:
        keep, next_tokens = [], []
        for row, idx in enumerate(live):
            seq = seqs[idx]
            token = seq.select(logits[row])
            if token in stops:
                results[idx] = Generation(seq.tokens, "stop", token)
                continue
            seq.append(token)
            if len(seq.tokens) >= seq.max_new_tokens:
                results[idx] = Generation(seq.tokens, "length")
                continue
            keep.append(row)
            next_tokens.append(token)
        if not keep:
            break
        if len(keep) < len(live):
            runtime.retain(keep)
            live = [live[row] for row in keep]
        logits = np.asarray(runtime.step(np.asarray(next_tokens, dtype=np.int64)))
    return results  # type: ignore[return-value]
