"""llamay's SGLang grammar backend, loaded through SGLang's plugin entry point and driven through
SGLang's own grammar interface the way its scheduler drives a batch, with a real model's logits.

SGLang's model runner needs a GPU, so transformers runs the model (SmolLM2, float32, greedy).
Run with SGLang's environment: ``bash ci/setup-sglang && .venv-sglang/bin/python -m pytest
tests/test_sglang_plugin.py``; elsewhere this file skips.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

pytest.importorskip("sglang", reason="SGLang is not installed here: bash ci/setup-sglang makes its environment "
                                     "(.venv-sglang), whose python runs this file")
import torch
from sglang.srt.constrained.base_grammar_backend import (
    GRAMMAR_BACKEND_REGISTRY,
    GrammarMask,
    GrammarRow,
    InvalidGrammarObject,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from llamay.integrations.sglang import REGEX_REFUSED, STRUCTURAL_TAG_REFUSED
from llamay.modelfiles.hf_folder import default_hf_folder

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
COLOURS = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 4}
DATE = 'root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" [0-2] [0-9]'


@pytest.fixture(scope="module")
def model():
    folder = default_hf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return tokenizer, AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def backend(model):
    from sglang.srt.plugins import load_plugins

    load_plugins()
    tokenizer, lm = model
    return GRAMMAR_BACKEND_REGISTRY["llamay"](None, tokenizer, lm.config.vocab_size, {tokenizer.eos_token_id})


def grammar_for(backend, key):
    """What SGLang's grammar manager does: the cached object's copy, or a compile whose copy is cached."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result()
        if not isinstance(value, InvalidGrammarObject):
            backend.set_cache(key, value.copy())
    return value


def generate(model, backend, keys: list[tuple[str, str]], prompts: list[str], max_new_tokens: int = 48) -> list[str]:
    """Greedy decoding of a batch, each step's mask made as SGLang's ``update_regex_vocab_mask`` makes it."""
    tokenizer, lm = model
    grammars = [grammar_for(backend, key) for key in keys]
    rows = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            for p in prompts]
    rows = [tokenizer.encode(r, add_special_tokens=False) for r in rows]
    out: list[list[int]] = [[] for _ in rows]
    for _ in range(max_new_tokens):
        live = [i for i, g in enumerate(grammars) if not g.finished]
        if not live:
            break
        with torch.inference_mode():
            logits = torch.stack([lm(torch.tensor([rows[i]])).logits[0, -1].float() for i in live])
        mask = grammars[live[0]].allocate_vocab_mask(logits.shape[1], len(live), logits.device)
        type(grammars[live[0]]).fill_vocab_mask_batched(
            [GrammarRow(r, grammars[i]) for r, i in enumerate(live) if not grammars[i].is_terminated()], mask)
        GrammarMask(grammars[live[0]], grammars[live[0]].move_vocab_mask(mask, logits.device)).apply(logits)
        for r, i in enumerate(live):
            token = int(logits[r].argmax())
            grammars[i].accept_token(token)
            rows[i].append(token)
            out[i].append(token)
            # SGLang's Req.check_finished: a stop token, or the grammar terminated (it took an end token)
            grammars[i].finished = token == tokenizer.eos_token_id or grammars[i].is_terminated()
    return [tokenizer.decode(o, skip_special_tokens=True) for o in out]


def test_the_entry_point_makes_llamay_a_grammar_backend_choice(backend):
    from sglang.srt.server_args import prepare_server_args

    args = prepare_server_args(["--model-path", str(default_hf_folder()), "--grammar-backend", "llamay"])
    assert args.grammar_backend == "llamay"


def test_a_batch_of_schemas_and_a_grammar_each_gets_its_own_constraint(model, backend):
    keys = [("json", json.dumps(PERSON)), ("json", json.dumps(COLOURS)), ("ebnf", DATE), ("json", json.dumps(PERSON))]
    prompts = ["Describe a person as JSON.", "List some colours.", "When did the first moon landing happen?",
               "Describe another person as JSON."]
    person, colours, date, other = generate(model, backend, keys, prompts)
    jsonschema.validate(json.loads(person), PERSON)
    jsonschema.validate(json.loads(colours), COLOURS)
    jsonschema.validate(json.loads(other), PERSON)
    assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-[0-2]\d", date)


def test_any_json_is_sglangs_any_key(model, backend):
    [reply] = generate(model, backend, [("json", "$$ANY$$")], ["Say hello."])
    json.loads(reply)


@pytest.mark.parametrize("key, says", [
    (("json", json.dumps({"type": "object", "properties": {"a": {"not": {}}}})), "'not'.*/properties/a"),
    (("json", "{not json"), "not valid JSON"),
    (("ebnf", 'root ::= root "a"'), "left recursion.*rule 'root'"),
    (("regex", "[a-z]+"), re.escape(REGEX_REFUSED)),
    (("structural_tag", "{}"), re.escape(STRUCTURAL_TAG_REFUSED)),
])
def test_a_refused_constraint_fails_the_request_with_llamays_message(backend, key, says):
    refused = grammar_for(backend, key)
    assert isinstance(refused, InvalidGrammarObject)
    assert re.search(says, refused.error_message), refused.error_message


def test_a_rollback_restores_the_mask_of_the_earlier_position(model, backend):
    tokenizer, _ = model
    grammar = grammar_for(backend, ("json", json.dumps(PERSON)))
    masks = []
    for token in tokenizer.encode('{"name": "Al', add_special_tokens=False):
        mask = grammar.allocate_vocab_mask(len(tokenizer), 1, "cpu")
        grammar.fill_vocab_mask(mask, 0)
        masks.append(mask)
        grammar.accept_token(token)
    grammar.rollback(2)
    again = grammar.allocate_vocab_mask(len(tokenizer), 1, "cpu")
    grammar.fill_vocab_mask(again, 0)
    assert torch.equal(again, masks[-2])


def test_copies_share_the_compiled_grammar_but_not_the_position(model, backend):
    tokenizer, _ = model
    first = grammar_for(backend, ("json", json.dumps(COLOURS)))
    second = grammar_for(backend, ("json", json.dumps(COLOURS)))
    [bracket] = tokenizer.encode("[", add_special_tokens=False)
    first.accept_token(bracket)
    assert (first.row.seen, second.row.seen) == (1, 0)
    assert second.grammar is first.grammar


def test_a_token_the_constraint_refuses_is_a_value_error_so_sglang_aborts_the_request(model, backend):
    tokenizer, _ = model
    grammar = grammar_for(backend, ("json", json.dumps(PERSON)))
    [letter] = tokenizer.encode("x", add_special_tokens=False)
    with pytest.raises(ValueError, match="not allowed"):
        grammar.accept_token(letter)
