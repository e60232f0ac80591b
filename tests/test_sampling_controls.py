"""The sampling controls clients send: penalties, logit bias, min-p and log probabilities, in the one sampler.

The arithmetic is pinned on small arrays; the behaviour on SmolLM2 through ``llamay serve``
(in-process, loopback) with the official ``openai`` and ``ollama`` clients: a raw prompt of
"1 1 1 ..." that greedy decoding continues forever is the loop the penalties must break, and
log probabilities are checked against llama-cpp-python's own logits for the same tokens.
"""

from __future__ import annotations

import collections
import json

import jsonschema
import numpy as np
import pytest

from llamay.backends.sampling import Sampling, adjust, last_tokens, sample, token_logprob

LOOP = "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
NEG = -np.inf


@pytest.mark.parametrize(("sampling", "prompt", "reply", "expected"), [
    (Sampling(logit_bias=((0, 5.0), (1, -100.0))), [], [], [6.0, -98.0, -4.0, NEG]),
    (Sampling(logit_bias=((3, 100.0),)), [], [], [1.0, 2.0, -4.0, NEG]),  # a bias never un-masks
    (Sampling(repeat_penalty=2.0), [0], [2], [0.5, 2.0, -8.0, NEG]),  # positive divided, negative multiplied
    (Sampling(repeat_penalty=2.0, repeat_last_n=1), [0], [2], [1.0, 2.0, -8.0, NEG]),  # only the last token
    (Sampling(repeat_penalty=2.0, repeat_last_n=-1), [0, 1], [], [0.5, 1.0, -4.0, NEG]),  # the whole context
    (Sampling(frequency_penalty=1.0, presence_penalty=0.5), [1], [0, 0, 2], [-1.5, 2.0, -5.5, NEG]),  # reply only
])
def test_bias_and_penalties_adjust_the_logits(sampling, prompt, reply, expected):
    logits = np.array([1.0, 2.0, -4.0, NEG], dtype=np.float32)
    adjust(logits, sampling, prompt, reply)
    np.testing.assert_array_equal(logits, np.array(expected, dtype=np.float32))


@pytest.mark.parametrize(("n", "expected"), [(0, []), (1, [5]), (3, [3, 4, 5]), (9, [1, 2, 3, 4, 5]),
                                             (-1, [1, 2, 3, 4, 5])])
def test_repeat_last_n_counts_back_over_reply_then_prompt(n, expected):
    assert last_tokens([1, 2, 3], [4, 5], n) == expected


def test_min_p_keeps_only_tokens_near_the_best():
    logits = np.array([3.0, 2.9, 0.0, NEG], dtype=np.float32)
    rng = np.random.default_rng(0)
    wide = {sample(logits.copy(), Sampling(temperature=1.0), rng) for _ in range(300)}
    narrow = {sample(logits.copy(), Sampling(temperature=1.0, min_p=0.5), rng) for _ in range(300)}
    assert wide == {0, 1, 2} and narrow == {0, 1}


def log_softmax(x: np.ndarray) -> np.ndarray:
    finite = x[np.isfinite(x)]
    return x - (finite.max() + np.log(np.exp(finite - finite.max()).sum()))


@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 2.0])
def test_logprobs_are_of_the_masked_distribution_at_the_temperature(temperature):
    logits = np.array([1.0, 3.0, NEG, 2.0, NEG], dtype=np.float32)
    scored = token_logprob(logits, 3, 2, temperature)
    expected = log_softmax(logits.astype(np.float64) / (temperature or 1.0))
    assert scored.token == 3 and scored.logprob == pytest.approx(expected[3])
    assert [t for t, _ in scored.top] == [1, 3]  # likeliest first; a masked token is never an alternative
    assert [lp for _, lp in scored.top] == pytest.approx([expected[1], expected[3]])


def test_a_token_that_is_the_only_one_allowed_has_log_probability_zero():
    assert token_logprob(np.array([NEG, 5.0, NEG], dtype=np.float32), 1, 5, 1.0).logprob == 0.0
    assert token_logprob(np.array([NEG, 5.0, NEG], dtype=np.float32), 1, 5, 1.0).top == ((1, 0.0),)


@pytest.mark.parametrize(("penalty", "loops"), [(1.0, True), (4.0, False)])
def test_a_repeat_penalty_breaks_the_loop_the_fixture_is_scripted_to_enter(penalty, loops):
    from llamay.backends.fixture import FixtureBackend
    from llamay.engine import Model
    from llamay.modelfiles.shipped import default_model_path
    from llamay.vocab import Vocabulary

    backend = FixtureBackend(Vocabulary.from_gguf(default_model_path()), script=b" 1" * 40, prefer=b"z", scale=1e-6)
    text = Model(backend).complete("count:", max_tokens=12, repeat_penalty=penalty).text
    assert (set(text) == {" ", "1"}) is loops and ("z" in text) is not loops, text


# -- through the server, on the real model ---------------------------------------------------
openai = pytest.importorskip("openai", reason="pip install openai")
ollama = pytest.importorskip("ollama", reason="pip install ollama")


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")
    from llamay.api import App, running
    from llamay.engine import load

    model = load("llamacpp", n_threads=2, slots=2, cache_prompt=True)
    with running(App(model)) as srv:
        yield model, srv.port


def most_repeated(model, text: str) -> int:
    return collections.Counter(model.backend.encode(text, special=False)).most_common(1)[0][1] if text else 0


@pytest.mark.parametrize(("options", "loops"), [({"repeat_penalty": 1.0}, True), ({"repeat_penalty": 2.0}, False)])
def test_ollama_repeat_penalty_breaks_a_loop(served, options, loops):
    model, port = served
    reply = ollama.Client(host=f"http://127.0.0.1:{port}").generate(
        model="default", prompt=LOOP, raw=True, options={"temperature": 0, "num_predict": 20, **options})
    assert (most_repeated(model, reply.response) >= 8) is loops, reply.response


@pytest.mark.parametrize(("penalty", "loops"), [(0.0, True), (2.0, False)])
def test_openai_frequency_penalty_breaks_a_loop(served, penalty, loops):
    model, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.completions.create(model="default", prompt=LOOP, max_tokens=20, temperature=0,
                                      frequency_penalty=penalty)
    assert (most_repeated(model, reply.choices[0].text) >= 8) is loops, reply.choices[0].text


def test_a_strong_negative_bias_keeps_a_token_out(served):
    model, port = served
    space = model.backend.encode(" 1", special=False)[0]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    plain = client.completions.create(model="default", prompt=LOOP, max_tokens=10, temperature=0)
    biased = client.completions.create(model="default", prompt=LOOP, max_tokens=10, temperature=0,
                                       logit_bias={str(space): -100})
    assert space in model.backend.encode(plain.choices[0].text, special=False)
    assert space not in model.backend.encode(biased.choices[0].text, special=False)


def test_a_bias_toward_a_refused_token_cannot_break_the_constraint(served):
    model, port = served
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    pushed = {str(t): 100 for t in model.backend.encode("Sure! Here you go", special=False)}
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "A number as JSON."}], max_tokens=30,
        temperature=0, logit_bias=pushed,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


def test_min_p_of_one_samples_as_greedy(served):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    ask = {"model": "default", "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12}
    greedy = client.chat.completions.create(**ask, temperature=0)
    hot = client.chat.completions.create(**ask, temperature=1.5, seed=3, extra_body={"min_p": 1.0})
    assert hot.choices[0].message.content == greedy.choices[0].message.content


def test_a_bias_on_a_token_the_vocabulary_lacks_is_a_400_naming_it(served):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                       logit_bias={"99999999": 5})


def reference_logprobs(ids: list[int], start: int) -> np.ndarray:
    """llama-cpp-python's own log-softmax at each position from ``start`` on, for the tokens that came next.

    Flash attention as the backend runs it (llama.cpp's default): without it the logits differ by
    up to 0.2 nats on this model, which would hide a wrong reading."""
    import llama_cpp

    from llamay.modelfiles.shipped import default_model_path

    llm = llama_cpp.Llama(model_path=str(default_model_path()), n_ctx=256, logits_all=True, verbose=False,
                          n_threads=2, flash_attn=True)
    llm.eval(ids)
    return np.array([log_softmax(np.asarray(llm.scores[i - 1], np.float64))[ids[i]] for i in range(start, len(ids))])


def test_completion_logprobs_match_the_models_logits(served):
    model, port = served
    prompt = "The three primary colours are"
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.completions.create(model="default", prompt=prompt, max_tokens=8, temperature=0, logprobs=3)
    scored = reply.choices[0].logprobs
    by_text = {model.backend.vocab.token_bytes(i).decode("utf-8", "replace"): i
               for i in range(model.backend.vocab.size)}
    prompt_ids = model.backend.tokenize(prompt)
    ids = prompt_ids + [by_text[t] for t in scored.tokens]
    assert "".join(scored.tokens) == reply.choices[0].text
    np.testing.assert_allclose(scored.token_logprobs, reference_logprobs(ids, len(prompt_ids)), atol=1e-3)
    for token, logprob, top in zip(scored.tokens, scored.token_logprobs, scored.top_logprobs, strict=True):
        assert len(top) == 3 and max(top.values()) == pytest.approx(logprob)  # greedy takes the likeliest
        assert list(top.values()) == sorted(top.values(), reverse=True) and token in top


def test_a_tool_call_carries_the_logprobs_of_its_tokens(served):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    chunks = list(client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
        tool_choice="required", parallel_tool_calls=False, max_tokens=60, temperature=0, logprobs=True,
        top_logprobs=2, stream=True))
    with_call = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(with_call) == 1
    content = with_call[0].choices[0].logprobs.content
    spelled = b"".join(bytes(t.bytes) for t in content).decode()
    assert "get_weather" in spelled and "Paris" in spelled
    assert all(t.logprob <= 0 and 1 <= len(t.top_logprobs) <= 2 for t in content)
    # alternatives are only what the grammar allows: where it allows one token, that token is certain
    assert any(len(t.top_logprobs) == 1 and t.logprob == 0 for t in content)


def test_constrained_chat_logprobs_cover_every_token_and_never_exceed_zero(served):
    _, port = served
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "A number as JSON."}], max_tokens=30,
        temperature=0.8, seed=1, logprobs=True,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    assert b"".join(bytes(t.bytes) for t in content).decode() == reply.choices[0].message.content
    assert all(t.logprob <= 0 and t.top_logprobs == [] for t in content)


def test_ollama_logprobs_come_with_each_line(served):
    _, port = served
    client = ollama.Client(host=f"http://127.0.0.1:{port}")
    lines = list(client.generate(model="default", prompt="Say hi.", stream=True, logprobs=True, top_logprobs=2,
                                 options={"temperature": 0, "num_predict": 6}))
    scored = [lp for line in lines if line.logprobs for lp in line.logprobs]
    assert len(scored) == lines[-1].eval_count
    assert "".join(lp.token for lp in scored) == "".join(line.response for line in lines)
    assert all(lp.logprob <= 0 and len(lp.top_logprobs) == 2 for lp in scored)


@pytest.mark.parametrize(("body", "field"), [
    ({"logprobs": False, "top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
])
def test_logprob_requests_out_of_bounds_are_a_400_naming_the_field(served, body, field):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                       **body)
    assert info.value.body["param"] == field


@pytest.mark.parametrize(("options", "field"), [({"mirostat": 2}, "options.mirostat"),
                                                ({"typical_p": 0.5}, "options.typical_p")])
def test_ollama_samplers_llamay_lacks_are_a_400_naming_the_option(served, options, field):
    _, port = served
    with pytest.raises(ollama.ResponseError, match=field):
        ollama.Client(host=f"http://127.0.0.1:{port}").generate(model="default", prompt="Hi",
                                                                 options={"num_predict": 2, **options})


def test_ollama_default_options_are_accepted_and_num_ctx_bounds_the_reply(served):
    model, port = served
    client = ollama.Client(host=f"http://127.0.0.1:{port}")
    prompt_len = len(model.backend.tokenize(LOOP))
    reply = client.generate(model="default", prompt=LOOP, raw=True, options={
        "temperature": 0, "num_predict": 50, "num_ctx": prompt_len + 5, "mirostat": 0, "num_gpu": 0, "numa": False,
        "typical_p": 1.0, "mirostat_tau": 5.0})
    assert reply.eval_count == 5 and reply.done_reason == "length"


anthropic = pytest.importorskip("anthropic", reason="pip install anthropic")


@pytest.mark.parametrize("narrow", [{"top_k": 1}, {"top_p": 1e-6}])
def test_anthropic_top_k_and_top_p_narrowed_to_one_token_sample_as_greedy(served, narrow):
    _, port = served
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="none", max_retries=0)
    ask = {"model": "default", "max_tokens": 12, "messages": [{"role": "user", "content": "Name a colour."}]}
    # anthropic 2.x dropped the sampling keywords from create(); the wire fields remain.
    greedy = client.messages.create(**ask, extra_body={"temperature": 0})
    hot = client.messages.create(**ask, extra_body={"temperature": 1.0, **narrow})
    assert hot.content[0].text == greedy.content[0].text


def test_anthropic_stop_sequences_cut_the_reply_where_one_starts(served):
    _, port = served
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="none", max_retries=0)
    ask = {"model": "default", "max_tokens": 24, "extra_body": {"temperature": 0},
           "messages": [{"role": "user", "content": "Describe the sea in one sentence."}]}
    full = client.messages.create(**ask).content[0].text
    word = full.split()[3]
    cut = client.messages.create(**ask, stop_sequences=[word])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == word
    assert cut.content[0].text == full[:full.index(word)]


def test_anthropic_stream_names_the_stop_sequence_in_message_delta(served):
    _, port = served
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="none", max_retries=0)
    ask = {"model": "default", "max_tokens": 24, "extra_body": {"temperature": 0},
           "messages": [{"role": "user", "content": "Describe the sea in one sentence."}]}
    word = client.messages.create(**ask).content[0].text.split()[3]
    with client.messages.stream(**ask, stop_sequences=[word]) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", word)
