"""Vocabulary loaders, checked against references that share no code with them.

References: Llama 3's tiktoken ranks file (raw bytes as Meta shipped them), the
``tokenizers`` library's ByteLevel pre-tokenizer and SentencePiece decoders, and
``gguf.GGUFReader`` for the GGUF metadata.
"""

from __future__ import annotations

import base64
import ctypes
import json
import re
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from llamay.errors import VocabularyError
from llamay.vocab import Vocabulary, _read_gguf_metadata

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")

NEVER_IN_UTF8 = frozenset({0xC0, 0xC1, *range(0xF5, 0x100)})


@pytest.fixture(scope="session")
def byte_level_table() -> dict[str, int]:
    """GPT-2's character -> byte map, as ``tokenizers``' ByteLevel pre-tokenizer applies it.

    The pre-tokenizer maps each UTF-8 byte of its input to one character, so feeding it text
    that holds every byte UTF-8 can hold gives 243 entries. The 13 bytes UTF-8 never holds
    are printable Latin-1, which the scheme keeps as themselves: the alphabet's 13 other
    characters must be exactly those.
    """
    text = "".join(chr(c) for c in [*range(0x800), *range(0x800, 0x110000, 0x400)] if not 0xD800 <= c < 0xE000)
    byte_level = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    [(mapped, _)] = byte_level.pre_tokenize_str(text)
    raw = text.encode()
    assert len(mapped) == len(raw)
    table = dict(zip(mapped, raw, strict=True))
    assert set(table.values()) == set(range(256)) - NEVER_IN_UTF8
    assert set(tokenizers.pre_tokenizers.ByteLevel.alphabet()) - set(table) == {chr(b) for b in NEVER_IN_UTF8}
    table.update({chr(b): b for b in NEVER_IN_UTF8})
    return table


def all_tokens(vocab: Vocabulary) -> list[bytes]:
    return [vocab.token_bytes(i) for i in range(vocab.size)]


# --- the real vocabularies --------------------------------------------------------------------------

SHAPES = [
    # Llama 3.2 Vision's tokenizer: <|image|> is id 128256, one past the text model's 128,256.
    pytest.param("llama3_vocab", 128_257, (128001, 128008, 128009), id="llama3"),
    pytest.param("smollm2_vocab", 49_152, (0, 2, 4), id="smollm2"),  # 4 is <reponame>, as llama.cpp says
    pytest.param("gemma_vocab", 262_144, (1, 106, 212), id="gemma"),  # 212 is </s>, as llama.cpp says
]


@pytest.mark.parametrize(("fixture", "size", "eos_ids"), SHAPES)
def test_size_and_end_of_sequence_ids(request, fixture, size, eos_ids):
    """EOS: the file's own ids plus llama.cpp's end-of-generation texts (<|eot_id|>, <end_of_turn>)."""
    vocab = request.getfixturevalue(fixture)
    assert (vocab.size, vocab.eos_ids) == (size, eos_ids)


KNOWN_TOKENS = [
    pytest.param("llama3_vocab", 279, b" the", id="llama3 Ġthe is a space and 'the'"),
    pytest.param("llama3_vocab", 271, b"\n\n", id="llama3 ĊĊ is two newlines"),
    pytest.param("llama3_vocab", 978, b"\xc3\xa9", id="llama3 Ã© is é in UTF-8"),
    pytest.param("llama3_vocab", 94, b"\xa1", id="llama3 ¡ is one byte that is not UTF-8 alone"),
    pytest.param("llama3_vocab", 128000, b"", id="llama3 <|begin_of_text|> is special"),
    pytest.param("llama3_vocab", 128009, b"", id="llama3 <|eot_id|> is special"),
    pytest.param("smollm2_vocab", 260, b" the", id="smollm2 Ġthe is a space and 'the'"),
    pytest.param("smollm2_vocab", 216, b" ", id="smollm2 Ġ is a space"),
    pytest.param("smollm2_vocab", 198, b"\n", id="smollm2 Ċ is a newline"),
    pytest.param("smollm2_vocab", 333, b"   ", id="smollm2 ĠĠĠ is three spaces"),
    pytest.param("smollm2_vocab", 2756, b"\xc3\xa9", id="smollm2 Ã© is é in UTF-8"),
    pytest.param("smollm2_vocab", 180, b"\xe9", id="smollm2 é is the byte E9"),
    pytest.param("smollm2_vocab", 39428, b'{"', id="smollm2 {quote"),
    pytest.param("smollm2_vocab", 1, b"", id="smollm2 <|im_start|> is control"),
    pytest.param("smollm2_vocab", 2, b"", id="smollm2 <|im_end|> is control"),
    pytest.param("gemma_vocab", 248, b"\n", id="gemma <0x0A> is a newline"),
    pytest.param("gemma_vocab", 493, b"\xff", id="gemma <0xFF> is the byte FF"),
    pytest.param("gemma_vocab", 506, b" the", id="gemma ▁the is a space and 'the'"),
    pytest.param("gemma_vocab", 1437, b"the", id="gemma the"),
    pytest.param("gemma_vocab", 236743, b" ", id="gemma ▁ is a space"),
    pytest.param("gemma_vocab", 107, b"\n", id="gemma user-defined newline is text"),
    pytest.param("gemma_vocab", 139, b"   ", id="gemma user-defined spaces are text"),
    pytest.param("gemma_vocab", 168, b"<table>", id="gemma user-defined <table> is text"),
    pytest.param("gemma_vocab", 1, b"", id="gemma <eos> is control"),
    pytest.param("gemma_vocab", 105, b"", id="gemma <start_of_turn> is control"),
    pytest.param("gemma_vocab", 106, b"", id="gemma <end_of_turn> is control"),
    pytest.param("gemma_vocab", 6, b"", id="gemma <unused0> is control"),
]


@pytest.mark.parametrize(("fixture", "token", "expected"), KNOWN_TOKENS)
def test_known_token_bytes(request, fixture, token, expected):
    assert request.getfixturevalue(fixture).token_bytes(token) == expected


def test_llama3_every_token_is_the_bytes_of_the_tiktoken_ranks_file(llama3_vocab, llama3_tokenizer_json):
    ranks = llama3_tokenizer_json.with_name("tokenizer.model")
    if not ranks.exists():
        pytest.skip(f"{ranks} is missing")
    expected = {}
    for line in ranks.read_text().splitlines():
        piece, rank = line.split()
        expected[int(rank)] = base64.b64decode(piece)
    assert len(expected) == 128_000
    assert {i: llama3_vocab.token_bytes(i) for i in expected} == expected


def test_llama3_every_token_is_what_tokenizers_byte_level_map_gives(
    llama3_vocab, llama3_tokenizer_json, byte_level_table
):
    tok = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_json))
    special = {i for i, added in tok.get_added_tokens_decoder().items() if added.special}
    expected = [
        b"" if i in special else bytes(byte_level_table[c] for c in tok.id_to_token(i))
        for i in range(tok.get_vocab_size())
    ]
    assert len(special) == 257
    assert all_tokens(llama3_vocab) == expected


def test_smollm2_every_token_is_what_gguf_reader_and_the_byte_level_map_give(
    smollm2_vocab, smollm2_gguf, byte_level_table
):
    reader = gguf.GGUFReader(smollm2_gguf)
    texts = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    expected = [
        bytes(byte_level_table[c] for c in text) if kind == gguf.TokenType.NORMAL else b""
        for text, kind in zip(texts, types, strict=True)
    ]
    assert all_tokens(smollm2_vocab) == expected


def test_gemma_every_token_decodes_as_tokenizers_sentencepiece_decoders_decode_it(gemma_vocab, gemma_gguf):
    """Texts come from llamay's own GGUF reader: the SmolLM2 test checks it against gguf.GGUFReader."""
    meta = _read_gguf_metadata(gemma_gguf)
    decoder = tokenizers.decoders.Sequence(
        [tokenizers.decoders.Replace("▁", " "), tokenizers.decoders.ByteFallback(), tokenizers.decoders.Fuse()]
    )
    texts, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    expected, got = [], []
    for i, (text, kind) in enumerate(zip(texts, types, strict=True)):
        if kind in (gguf.TokenType.NORMAL, gguf.TokenType.BYTE):
            expected.append(decoder.decode([text]))
            got.append(gemma_vocab.token_bytes(i).decode("utf-8", "replace"))
    assert len(got) == 255_474 + 256
    assert got == expected


def test_gemma_byte_fallback_tokens_are_their_byte(gemma_vocab, gemma_gguf):
    texts = _read_gguf_metadata(gemma_gguf)["tokenizer.ggml.tokens"]
    byte_tokens = {i: int(t[3:5], 16) for i, t in enumerate(texts) if re.fullmatch(r"<0x[0-9A-F]{2}>", t)}
    assert sorted(byte_tokens.values()) == list(range(256))
    assert {i: gemma_vocab.token_bytes(i) for i in byte_tokens} == {i: bytes([b]) for i, b in byte_tokens.items()}


def test_reading_gemma_gguf_takes_seconds_not_tens(gemma_gguf):
    """gguf.GGUFReader takes about 10 s on this file: the loader reads the metadata itself."""
    start = time.perf_counter()
    Vocabulary.from_gguf(gemma_gguf)
    assert time.perf_counter() - start < 5


def test_byte_vocab_fixture(byte_vocab):
    assert (byte_vocab.size, byte_vocab.eos_ids, byte_vocab.token_bytes(0x41), byte_vocab.token_bytes(256)) == (
        257,
        (256,),
        b"A",
        b"",
    )


def test_importing_vocab_imports_no_tokenizer_or_runtime():
    heavy = "{'tokenizers', 'transformers', 'llama_cpp', 'gguf'}"
    code = f"import sys, llamay.vocab; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- small GGUF files: token types, byte order, EOS keys -----------------------------------------


def write_gguf(path: Path, fields: dict, endian=gguf.GGUFEndian.LITTLE) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama", endianess=endian)
    for key, value in fields.items():
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = (int(t) for t in gguf.TokenType)

GGUF_CASES = [
    pytest.param(
        {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.tokens": ["<|im_end|>", "Ġhi", "<tool_call>", "<unk>", "[PAD4]", "Ã©", "a b", "¡"],
            "tokenizer.ggml.token_type": [CONTROL, NORMAL, USER_DEFINED, UNKNOWN, UNUSED, NORMAL, NORMAL, NORMAL],
            "tokenizer.ggml.eos_token_id": 0,
        },
        [b"", b" hi", b"<tool_call>", b"", b"", b"\xc3\xa9", b"a b", b"\xa1"],
        (0,),
        id="byte-level: control, unknown, unused empty; user-defined text; a raw space is text",
    ),
    pytest.param(
        {
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "<0x0A>", "▁the", "▁", "<b>", "<end_of_turn>", "<eot>"],
            "tokenizer.ggml.token_type": [UNKNOWN, *[CONTROL] * 2, BYTE, NORMAL, NORMAL, USER_DEFINED, *[CONTROL] * 2],
            "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.eot_token_id": 8,
        },
        [b"", b"", b"", b"\n", b" the", b" ", b"<b>", b"", b""],
        (2, 7, 8),
        id="sentencepiece: byte fallback, ▁ as space; EOS, EOT key and <end_of_turn> end generation",
    ),
    pytest.param(
        {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["Ġa", "<|endoftext|>"]},
        [b" a", b""],
        (1,),
        id="no token types: all normal; <|endoftext|> ends generation by its text",
    ),
]


@pytest.mark.parametrize("endian", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG], ids=["little-endian", "big-endian"])
@pytest.mark.parametrize(("fields", "tokens", "eos_ids"), GGUF_CASES)
def test_small_gguf(tmp_path, fields, tokens, eos_ids, endian):
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", fields, endian))
    assert (all_tokens(vocab), vocab.eos_ids) == (tokens, eos_ids)


GPT2 = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.eos_token_id": 1}
HEADER = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)


def gguf_bytes(data: bytes):
    return lambda path: path.write_bytes(data)


def gguf_fields(fields: dict):
    return lambda path: write_gguf(path, fields)


MALFORMED_GGUF = [
    pytest.param(lambda path: None, "No such file", id="missing file"),
    pytest.param(gguf_bytes(b""), "not a GGUF file", id="empty file"),
    pytest.param(gguf_bytes(bytes(range(256)) * 4), "not a GGUF file", id="garbage named .gguf"),
    pytest.param(gguf_bytes(b"GGUF\x03\x00\x00\x00\x00"), "truncated", id="truncated header"),
    pytest.param(gguf_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0)), "GGUF version 1 is not supported", id="version 1"),
    pytest.param(
        gguf_bytes(HEADER + struct.pack("<Q", 1) + b"x" + struct.pack("<I", 99)),
        "unknown GGUF value type 99",
        id="unknown value type",
    ),
    pytest.param(
        gguf_bytes(HEADER + struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<II", 4, 0)),
        "malformed",
        id="key not UTF-8",
    ),
    pytest.param(
        gguf_bytes(HEADER + struct.pack("<Q", 1) + b"x" + struct.pack("<IIQ", 9, 8, 2**60)),
        "truncated",
        id="string array longer than the file",
    ),
    pytest.param(
        gguf_fields({"tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.eos_token_id": 0}),
        "no tokenizer.ggml.model",
        id="no tokenizer model",
    ),
    pytest.param(
        gguf_fields({**GPT2, "tokenizer.ggml.model": "bert"}),
        "unsupported tokenizer model 'bert'",
        id="WordPiece model",
    ),
    pytest.param(
        gguf_fields({**GPT2, "tokenizer.ggml.tokens": [1, 2]}), "not an array of strings", id="tokens are numbers"
    ),
    pytest.param(
        gguf_fields({**GPT2, "tokenizer.ggml.token_type": [NORMAL]}), "one type per token", id="fewer types than tokens"
    ),
    pytest.param(
        gguf_fields({**GPT2, "tokenizer.ggml.eos_token_id": 2}), "end-of-sequence id 2", id="EOS past the end"
    ),
    pytest.param(
        gguf_fields({**GPT2, "tokenizer.ggml.eos_token_id": "b"}),
        "tokenizer.ggml.eos_token_id is not an integer",
        id="EOS is a string",
    ),
    pytest.param(
        gguf_fields({k: v for k, v in GPT2.items() if "eos" not in k}), "no end-of-sequence token", id="no EOS"
    ),
]


@pytest.mark.parametrize(("make", "message"), MALFORMED_GGUF)
def test_malformed_gguf_is_refused_naming_the_file(tmp_path, make, message):
    path = tmp_path / "model.gguf"
    make(path)
    with pytest.raises(VocabularyError, match=re.escape(message)) as error:
        Vocabulary.from_gguf(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("keep", [20, 2_000, 400_000, 1_500_000], ids=lambda n: f"first {n} bytes")
def test_truncated_smollm2_is_refused(tmp_path, smollm2_gguf, keep):
    path = tmp_path / "cut.gguf"
    with smollm2_gguf.open("rb") as f:
        path.write_bytes(f.read(keep))
    with pytest.raises(VocabularyError, match="truncated GGUF file"):
        Vocabulary.from_gguf(path)


# --- tokenizer.json ----------------------------------------------------------------------------------


def write_tokenizer(folder: Path, spec, config=None, generation=None) -> Path:
    path = folder / "tokenizer.json"
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    for name, content in (("tokenizer_config.json", config), ("generation_config.json", generation)):
        if content is not None:
            (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return path


BYTE_LEVEL_SPEC = {
    "model": {"type": "BPE", "vocab": {"Ġhi": 0, "a": 1, "Ã©": 2}, "merges": []},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [
        {"id": 3, "content": "<|im_end|>", "special": True},
        {"id": 4, "content": "</s>", "special": True},
        {"id": 5, "content": "<tool_call>", "special": False},
        {"id": 6, "content": "é", "special": False},
    ],
}

EOS_CONFIGS = [
    pytest.param({"eos_token": "</s>"}, None, (3, 4), id="eos_token as a string"),
    pytest.param({"eos_token": {"content": "</s>", "special": True}}, None, (3, 4), id="eos_token as a dict"),
    pytest.param(None, {"eos_token_id": [1, 4]}, (1, 3, 4), id="generation_config list"),
    pytest.param({"eos_token": None}, {"eos_token_id": 4}, (3, 4), id="generation_config int"),
    pytest.param(None, None, (3, 4), id="no configs: <|im_end|> and </s> by their text"),
]


@pytest.mark.parametrize(("config", "generation", "eos_ids"), EOS_CONFIGS)
def test_byte_level_tokenizer_json(tmp_path, config, generation, eos_ids):
    """Added tokens are matched in the input text, so a non-special one is its text, never byte-mapped.

    An EOS token is never text, even where the tokenizer calls it a normal piece.
    """
    vocab = Vocabulary.from_tokenizer_json(write_tokenizer(tmp_path, BYTE_LEVEL_SPEC, config, generation))
    text = [b" hi", b"a", b"\xc3\xa9", b"", b"", b"<tool_call>", "é".encode()]
    assert all_tokens(vocab) == [b"" if i in eos_ids else t for i, t in enumerate(text)]
    assert vocab.eos_ids == eos_ids


SENTENCEPIECE_DECODERS = [
    pytest.param(
        tokenizers.decoders.Sequence(
            [
                tokenizers.decoders.Replace("▁", " "),
                tokenizers.decoders.ByteFallback(),
                tokenizers.decoders.Fuse(),
                tokenizers.decoders.Strip(" ", 1, 0),
            ]
        ),
        id="Llama 2 style Replace+ByteFallback",
    ),
    pytest.param(tokenizers.decoders.Metaspace(), id="Metaspace"),
]


@pytest.mark.parametrize("decoder", SENTENCEPIECE_DECODERS)
def test_sentencepiece_tokenizer_json_decodes_as_tokenizers_does(tmp_path, decoder):
    """Built with ``tokenizers`` itself; each piece is compared with that library's own decoding.

    The reference leaves out Strip and Metaspace's prefix handling: those drop the space at the
    start of a whole text, while a token's bytes keep it.
    """
    pieces = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), "▁the", "▁", "é", "▁▁", "<0xZZ>", "a▁b"]
    tok = tokenizers.Tokenizer(tokenizers.models.Unigram([(p, -float(i)) for i, p in enumerate(pieces)], 0, True))
    tok.decoder = decoder
    tok.add_special_tokens(["<start_of_turn>", "<end_of_turn>"])
    tok.add_tokens([tokenizers.AddedToken("▁▁▁", normalized=False), tokenizers.AddedToken("<b>")])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    vocab = Vocabulary.from_tokenizer_json(path)
    reference = tokenizers.decoders.Sequence(
        [tokenizers.decoders.Replace("▁", " "), tokenizers.decoders.ByteFallback(), tokenizers.decoders.Fuse()]
    )
    texts = [vocab.token_bytes(i).decode("utf-8", "replace") for i in range(3, len(pieces))]
    assert texts == [reference.decode([p]) for p in pieces[3:]]
    assert all_tokens(vocab)[3 : 3 + 256] == [bytes([b]) for b in range(256)]
    assert all_tokens(vocab)[-4:] == [b"", b"", b"   ", b"<b>"]
    assert (vocab.size, vocab.eos_ids) == (len(pieces) + 4, (2, len(pieces) + 1))


MINIMAL = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}, "decoder": {"type": "ByteLevel"}}

MALFORMED_TOKENIZER_JSON = [
    pytest.param(None, None, "no such file", id="missing file"),
    pytest.param("\x00\xff garbage", None, "not JSON", id="garbage"),
    pytest.param({"version": "1.0", "truncation": None}, None, "not a tokenizer.json", id="JSON without a model"),
    pytest.param([1, 2, 3], None, "not a tokenizer.json", id="JSON list"),
    pytest.param(
        {**MINIMAL, "decoder": {"type": "WordPiece"}}, None, "unsupported decoder ['WordPiece']", id="WordPiece decoder"
    ),
    pytest.param({**MINIMAL, "decoder": None}, None, "unsupported decoder None", id="no decoder"),
    pytest.param(
        {**MINIMAL, "model": {"type": "WordPiece", "vocab": {"a": 0}}},
        None,
        "no BPE or Unigram vocabulary",
        id="WordPiece model",
    ),
    pytest.param({**MINIMAL, "model": {"type": "BPE", "vocab": {}}}, None, "has no tokens", id="empty vocabulary"),
    pytest.param({**MINIMAL, "model": {"type": "BPE", "vocab": {"a": -1}}}, None, "has no valid id", id="negative id"),
    pytest.param(
        {**MINIMAL, "model": {"type": "BPE", "vocab": {"a": 10**12}}}, None, "has no valid id", id="absurd id"
    ),
    pytest.param({**MINIMAL, "added_tokens": [{"content": "</s>"}]}, None, "has no valid id", id="added token, no id"),
    pytest.param({**MINIMAL, "added_tokens": {"</s>": 2}}, None, "added_tokens is not a list", id="added as a dict"),
    pytest.param(MINIMAL, {"eos_token": "</s>"}, "eos_token '</s>' is not a token", id="EOS names no token"),
    pytest.param(MINIMAL, {"eos_token": ["</s>"]}, "eos_token ['</s>'] is not a token", id="EOS is a list"),
    pytest.param(MINIMAL, "{", "not JSON", id="config is not JSON"),
    pytest.param(MINIMAL, {"eos_token": None}, "no end-of-sequence token", id="no EOS"),
]


@pytest.mark.parametrize(("spec", "config", "message"), MALFORMED_TOKENIZER_JSON)
def test_malformed_tokenizer_json_is_refused_naming_the_file(tmp_path, spec, config, message):
    path = tmp_path / "tokenizer.json" if spec is None else write_tokenizer(tmp_path, spec, config)
    with pytest.raises(VocabularyError, match=re.escape(message)) as error:
        Vocabulary.from_tokenizer_json(path)
    assert str(tmp_path) in str(error.value)


def test_generation_config_eos_past_the_end_is_refused(tmp_path):
    path = write_tokenizer(tmp_path, MINIMAL, generation={"eos_token_id": [1, 7]})
    with pytest.raises(VocabularyError, match="end-of-sequence id 7"):
        Vocabulary.from_tokenizer_json(path)


# --- transformers and llama-cpp-python objects (stand-ins: neither library is a dependency) ----------


class FastTokenizer:
    """The parts of a transformers ``PreTrainedTokenizerFast`` that ``from_hf`` reads."""

    name_or_path = "stand-in"

    def __init__(self, backend, eos_token_id: int | None, length: int) -> None:
        self.backend_tokenizer = backend
        self.eos_token_id = eos_token_id
        self._length = length

    def __len__(self) -> int:
        return self._length


@pytest.mark.parametrize(("size", "expected_size"), [(None, 128_257), (128_320, 128_320)], ids=["len", "wider logits"])
def test_from_hf_reads_the_backend_like_tokenizer_json(llama3_vocab, llama3_tokenizer_json, size, expected_size):
    backend = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_json))
    vocab = Vocabulary.from_hf(FastTokenizer(backend, 128009, 128_257), size=size)
    assert all_tokens(vocab)[: llama3_vocab.size] == all_tokens(llama3_vocab)
    assert (vocab.size, vocab.eos_ids) == (expected_size, (128001, 128008, 128009))


def test_from_hf_refuses_a_slow_tokenizer():
    with pytest.raises(VocabularyError, match="not a fast tokenizer"):
        Vocabulary.from_hf(SimpleNamespace(eos_token_id=2, name_or_path="slow"))


LLAMA_PIECES = [b"", b"hello", b" " * 300, b"\xe9", b"{"]
#: Token attributes (llama.h's values: normal 4, control 8, user-defined 16) and texts, as llama.cpp holds them
LLAMA_ATTRS = [8, 4, 4, 4, 16]
LLAMA_TEXTS = [b"<|end|>", b"hello", b" " * 300, b"\xc3\xa9", b"{"]


def fake_llama_cpp(handle: object, eog_function: str, attr_function: str, text_function: str) -> ModuleType:
    """A llama_cpp stand-in: llama_token_to_piece as llama.h states it (negative: the size it needs)."""
    module = ModuleType("llama_cpp")
    module.LLAMA_TOKEN_ATTR_CONTROL, module.LLAMA_TOKEN_ATTR_USER_DEFINED = 8, 16
    setattr(module, attr_function, lambda h, token: LLAMA_ATTRS[token] if h is handle else 0)
    setattr(module, text_function, lambda h, token: LLAMA_TEXTS[token] if h is handle else b"")

    def token_to_piece(h, token, buf, length, lstrip, special):
        assert (h, lstrip, special) == (handle, 0, False)
        piece = LLAMA_PIECES[token]
        if len(piece) > length:
            return -len(piece)
        ctypes.memmove(buf, piece, len(piece))
        return len(piece)

    module.llama_token_to_piece = token_to_piece
    setattr(module, eog_function, lambda h, token: h is handle and token == 0)
    return module


LLAMA_APIS = [
    pytest.param("vocab", ("llama_vocab_is_eog", "llama_vocab_get_attr", "llama_vocab_get_text"), id="llama_vocab API"),
    pytest.param("model", ("llama_token_is_eog", "llama_token_get_attr", "llama_token_get_text"),
                 id="llama_model API before the vocab split"),
]


@pytest.mark.parametrize(("attribute", "functions"), LLAMA_APIS)
def test_from_llama_reads_every_piece_through_llama_cpp(monkeypatch, attribute, functions):
    handle = object()
    monkeypatch.setitem(sys.modules, "llama_cpp", fake_llama_cpp(handle, *functions))
    model = SimpleNamespace(model=handle) if attribute == "model" else SimpleNamespace(vocab=handle, model=object())
    vocab = Vocabulary.from_llama(SimpleNamespace(_model=model, n_vocab=lambda: len(LLAMA_PIECES)))
    assert (all_tokens(vocab), vocab.eos_ids) == (LLAMA_PIECES, (0,))
    assert dict(vocab.special_texts) == {0: "<|end|>", 4: "{"}  # control and user-defined tokens only
