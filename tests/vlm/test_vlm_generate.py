"""The shared decoding loop: logit rules on crafted logits, batching with a fake runtime."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mineru_cli.vlm.generate import DEFAULT_MAX_NEW_TOKENS, Generation, NGramBan, _Sequence, generate, token_cap
from mineru_cli.vlm.protocol.profiles import SamplingParams

V = 40
STOP = 0


class FakeRuntime:
    """Logits are a pure function of (prompt, tokens so far): batching cannot change them."""

    def __init__(self):
        self.rows: list[list[int]] = []
        self.calls: list[tuple] = []

    @staticmethod
    def logits_for(history: list[int]) -> np.ndarray:
        seed = hash(tuple(history)) % (2**32)
        logits = np.random.default_rng(seed).normal(size=V).astype(np.float32)
        logits[STOP] -= 2.5  # stop now and then, not at once
        return logits

    def prefill(self, inputs):
        self.rows = [list(p) for p in inputs]
        self.calls.append(("prefill", len(inputs)))
        return np.stack([self.logits_for(r) for r in self.rows])

    def step(self, token_ids):
        assert token_ids.shape == (len(self.rows),)
        for row, token in zip(self.rows, token_ids.tolist()):
            row.append(token)
        self.calls.append(("step", len(self.rows)))
        return np.stack([self.logits_for(r) for r in self.rows])

    def retain(self, rows):
        self.rows = [self.rows[i] for i in rows]
        self.calls.append(("retain", tuple(rows)))


PARAMS = st.builds(
    SamplingParams,
    presence_penalty=st.sampled_from([0.0, 1.0, 0.3]),
    frequency_penalty=st.sampled_from([0.0, 0.05, 0.005, 0.7]),
    no_repeat_ngram_size=st.sampled_from([0, 2, 3, 5, 100]),
    max_new_tokens=st.sampled_from([None, 1, 7, 30]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(1, V - 1), min_size=1, max_size=5), PARAMS), min_size=1, max_size=5))
def test_batched_equals_one_at_a_time(cases):
    prompts = [p for p, _ in cases]
    params = [sp for _, sp in cases]
    batched = generate(FakeRuntime(), prompts, params, [STOP], max_new_tokens=60)
    single = [generate(FakeRuntime(), [p], [sp], [STOP], max_new_tokens=60)[0] for p, sp in cases]
    assert batched == single
    for g, sp in zip(batched, params):
        cap = sp.max_new_tokens or 60
        assert len(g.tokens) <= cap and STOP not in g.tokens
        assert g.truncated == (g.finish_reason == "length") and (g.truncated or g.stop_token == STOP)
        if g.truncated:
            assert len(g.tokens) == cap


def test_stop_and_cap_and_retain():
    class Scripted:
        def __init__(self):
            self.live = [0, 1, 2]
            self.t = 0
            self.retained = []

        def _logits(self):
            # row 0 says 5 then stops, row 1 never stops, row 2 stops at once
            out = []
            for r in self.live:
                x = np.zeros(V, dtype=np.float32)
                x[{0: 5 if self.t == 0 else STOP, 1: 7 + self.t % 3, 2: STOP}[r]] = 1
                out.append(x)
            return np.stack(out)

        def prefill(self, inputs):
            return self._logits()

        def step(self, token_ids):
            self.t += 1
            return self._logits()

        def retain(self, rows):
            self.retained.append(list(rows))
            self.live = [self.live[i] for i in rows]

    rt = Scripted()
    out = generate(rt, [[1], [1], [1]], SamplingParams(no_repeat_ngram_size=0), [STOP, 39], max_new_tokens=4)
    assert out[0] == Generation([5], "stop", STOP)
    assert out[1] == Generation([7, 8, 9, 7], "length") and out[1].truncated
    assert out[2] == Generation([], "stop", STOP)
    assert rt.retained == [[0, 1], [1]]


def test_penalties_change_exactly_generated_tokens():
    logits = np.linspace(-1, 1, V).astype(np.float32)
    seq = _Sequence(
        SamplingParams(presence_penalty=1.0, frequency_penalty=0.05, no_repeat_ngram_size=0), max_new_tokens=10
    )
    np.testing.assert_array_equal(seq.adjust(logits), logits)  # nothing generated yet
    for token in [3, 3, 3, 9, 17]:
        seq.append(token)
    out = seq.adjust(logits)
    expected = logits.copy()
    for token, count in {3: 3, 9: 1, 17: 1}.items():
        expected[token] = logits[token] - np.float32(0.05) * count - np.float32(1.0)
    np.testing.assert_array_equal(out, expected)
    assert out is not logits and logits[3] == np.linspace(-1, 1, V).astype(np.float32)[3]


def test_zero_penalties_leave_logits_alone():
    logits = np.arange(V, dtype=np.float32)
    seq = _Sequence(SamplingParams(no_repeat_ngram_size=0), max_new_tokens=10)
    for token in [1, 2, 2]:
        seq.append(token)
    np.testing.assert_array_equal(seq.adjust(logits), logits)


def test_ngram_ban_bans_exactly_the_completing_token():
    logits = np.zeros(V, dtype=np.float32)
    seq = _Sequence(SamplingParams(no_repeat_ngram_size=3), max_new_tokens=100)
    for token in [1, 2, 3, 4, 1, 2]:
        seq.append(token)
    out = seq.adjust(logits)
    assert np.isneginf(out[3]) and np.isfinite(np.delete(out, 3)).all()
    seq.append(5)  # "2 5" starts no seen 3-gram
    assert np.isfinite(seq.adjust(logits)).all()


def test_ngram_ban_prompt_not_counted():
    """The prompt is never seen by the loop: only generated tokens form n-grams."""
    rt = FakeRuntime()
    out = generate(rt, [[5, 6, 7, 5, 6]], SamplingParams(no_repeat_ngram_size=3), [STOP], 1)
    assert out[0].tokens == [int(np.argmax(FakeRuntime.logits_for([5, 6, 7, 5, 6])))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=60), st.sampled_from([2, 3, 4, 7]))
def test_ngram_ban_matches_mineru_vllm_processor(tokens, n):
    ngram = pytest.importorskip("mineru_vl_utils.logits_processor.vllm_v0_no_repeat_ngram")
    theirs = ngram.VllmV0NoRepeatNGramLogitsProcessor(n)
    ours = NGramBan(n)
    for i in range(len(tokens) + 1):
        expected = theirs(tokens[:i], np.zeros(5, dtype=np.float32))
        got = np.zeros(5, dtype=np.float32)
        got[list(ours.banned())] = -np.inf
        np.testing.assert_array_equal(got, expected)
        if i < len(tokens):
            ours.add(tokens[i])


def test_argument_checks():
    with pytest.raises(ValueError):
        generate(FakeRuntime(), [[1], [2]], [SamplingParams()], [STOP])
    with pytest.raises(ValueError):
        generate(FakeRuntime(), [[1]], SamplingParams(max_new_tokens=0), [STOP])
    assert generate(FakeRuntime(), [], SamplingParams(), [STOP]) == []


class NeverStops(FakeRuntime):
    @staticmethod
    def logits_for(history: list[int]) -> np.ndarray:
        logits = FakeRuntime.logits_for(history)
        logits[STOP] = -1e9
        return logits


def test_the_cap_is_the_context_minus_the_prompt():
    """MinerU's runs stop where the context is full, not at a fixed count: each sequence may
    take context - prompt tokens; a smaller cap (the caller's, then the params') wins."""
    prompts = [[1] * 3, [2] * 10, [3] * 19]
    free = SamplingParams(no_repeat_ngram_size=0)
    out = generate(NeverStops(), prompts, free, [STOP], context_length=24)
    assert [len(g.tokens) for g in out] == [21, 14, 5] and all(g.truncated for g in out)
    out = generate(NeverStops(), prompts, free, [STOP], max_new_tokens=8, context_length=24)
    assert [len(g.tokens) for g in out] == [8, 8, 5]
    capped = SamplingParams(no_repeat_ngram_size=0, max_new_tokens=2)
    assert [len(g.tokens) for g in generate(NeverStops(), prompts, capped, [STOP], context_length=24)] == [2, 2, 2]
    with pytest.raises(ValueError, match="fills the context"):
        generate(NeverStops(), [[1] * 24], free, [STOP], context_length=24)
    # neither known: the old safety cap
    assert token_cap(None, 5, None) == DEFAULT_MAX_NEW_TOKENS == 8192
