"""The three runtimes on SmolLM2 agree: one vocabulary, the same logits, the same guarantees.

transformers and mlx read the HF folder that ``llamay.modelfiles.hf_folder`` derives from the GGUF
(float32, dequantized exactly), so their logits agree to float rounding; llama.cpp runs
the quantized GGUF itself (its matmuls quantize activations), so it is held to the
greedy next token at 90% of the positions of a fixed text. The guarantees (schema, GBNF,
forced tool calls) run on transformers and mlx through ``Model.chat``, seeded, with small
``max_tokens``: SmolLM2 makes 10-25 tokens/s here on one torch thread or mlx's CPU build.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil

import jsonschema
import numpy as np
import pytest
from conftest import read_testdata

from llamay import Vocabulary
from llamay.engine import TRUNCATED_WARNING, Model

INSTALL = {
    "llamacpp": ("llama_cpp", "llama-cpp-python (ci/setup builds it)"),
    "transformers": ("transformers", "pip install torch==2.13.0 && pip install 'llamay[transformers]'"),
    "mlx": ("mlx_lm", "pip install 'mlx[cpu]' mlx-lm (Linux) or 'llamay[mlx]'"),
}
OPTIONS = {"transformers": {"n_threads": 1}, "llamacpp": {"n_threads": 1}, "mlx": {}}

TEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after "
    "the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. Locally nicknamed "
    '"La dame de fer", it was constructed as the centrepiece of the 1889 World\'s Fair.'
)
PROMPT = "The capital of France is Paris, and the capital of Germany is"


def need(name: str) -> None:
    """Skip, saying what to install, unless backend ``name``'s runtime (and, for the HF folder, torch) is there."""
    module, how = INSTALL[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the {name} backend needs {module}: {how}")
    if name in ("transformers", "mlx") and importlib.util.find_spec("torch") is None:
        pytest.skip(f"the {name} backend exports its default model from the GGUF with torch: pip install torch==2.13.0")
    if name == "mlx":
        try:
            import mlx.core  # noqa: F401
        except ImportError as e:  # plain `mlx` on Linux installs but has no libmlx
            pytest.skip(f"mlx does not import ({e}): pip install 'mlx[cpu]'")


def backend(request: pytest.FixtureRequest, name: str):
    """Backend ``name`` on the embedded default, loaded once per test session (shared by the backend test files)."""
    need(name)
    loaded = request.config.__dict__.setdefault("_llamay_backends", {})
    if name not in loaded:
        from llamay.backends import load_backend

        loaded[name] = load_backend(name, **OPTIONS[name])
    return loaded[name]


@pytest.fixture(params=["transformers", "mlx"])
def backend_name(request) -> str:
    return request.param


@pytest.fixture
def model(request, backend_name) -> Model:
    return Model(backend(request, backend_name))


def greedy_along(b, ids: list[int]) -> np.ndarray:
    """Teacher-forced: the arg-max next token after each prefix of ``ids``, through the Backend primitives."""
    b.begin(ids[:1])
    out = []
    for token in ids[1:]:
        out.append(int(np.argmax(b.logits())))
        b.feed(token)
    out.append(int(np.argmax(b.logits())))
    return np.array(out)


# --- one vocabulary --------------------------------------------------------------------------------


def test_vocabularies_agree_token_by_token(request, smollm2_gguf):
    """GGUF metadata, llama.cpp, the transformers tokenizer and mlx-lm's: the same bytes for all 49,152 ids."""
    need("transformers")
    need("mlx")
    need("llamacpp")
    import llama_cpp
    from mlx_lm.tokenizer_utils import _byte_decoder

    tf, mx = backend(request, "transformers"), backend(request, "mlx")
    gguf = Vocabulary.from_gguf(smollm2_gguf)
    llama = Vocabulary.from_llama(llama_cpp.Llama(str(smollm2_gguf), vocab_only=True, verbose=False))
    for name, vocab in [("llama.cpp", llama), ("transformers", tf.vocab), ("mlx-lm", mx.vocab)]:
        assert (vocab.size, vocab.eos_ids) == (gguf.size, gguf.eos_ids), name
        differ = [i for i in range(gguf.size) if vocab.token_bytes(i) != gguf.token_bytes(i)]
        assert differ == [], f"{name}: {len(differ)} tokens differ from the GGUF's, first {differ[:5]}"
    # mlx-lm's own streaming detokenizer maps pieces to bytes with its own table: the same bytes again
    hf = mx.tokenizer._tokenizer
    special = {i for i, t in hf.added_tokens_decoder.items() if t.special}
    pieces = mx.tokenizer._detokenizer.tokenmap
    table = _byte_decoder()
    differ = [i for i, p in enumerate(pieces) if i not in special and bytes(table[c] for c in p) != gguf.token_bytes(i)]
    assert len(pieces) == gguf.size and differ == []
    assert all(gguf.token_bytes(i) == b"" for i in special)


def test_prompts_tokenize_alike(request):
    """The rendered chat prompt gives the same ids on every backend (special tokens parsed as tokens)."""
    names = [n for n in ("llamacpp", "transformers", "mlx") if importlib.util.find_spec(INSTALL[n][0])]
    if len(names) < 2:
        pytest.skip("needs two of llama-cpp-python, transformers, mlx-lm")
    backends = [backend(request, n) for n in names]
    from llamay.chat import ChatTemplate

    text = ChatTemplate(backends[0].chat_template).render([{"role": "user", "content": "Héllo, wörld! 1+1=?"}])
    first = backends[0].tokenize(text)
    assert first[0] == 1 and first.count(1) == 3  # <|im_start|> thrice: system, user, assistant
    for b in backends[1:]:
        assert b.tokenize(text) == first, b.name
        assert (b.chat_template, b.bos_token, b.eos_token) == (backends[0].chat_template, "<|im_start|>", "<|im_end|>")


# --- the same logits -------------------------------------------------------------------------------


def test_transformers_and_mlx_logits_agree(request):
    """Same HF folder, two runtimes: the logits of a fixed prompt within 1e-3 relative error (measured: ~4e-6)."""
    tf, mx = backend(request, "transformers"), backend(request, "mlx")
    ids = tf.tokenize(PROMPT)
    assert mx.tokenize(PROMPT) == ids
    tf.begin(ids)
    a = tf.logits().astype(np.float64)
    mx.begin(ids)
    b = mx.logits().astype(np.float64)
    assert a.shape == b.shape == (tf.vocab.size,)
    rel = np.abs(a - b).max() / np.abs(a).max()
    assert rel < 1e-3, rel
    assert tf.vocab.token_bytes(int(a.argmax())) == b" Berlin"


def test_greedy_tokens_agree_with_llamacpp(request):
    """llama.cpp on the quantized GGUF vs both HF runtimes: the greedy next token at >= 90% of positions (~97%)."""
    need("llamacpp")
    ll, tf, mx = (backend(request, n) for n in ("llamacpp", "transformers", "mlx"))
    ids = ll.tokenize(TEXT)
    assert tf.tokenize(TEXT) == ids and len(ids) > 60
    ll.forget(0, 0)  # llama.cpp teacher-forced as one batch with logits at every position
    ll.decode(ids, range(len(ids)), [0] * len(ids), [True] * len(ids))
    ref = np.array([int(np.argmax(ll.logits_at(i))) for i in range(len(ids))])
    hf = greedy_along(tf, ids)
    assert (greedy_along(mx, ids) == hf).mean() >= 0.98  # float32 on both sides: near-ties only
    agree = (ref == hf).mean()
    assert agree >= 0.90, f"llama.cpp and transformers agree on {agree:.1%} of {len(ids)} positions"


# --- the same guarantees, on both HF runtimes ---------------------------------------------------------

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    },
    "enum-and-bool": {
        "type": "object",
        "properties": {"mood": {"enum": ["happy", "sad", "neutral"]}, "tired": {"type": "boolean"}},
        "required": ["mood", "tired"],
    },
}
ASK = [{"role": "user", "content": "Answer with a JSON object that fits the request: describe someone."}]


@pytest.mark.parametrize(("name", "temperature"), [("person", 0.0), ("enum-and-bool", 1.0)])
def test_schema_output_validates(model, name, temperature):
    r = model.chat(ASK, schema=SCHEMAS[name], max_tokens=40, temperature=temperature, seed=7)
    assert TRUNCATED_WARNING not in r.warnings, r
    jsonschema.validate(json.loads(r.text), SCHEMAS[name])


GBNF = read_testdata("grammars", "yes_no_answer.gbnf")


@pytest.mark.parametrize("seed", [1, 2])
def test_gbnf_output_matches(model, seed):
    r = model.chat([{"role": "user", "content": "Is the sky blue?"}], grammar=GBNF, max_tokens=30,
                   temperature=0.8, seed=seed)
    assert r.finish_reason == "stop", r
    assert re.fullmatch(r"Answer: (yes|no)(, because [a-z ]{1,30})?\.", r.text), r.text


LEXICON = ["the", "sky", "is", "blue", "yes", "no", "it", "a", "day", "sun", "and", "clear", "not", "very"]


def test_lexicon_output_is_made_of_words(model):
    r = model.chat([{"role": "user", "content": "Is the sky blue?"}], lexicon=LEXICON, max_tokens=12, seed=1)
    words = [w for w in re.split(r"[ \n.,;:!?'\"()\-]+", r.text) if w]
    complete = words if r.finish_reason == "stop" else words[:-1]  # a cut-off last word may be a prefix
    assert words and all(w.lower() in LEXICON for w in complete), r.text


TOOLS = read_testdata("tools", "weather_and_add.json")


def test_forced_tool_call_validates(model):
    r = model.chat([{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS, tool_choice="required",
                   parallel_tool_calls=False, max_tokens=60, seed=3)
    assert r.finish_reason == "tool_calls" and len(r.tool_calls) == 1, r
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    call = r.tool_calls[0]
    jsonschema.validate(call["arguments"], by_name[call["name"]])
    assert "<tool_call>" not in r.text


def test_greedy_constrained_output_is_the_same_on_both(request):
    """One mask, one sampler, logits equal to rounding: transformers and mlx write the same document."""
    outs = [Model(backend(request, n)).chat(ASK, schema=SCHEMAS["person"], max_tokens=30).text
            for n in ("transformers", "mlx")]
    assert outs[0] == outs[1]


# --- the derived HF folder: cached once, written atomically (no torch: the export itself is faked) -------------


def fake_export(calls: list):
    def export(gguf, out, *, digest=None):
        from llamay.modelfiles import hf_folder as hf_export

        calls.append(out)
        (out / "config.json").write_text("{}")
        (out / hf_export.MARKER).write_text(json.dumps({"sha256": digest, "version": hf_export.EXPORT_VERSION}))
        return out

    return export


def test_hf_folder_is_exported_once_under_the_cache(tmp_path, monkeypatch):
    from llamay.modelfiles import hf_folder as hf_export

    gguf = tmp_path / "Tiny-Model.gguf"
    gguf.write_bytes(b"GGUF not really")
    calls: list = []
    monkeypatch.setattr(hf_export, "export_gguf", fake_export(calls))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = hf_export.hf_folder(gguf)
    assert folder.parent == tmp_path / "xdg" / "llamay" / "hf" and folder.name.startswith("tiny-model-")
    assert calls[0] != folder and calls[0].parent == folder.parent  # written beside, then renamed
    assert hf_export.hf_folder(gguf) == folder and len(calls) == 1
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]
    gguf.write_bytes(b"GGUF changed")  # another file: another folder
    assert hf_export.hf_folder(gguf) != folder and len(calls) == 2


def test_hf_folder_replaces_a_broken_one_and_keeps_a_concurrent_winner(tmp_path, monkeypatch):
    from llamay.modelfiles import hf_folder as hf_export

    gguf, cache = tmp_path / "m.gguf", tmp_path / "c"
    gguf.write_bytes(b"GGUF")
    export = fake_export([])
    monkeypatch.setattr(hf_export, "export_gguf", export)
    folder = hf_export.hf_folder(gguf, cache=cache)
    (folder / hf_export.MARKER).unlink()  # left by a crash or an older layout: not complete
    (folder / "junk").write_text("x")
    assert hf_export.hf_folder(gguf, cache=cache) == folder
    assert (folder / hf_export.MARKER).exists() and not (folder / "junk").exists()

    shutil.rmtree(folder)

    def racing(gguf_, out, *, digest=None):  # another process renames its complete folder into place first
        export(gguf_, out, digest=digest)
        other = cache / "other"
        other.mkdir()
        export(gguf_, other, digest=digest)
        (other / "winner").write_text("y")
        other.rename(folder)
        return out

    monkeypatch.setattr(hf_export, "export_gguf", racing)
    assert hf_export.hf_folder(gguf, cache=cache) == folder and (folder / "winner").exists()
    assert [p.name for p in cache.iterdir()] == [folder.name]  # this process's copy was dropped


def test_hf_folder_refuses_a_missing_file(tmp_path):
    from llamay.modelfiles.hf_folder import hf_folder
    from llamay.modelfiles.shipped import ModelError

    with pytest.raises(ModelError, match="no GGUF file"):
        hf_folder(tmp_path / "missing.gguf")
