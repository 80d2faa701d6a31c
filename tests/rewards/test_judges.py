"""GAR judges: the Referee's failure paths, cache and both orders; the arithmetic judge; the
OpenAI-compatible HTTP judge against a server on 127.0.0.1 (timeouts, retries, bad answers, the
concurrency limit); the local Hugging Face judge on a tiny model built here."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from align_kit.core.errors import ConfigError
from align_kit.rewards.judges import (
    ArithmeticJudge,
    HFJudge,
    HttpJudge,
    Referee,
    label_token_ids,
    parse_verdict,
    probability_from_logprobs,
)

# ------------------------------------------------------------------------------------------- referee


class Recorder:
    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def __call__(self, prompt, a, b):
        self.calls.append((a, b))
        return self.answer(a, b)


def test_referee_skips_and_counts_a_judge_that_raises():
    def judge(a, b):
        if b == "boom":
            raise RuntimeError("judge crashed")
        return 0.25

    referee = Referee(Recorder(judge))
    assert referee.many("p", [("x", "y"), ("x", "boom")]) == [0.25, None]
    assert (referee.counts.calls, referee.counts.failures, referee.counts.skipped) == (2, 1, 1)


@pytest.mark.parametrize("answer", [1.5, -0.1, float("nan"), "0.5", None, True])
def test_referee_counts_an_answer_that_is_not_a_probability_as_a_failure(answer):
    referee = Referee(lambda p, a, b: answer)
    assert referee("p", "x", "y") is None
    assert referee.counts.failures == 1


def test_referee_accepts_numpy_scalars():
    import numpy as np

    assert Referee(lambda p, a, b: np.float32(0.25))("p", "x", "y") == 0.25


def test_referee_timeout_abandons_a_slow_judge():
    release, returned = threading.Event(), []

    def slow(prompt, a, b):
        release.wait(600)  # until the test lets it go
        returned.append(True)
        return 1.0

    referee = Referee(slow, timeout_s=0.2)
    assert referee("p", "x", "y") is None
    assert returned == []  # the referee gave up on the judge, which was still working
    assert referee.counts.failures == 1 and referee.counts.skipped == 1
    release.set()


def test_referee_raises_a_config_error_from_the_judge():
    def misconfigured(prompt, a, b):
        raise ConfigError("reward.arena.judge.choices: bad")

    with pytest.raises(ConfigError):
        Referee(misconfigured)("p", "x", "y")


def test_referee_identical_texts_tie_without_a_call():
    judge = Recorder(lambda a, b: 1.0)
    assert Referee(judge)("p", "same", "same") == 0.5
    assert judge.calls == []


def test_referee_caches_a_pair_in_either_order_until_the_next_step():
    judge = Recorder(lambda a, b: 0.75)
    referee = Referee(judge)
    assert referee("p", "x", "y") == 0.75
    assert referee("p", "y", "x") == 0.25  # read from the cache: 1 - 0.75
    assert referee("q", "x", "y") == 0.75  # another prompt is another match
    assert len(judge.calls) == 2 and referee.counts.cache_hits == 1
    referee.new_step()
    referee("p", "x", "y")
    assert len(judge.calls) == 3


def test_referee_judges_the_same_texts_once_per_round_in_either_order():
    judge = Recorder(lambda a, b: 0.75)
    referee = Referee(judge)
    assert referee.many("p", [("x", "y"), ("y", "x"), ("x", "y")]) == [0.75, 0.25, 0.75]
    assert judge.calls == [("x", "y")]


def test_referee_both_orders_averages_out_a_position_bias():
    """A judge that favours the first slot by 0.2: p(x, y) = 0.6 + 0.2 = 0.8, p(y, x) = 0.4 + 0.2 =
    0.6. Both orders: (0.8 + (1 - 0.6)) / 2 = 0.6, the unbiased value; two calls per match."""
    quality = {"x": 0.6, "y": 0.4}
    judge = Recorder(lambda a, b: quality[a] + 0.2)
    referee = Referee(judge, both_orders=True)
    assert referee("p", "x", "y") == pytest.approx(0.6)
    assert judge.calls == [("x", "y"), ("y", "x")]
    assert referee.counts.calls == 2


def test_referee_both_orders_keeps_the_order_that_answered():
    def judge(a, b):
        if a == "y":
            raise TimeoutError("slow")
        return 0.7

    referee = Referee(Recorder(judge), both_orders=True)
    assert referee("p", "x", "y") == pytest.approx(0.7)
    assert (referee.counts.failures, referee.counts.skipped) == (1, 0)


# ------------------------------------------------------------------------------------------- parsers


def test_arithmetic_judge_by_hand():
    judge = ArithmeticJudge()
    assert judge("37+45=", "<think>37+40=77,77+5=82</think>82", "83") == 1.0  # 0 away against 1
    assert judge("50-8=", "41", "43") == 0.5  # both 1 away from 42
    assert judge("50-8=", "junk", "0") == 0.0  # not a number: infinitely far
    with pytest.raises(ValueError, match="x\\+y="):
        judge("Write a poem.", "a", "b")


def test_parse_verdict():
    assert parse_verdict(" A") == 1.0
    assert parse_verdict("b.") == 0.0
    assert parse_verdict("Tie") == 0.5
    assert parse_verdict("0.25") == 0.25
    assert parse_verdict("first", choices=("first", "second")) == 1.0
    with pytest.raises(ValueError, match="verdict"):
        parse_verdict("maybe")


def test_probability_from_logprobs_by_hand():
    # P(A) 0.6, P(B) 0.2 -> 0.6 / 0.8 = 0.75; " A" and "A" are the same label.
    table = {"A": math.log(0.4), " A": math.log(0.2), "B": math.log(0.2), "C": math.log(0.1)}
    assert probability_from_logprobs(table, ["A", "B"]) == pytest.approx(0.75)
    assert probability_from_logprobs({"A": -0.1}, ["A", "B"]) == 1.0
    assert probability_from_logprobs({"C": -0.1}, ["A", "B"]) is None


# -------------------------------------------------------------------------------------- HTTP judge


class JudgeServer:
    """An OpenAI-compatible stub on 127.0.0.1: `reply(path, body)` -> (status, payload or raw bytes), after
    `delay_s`, or, with `together` > 1, once that many requests are in flight."""

    def __init__(self, reply, delay_s: float = 0.0, together: int = 1):
        self.reply, self.delay_s = reply, delay_s
        self.together = threading.Barrier(together) if together > 1 else None
        self.requests: list[tuple[str, dict]] = []
        self.in_flight = self.max_in_flight = self.answered = 0
        self.closing = threading.Event()  # ends every delay: a held answer never outlives its test
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append((self.path, body))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                counted = True
                try:
                    server.closing.wait(server.delay_s)
                    if server.together is not None:
                        server.together.wait(timeout=600)
                    status, payload = server.reply(self.path, body)
                    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                    # Out of flight before the answer is sent: the client frees its slot only once it has read the
                    # answer, so the server's count never exceeds the client's (counting until this thread ends
                    # would overlap the client's next request whenever the machine is slow to schedule it).
                    with server.lock:
                        server.answered += 1
                        server.in_flight -= 1
                    counted = False
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError, threading.BrokenBarrierError):
                    pass  # the client gave up (a timeout test), or the test ended
                finally:
                    if counted:
                        with server.lock:
                            server.in_flight -= 1

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.closing.set()
        if self.together is not None:
            self.together.abort()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(reply, delay_s=0.0, together=1):
        servers.append(JudgeServer(reply, delay_s, together))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def chat_answer(text, top=None):
    choice = {"index": 0, "message": {"role": "assistant", "content": text}}
    if top is not None:
        entries = [{"token": t, "logprob": lp} for t, lp in top.items()]
        choice["logprobs"] = {"content": [{"token": text, "logprob": -0.1, "top_logprobs": entries}]}
    return {"choices": [choice]}


def http_judge(url, **kwargs) -> HttpJudge:
    judge = HttpJudge(base_url=url, **{"backoff_s": 0.0, "timeout_s": 5.0, **kwargs})
    judge.group = "reward.arena.judge"
    judge.validate()
    return judge


def test_http_chat_judge_reads_the_label_log_probs(serve):
    # P(A) = 0.3, P(B) = 0.1 -> 0.75.
    server = serve(lambda path, body: (200, chat_answer("A", {"A": math.log(0.3), "B": math.log(0.1)})))
    judge = http_judge(server.url, template="Q:{prompt} A:{a} B:{b}", model="judge-model", extra_body={"seed": 3})
    assert judge("2+2=", "4", "5") == pytest.approx(0.75)
    path, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "Q:2+2= A:4 B:5"}]
    assert body["model"] == "judge-model" and body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["seed"] == 3 and body["max_tokens"] == 1 and body["temperature"] == 0.0


def test_http_completions_judge_falls_back_to_the_text(serve):
    answer = {"choices": [{"index": 0, "text": " B", "logprobs": None}]}
    server = serve(lambda path, body: (200, answer))
    judge = http_judge(server.url, endpoint="completions", top_logprobs=0, template="{prompt}|{a}|{b}")
    assert judge("p", "x", "y") == 0.0
    path, body = server.requests[0]
    assert path == "/v1/completions" and body["prompt"] == "p|x|y" and "logprobs" not in body


def test_http_judge_retries_server_errors_and_counts_them(serve):
    answers = iter([(503, {"error": "busy"}), (500, {"error": "oops"}), (200, chat_answer("tie"))])
    server = serve(lambda path, body: next(answers))
    judge = http_judge(server.url, retries=2, top_logprobs=0)
    referee = Referee(judge)
    assert referee("p", "x", "y") == 0.5
    assert len(server.requests) == 3 and judge.retries_made == 2
    assert referee.totals().retries == 2 and referee.counts.failures == 0


def test_http_judge_gives_up_after_its_retries(serve):
    server = serve(lambda path, body: (500, {"error": "down"}))
    judge = http_judge(server.url, retries=1)
    referee = Referee(judge)
    assert referee("p", "x", "y") is None
    assert len(server.requests) == 2 and judge.retries_made == 1  # the first try and one retry
    assert referee.counts.failures == 1 and referee.counts.skipped == 1


def test_http_judge_does_not_retry_a_client_error(serve):
    server = serve(lambda path, body: (400, {"error": "bad request"}))
    referee = Referee(http_judge(server.url, retries=3))
    assert referee("p", "x", "y") is None
    assert len(server.requests) == 1 and referee.counts.failures == 1


@pytest.mark.parametrize(
    "payload",
    [b"<html>not json</html>", {"choices": []}, {"unexpected": 1}, chat_answer("I cannot decide")],
    ids=["not-json", "no-choices", "wrong-shape", "no-verdict"],
)
def test_http_judge_bad_answer_is_a_failure_without_retry(serve, payload):
    server = serve(lambda path, body: (200, payload))
    referee = Referee(http_judge(server.url, retries=3, top_logprobs=0))
    assert referee("p", "x", "y") is None
    assert len(server.requests) == 1 and referee.counts.failures == 1


def test_http_judge_timeout_is_retried_then_skipped(serve):
    server = serve(lambda path, body: (200, chat_answer("A")), delay_s=600)  # answers when the test ends
    judge = http_judge(server.url, timeout_s=0.2, retries=1)
    referee = Referee(judge)
    assert referee("p", "x", "y") is None
    assert server.answered == 0  # two attempts of 0.2 s abandoned, not a wait for the server's answer
    assert len(server.requests) == 2
    assert judge.retries_made == 1 and referee.counts.failures == 1


def test_http_judge_keeps_to_its_concurrency_limit(serve):
    """Eight matches through a judge allowing 2 requests in flight: the server never sees more than
    2 at once, and does see 2 (the matches of a round are judged concurrently): each answer waits until two
    requests are in flight, which only a judge that sends them concurrently lets happen."""
    server = serve(lambda path, body: (200, chat_answer("A")), together=2)
    referee = Referee(http_judge(server.url, max_concurrency=2, top_logprobs=0))
    pairs = [(f"a{i}", f"b{i}") for i in range(8)]
    assert referee.many("p", pairs) == [1.0] * 8
    assert server.max_in_flight == 2 and len(server.requests) == 8


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("base_url", "localhost:8000", "reward.arena.judge.base_url=localhost:8000"),
        ("template", "{prompt} {a}", "reward.arena.judge.template"),
        ("choices", ["A", "A"], "reward.arena.judge.choices"),
        ("max_concurrency", 0, "reward.arena.judge.max_concurrency=0"),
        ("timeout_s", 0.0, "reward.arena.judge.timeout_s=0.0"),
    ],
)
def test_http_judge_validation_names_the_key(key, value, message):
    judge = HttpJudge(**{key: value})
    judge.group = "reward.arena.judge"
    with pytest.raises(ConfigError) as error:
        judge.validate()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


# ---------------------------------------------------------------------------------------- HF judge


@pytest.fixture(scope="module")
def tiny_judge_model(tmp_path_factory):
    """A tiny Qwen3 with the project's character tokenizer, random weights, saved in HF format."""
    import torch
    from transformers import AutoModelForCausalLM

    from align_kit.models.char_tokenizer import build_char_tokenizer
    from align_kit.models.tiny import TinyModel

    tokenizer = build_char_tokenizer()
    node = TinyModel(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(node.hf_config(len(tokenizer), tokenizer.pad_token_id, 1))
    path = tmp_path_factory.mktemp("judge_model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, model.eval(), tokenizer


def test_hf_judge_is_the_softmax_of_the_two_label_logits(tiny_judge_model):
    import torch

    path, model, tokenizer = tiny_judge_model
    judge = HFJudge(name_or_path=str(path), template="{prompt}|{a}|{b}>", batch_size=2)
    judge.group = "reward.arena.judge"
    judge.validate()
    matches = [("12+3=", "15", "16"), ("7-2=", "<think>7-2=5</think>5", "4"), ("1+1=", "2", "11")]
    got = Referee(judge).many("unused", [])  # no matches: no model load needed
    assert got == []
    probabilities = judge.judge_batch(matches)  # 3 matches in batches of 2: padding in play
    a_id, b_id = tokenizer.convert_tokens_to_ids(["A", "B"])
    for (prompt, a, b), probability in zip(matches, probabilities, strict=True):
        ids = torch.tensor([tokenizer.encode(f"{prompt}|{a}|{b}>", add_special_tokens=False)])
        with torch.no_grad():
            last = model(input_ids=ids).logits[0, -1]
        expected = math.exp(last[a_id]) / (math.exp(last[a_id]) + math.exp(last[b_id]))
        assert probability == pytest.approx(expected, abs=1e-5)
    assert judge(*matches[0]) == pytest.approx(probabilities[0], abs=1e-6)


def test_hf_judge_in_the_referee_with_both_orders(tiny_judge_model):
    path, _, _ = tiny_judge_model
    judge = HFJudge(name_or_path=str(path), template="{prompt}|{a}|{b}>")
    referee = Referee(judge, both_orders=True)
    forward, backward = judge("1+1=", "2", "3"), judge("1+1=", "3", "2")
    assert referee("1+1=", "2", "3") == pytest.approx((forward + 1 - backward) / 2, abs=1e-6)
    assert referee.counts.calls == 2


def test_label_token_ids_keep_the_single_token_variants():
    class Tokenizer:
        table = {"A": [5], " A": [9], "AB": [5, 6], " AB": [9, 6]}

        def encode(self, text, add_special_tokens=False):
            return self.table[text]

    assert label_token_ids(Tokenizer(), "A") == [5, 9]
    assert label_token_ids(Tokenizer(), " A") == [9, 5]
    assert label_token_ids(Tokenizer(), "AB") == []


def test_hf_judge_labels_must_be_single_tokens(tiny_judge_model):
    path, _, _ = tiny_judge_model
    judge = HFJudge(name_or_path=str(path), template="{prompt}{a}{b}", choices=["AA", "B"])
    judge.group = "reward.arena.judge"
    with pytest.raises(ConfigError, match="reward.arena.judge.choices"):
        judge("p", "x", "y")


def test_hf_judge_validation_needs_a_model_folder(tmp_path):
    judge = HFJudge(name_or_path=str(tmp_path / "missing"))
    judge.group = "reward.arena.judge"
    with pytest.raises(ConfigError, match="reward.arena.judge.name_or_path="):
        judge.validate()
