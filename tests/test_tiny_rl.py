"""examples/tiny_rl: the tokenizer, the model's sampling and training log probabilities, the
trainer's loss, the task and the learning-curve area (skipped without torch)."""

import asyncio
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "tiny_rl"))

from methods import Learner, Method, Point, RunConfig, Setup, area, default_methods  # noqa: E402
from model import ModelConfig, Sampler, init_model, token_logprobs  # noqa: E402
from task import BOXED, Codec, Problem, build_tokenizer, correct, problems  # noqa: E402
from trainer import Row, ppo_loss  # noqa: E402


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    return Codec(build_tokenizer(tmp_path_factory.mktemp("tok")))


def test_solution_is_the_column_sums_then_the_boxed_answer():
    assert Problem(347, 285).solution() == "7+5+0=12,4+8+1=13,3+2+1=6,\\boxed{632}"
    assert Problem(95, 7).solution() == "5+7+0=12,9+0+1=10,\\boxed{102}"
    assert correct("1+1+0=2,\\boxed{3},\\boxed{632}", Problem(347, 285))
    assert not correct("7+5+0=12,\\boxed{632", Problem(347, 285))
    assert not correct("632", Problem(347, 285))


def test_problems_are_distinct_and_leave_out_the_excluded():
    held = problems(1, 50, 2)
    train = problems(0, 200, 2, exclude=held)
    assert len(set(train)) == 200 and not set(train) & set(held)
    assert all(10 <= p.a <= 99 and 10 <= p.b <= 99 for p in train)
    assert problems(0, 200, 2, exclude=held) == train
    with pytest.raises(ValueError, match="more than exist"):
        problems(0, 100, 1)


def test_tokenizer_round_trips_and_focus_go_reads_it_alike(codec, tmp_path):
    text = Problem(347, 285).prompt + "=" + Problem(347, 285).solution()
    ids = codec.encode(text)
    assert codec.decode(ids) == text
    assert codec.encode(BOXED) == [2] and len(ids) == len(text) - len(BOXED) + 1
    assert codec.decode(ids + [codec.eos]) == text  # special tokens are skipped
    from focus_go.backends import PolicyFormat

    fmt = PolicyFormat.resolve(str(build_tokenizer(tmp_path / "tok")), profile="token_chunk")
    try:
        prompt = fmt.prepare([{"role": "user", "content": "347+285"}])
        assert list(prompt.tokens) == codec.prompt_ids(Problem(347, 285))
        assert fmt.codec.decode(ids) == text
    finally:
        fmt.codec.tokenizer.close()


def _model(codec, seed=3):
    model = init_model(ModelConfig(vocab=codec.vocab_size, d=32, layers=2, heads=2, max_len=48), seed)
    model.eval()
    return model


def test_sampling_logprobs_equal_training_logprobs(codec):
    model = _model(codec)
    sampler = Sampler(model, codec.eos, codec.pad)
    prefixes = [codec.prompt_ids(Problem(12, 34)), codec.prompt_ids(Problem(5, 678)) + codec.encode("8+5")]
    results = sampler.generate(prefixes, [12, 7], [11, 12])
    with torch.no_grad():
        for prefix, (out, lps, reason) in zip(prefixes, results):
            assert reason in ("stop", "length") and 1 <= len(out) <= 12
            assert (reason == "stop") == (out[-1] == codec.eos)
            train = token_logprobs(model, [prefix + out], codec.pad)[0, len(prefix) - 1:].tolist()
            assert train == pytest.approx(lps, abs=1e-5)
    assert sampler.generate(prefixes, [12, 7], [11, 12]) == results  # the seeds decide the draws
    alone = sampler.generate(prefixes[:1], [12], [11])[0]  # whatever shares the batch (up to float rounding)
    assert (alone[0], alone[2]) == (results[0][0], results[0][2]) and alone[1] == pytest.approx(results[0][1], abs=1e-5)


def test_sampler_refuses_settings_it_cannot_honour(codec):
    from focus_go.backends import SamplingParams

    sampler = Sampler(_model(codec), codec.eos, codec.pad)
    with pytest.raises(ValueError, match="temperature"):
        asyncio.run(sampler.complete([3, 4], SamplingParams(temperature=0.7, max_tokens=4, seed=1)))


def test_ppo_loss_equals_the_hand_computed_value(codec):
    model = _model(codec)
    rows_tokens = [[5, 6, 7, 8, 9], [5, 10, 11]]
    with torch.no_grad():
        new = [token_logprobs(model, [t], codec.pad)[0].tolist() for t in rows_tokens]
    # Row 0: tokens 3 and 4 generated, A = +1.5; row 1: token 2 generated, A = -2.
    # The sampler's log probabilities sit 0.5 below (r = e^0.5 > 1.2: clipped for A > 0) or
    # 0.1 above (r = e^-0.1, inside the clip range).
    old0 = [0.0, 0.0, 0.0, new[0][2] - 0.5, new[0][3] + 0.1]
    old1 = [0.0, 0.0, new[1][1] - 0.5]
    rows = [Row(tuple(rows_tokens[0]), (False, False, False, True, True), tuple(old0), 1.5),
            Row(tuple(rows_tokens[1]), (False, False, True), tuple(old1), -2.0)]
    clip, rollouts = 0.2, 3
    expected = 0.0
    for ratio, adv in ((math.exp(0.5), 1.5), (math.exp(-0.1), 1.5), (math.exp(0.5), -2.0)):
        expected += min(ratio * adv, min(max(ratio, 1 - clip), 1 + clip) * adv)
    expected = -expected / rollouts
    loss = ppo_loss(model, rows, rollouts, clip, codec.pad)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()  # the clipped token carries no gradient, the others do
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in model.parameters())
    with pytest.raises(ValueError, match="rollouts"):
        ppo_loss(model, rows, 0, clip, codec.pad)


def test_area_holds_each_policy_until_the_next_update():
    pts = [Point(0, 0, 0, 0.2), Point(100, 400, 120, 0.6), Point(300, 1000, 330, float("nan"))]
    assert area(pts, "generated", 200) == pytest.approx((0.2 * 100 + 0.6 * 100) / 200)
    assert area(pts, "forward", 800) == pytest.approx((0.2 * 400 + 0.6 * 400) / 800)
    with pytest.raises(ValueError, match="covers"):
        area(pts, "generated", 400)


def test_methods_are_built_from_the_library_defaults():
    from focus_go import Selective

    sel = Selective()
    names = default_methods()
    assert names[:3] == ["selective", "rule", "free"]
    for n in (sel.warmup, sel.budget):
        assert {f"root-only:{n}", f"grpo:{n}+ds"} <= set(names)
    assert Method.parse("grpo:8+ds") == Method("grpo:8+ds", "grpo", 8, True)
    assert not Method.parse("free").learned_critic and Method.parse("root-only:4").learned_critic
    with pytest.raises(ValueError, match="unknown method"):
        Method.parse("grpo")


def test_one_update_through_the_collector_records_the_samplers_logprobs(tmp_path):
    cfg = RunConfig(digits=1, segment=4, max_segments=6, train_problems=20, held_out=10, trees_per_update=2,
                    budget_tokens=1, warm_target=0.0, model={"d": 32, "layers": 1, "heads": 2, "max_len": 48})
    setup = Setup.build(0, cfg, tmp_path)
    try:
        learner = Learner(setup, Method.parse("selective"), 1e-3)
        state, batch, forward, cached = asyncio.run(learner.tree(setup.train[0], 7, None))
        try:
            assert batch.actor and batch.stats["generated_tokens"] > 0
            assert forward >= cached >= batch.stats["generated_tokens"]
            with torch.no_grad():
                for sample in batch.actor:
                    for span in sample.spans:
                        lp = token_logprobs(learner.policy, [span.tokens], setup.codec.pad)[0].tolist()
                        got = [lp[i - 1] for i, t in enumerate(span.trainable) if t]
                        want = [x for x, t in zip(span.logprobs, span.trainable) if t]
                        assert got == pytest.approx(want, abs=1e-5)
        finally:
            state.close()
        result = asyncio.run(Learner(setup, Method.parse("grpo:4+ds"), 1e-3).run())
        assert result.updates == 1 and result.points[-1].generated >= 1
    finally:
        setup.close()


def test_held_out_success_is_measured_at_the_token_marks_only(tmp_path):
    # grpo:1 trees of one rollout (at most 24 tokens) two per update: a budget of 120 tokens
    # takes several updates, and evals=2 evaluates after the first update past 60 tokens only.
    cfg = RunConfig(digits=1, segment=4, max_segments=6, train_problems=20, held_out=4, trees_per_update=2,
                    budget_tokens=120, warm_target=0.0, evals=2, model={"d": 32, "layers": 1, "heads": 2, "max_len": 48})
    setup = Setup.build(0, cfg, tmp_path)
    try:
        result = asyncio.run(Learner(setup, Method.parse("grpo:1"), 1e-3).run())
    finally:
        setup.close()
    assert result.updates >= 3
    start, *evaluated, last = result.points
    assert start.generated == 0 and last.generated >= 120 and last.success != last.success  # the last policy: nan
    assert len(evaluated) == 1 and 60 <= evaluated[0].generated < 120 and evaluated[0].success == evaluated[0].success
    bad = Setup.build(0, replace(cfg, evals=0), tmp_path)
    try:
        with pytest.raises(ValueError, match="evals must be at least 1"):
            asyncio.run(Learner(bad, Method.parse("grpo:1"), 1e-3).run())
    finally:
        bad.close()
