"""``llamay serve`` as a process: progress on stderr, a log line per request, clean exit on SIGINT and SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llamay.cli import main

ROOT = Path(__file__).resolve().parents[1]


def start(*args: str) -> tuple[subprocess.Popen, int, list[str]]:
    """A ``llamay serve`` subprocess on a free port, once it says it is serving; its stderr lines so far."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "llamay.cli", "serve", "--port", "0", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if found := re.search(r"on http://127\.0\.0\.1:(\d+)", line):
            return proc, int(found.group(1)), lines
    proc.kill()
    pytest.fail("llamay serve did not start:\n" + "".join(lines))


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    return response.status, response.read()


def post(port: int, path: str, body: dict, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_logs_and_stops_cleanly(sig, tmp_path):
    lexicon = tmp_path / "words.txt"
    lexicon.write_text("# a tiny word list\nhello\nworld\n")
    proc, port, lines = start("--backend", "fixture", "--alias", "tiny", "--api-key", "k", "--lexicon", str(lexicon))
    try:
        assert any("loaded fixture" in line for line in lines) and any("2 words" in line for line in lines)
        status, health = get(port, "/health")
        assert status == 200 and json.loads(health) == {
            "status": "ok", "model": "fixture", "slots": {"total": 1, "busy": 0, "waiting": 0}}
        assert get(port, "/api/tags")[0] == 401
        status, body = post(port, "/v1/chat/completions", {"model": "tiny", "max_tokens": 3, "response_format": {
            "type": "json_object"}, "messages": [{"role": "user", "content": "hi"}]}, {"Authorization": "Bearer k"})
        assert status == 200 and body["usage"]["completion_tokens"] <= 3
        assert get(port, "/metrics")[0] == 401  # the key guards the metrics too
        assert get(port, "/made/up/path")[0] == 404
        assert get(port, "/v1/models/tiny", {"Authorization": "Bearer k"})[0] == 200
        status, metrics = get(port, "/metrics", {"Authorization": "Bearer k"})
        assert status == 200
        tokens = body["usage"]["completion_tokens"]
        for line in ['llamay_requests_total{route="/v1/chat/completions",status="200"} 1.0',
                     'llamay_requests_total{route="other",status="404"} 1.0',
                     'llamay_requests_total{route="/v1/models/{id}",status="200"} 1.0',
                     'llamay_requests_total{route="/api/tags",status="401"} 1.0',
                     f"llamay_tokens_generated_total {float(tokens)}", "llamay_slots 1.0",
                     "llamay_slots_busy 0.0", "llamay_requests_waiting 0.0",
                     f"llamay_time_to_first_token_seconds_count {1.0 if tokens else 0.0}"]:
            assert line in metrics.decode().splitlines(), line
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert re.search(r"POST /v1/chat/completions 200 \d+ms tokens=\d+\+\d+ [\d.]+ tok/s finish=\w+ constraint=json",
                     err), err
    assert "GET /api/tags 401" in err and "llamay: stopped" in err


def test_serve_takes_a_tool_dialect_and_a_chat_template(tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    proc, port, lines = start("--backend", "fixture", "--tool-dialect", "mistral", "--chat-template", str(template))
    try:
        assert any("tool dialect mistral" in line for line in lines), lines
        status, body = post(port, "/api/show", {})
        assert status == 200 and body["model_info"]["llamay.tool_dialect"] == "mistral"
        assert body["template"] == template.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_serve_refuses_an_unknown_tool_dialect(capsys):
    with pytest.raises(SystemExit) as info:
        main(["serve", "--tool-dialect", "klingon"])
    assert info.value.code == 2


def test_serve_reports_a_model_it_cannot_load(capsys):
    assert main(["serve", "--backend", "fixture-nope"]) == 1
    assert "cannot load the model" in capsys.readouterr().err


@pytest.mark.parametrize(("backend", "flag", "says"), [
    ("fixture", ["--parallel", "2"], "--parallel does not apply to the fixture backend; it runs one generation"),
    ("fixture", ["--ctx-size", "2048"], "--ctx-size does not apply to the fixture backend"),
    ("fixture", ["--gpu-layers", "10"], "--gpu-layers does not apply to the fixture backend"),
    ("fixture", ["--device", "cuda"], "--device does not apply to the fixture backend"),
    ("llamacpp", ["--device", "cuda"], "--device does not apply to the llamacpp backend"),
    ("mlx", ["--ctx-size", "2048"], "--ctx-size does not apply to the mlx backend"),
    ("transformers", ["--parallel", "2"], "--parallel does not apply to the transformers backend; it runs one"),
    ("llamacpp", ["--tensor-parallel-size", "2"], "--tensor-parallel-size does not apply to the llamacpp backend"),
    ("mlx", ["--pipeline-parallel-size", "2"], "--pipeline-parallel-size does not apply to the mlx backend"),
    ("fixture", ["--vllm-arg", "dtype=float32"], "--vllm-arg does not apply to the fixture backend"),
])
def test_serve_refuses_a_flag_its_backend_does_not_take(capsys, backend, flag, says):
    assert main(["serve", "--backend", backend, *flag]) == 1
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--queue", "-1"], ["--parallel", "0"], ["--ctx-size", "0"], ["--gpu-layers", "-2"],
                                  ["--vllm-arg", "dtype"], ["--vllm-arg", "not a name=1"]])
def test_serve_needs_valid_numbers(capsys, flag):
    with pytest.raises(SystemExit) as info:
        main(["serve", *flag])
    assert info.value.code == 2


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "serve" in capsys.readouterr().err


def test_serve_sizes_its_slots_threads_and_gpu_layers_from_the_flags():
    """The startup line says what the KV cache holds: --ctx-size is per slot."""
    proc, port, lines = start("--parallel", "2", "--ctx-size", "1024", "--threads", "1", "--gpu-layers", "0")
    try:
        assert any("2 slots of 1024 positions each" in line and "threads: 1; GPU layers: 0" in line
                   for line in lines), lines
        status, body = post(port, "/v1/chat/completions", {"max_tokens": 4, "messages": [
            {"role": "user", "content": "word " * 1100}]})
        assert status == 400 and "1024" in body["error"]["message"], body
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
