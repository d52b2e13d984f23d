"""Smoke test of examples/serve: a local Ray Serve instance serving the
exported artifacts, the compiled model and eager torch (a small BERT
classifier, 90% CSR encoder linears) answers requests of each shape with
what eager torch computes on the same pruned weights, with no errors."""

from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from conftest import REPO_ROOT

pytest.importorskip("ray.serve", reason="ray[serve] is not importable (requirements-dev.txt pins it)",
                    exc_type=ImportError)

sys.path.insert(0, str(REPO_ROOT / "examples" / "serve"))
from classifier import ModelConfig, Prepared, example_inputs, prepare, pruned_model  # noqa: E402
from serve_app import ENGINES, build_app, start_ray, stop_ray  # noqa: E402

SMALL = ModelConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
# Request shapes (batch 1-8, sequence 32-128); the artifacts' buckets are the
# two larger ones, so a 1 x 32 request runs padded to 4 x 64.
SHAPES = [(1, 32), (4, 64), (8, 128)]
BUCKETS = [(4, 64), (8, 128)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Prepared]]:
    prepared = prepare(tmp_path_factory.mktemp("serve"), SMALL, "csr90", BUCKETS)
    port = _free_port()
    start_ray(len(ENGINES), port)
    try:
        from ray import serve
        serve.run_many([serve.RunTarget(build_app(engine, str(prepared.workdir), replicas=1, threads=1,
                                                  max_ongoing=4, warmup=1), name=engine, route_prefix=f"/{engine}")
                        for engine in ENGINES])   # the replicas start side by side
        yield f"http://127.0.0.1:{port}", prepared
    finally:
        stop_ray()


def test_every_engine_answers_every_shape_as_eager_torch(server: tuple[str, Prepared]) -> None:
    base, prepared = server
    reference = pruned_model(prepared)
    requests = [(engine, shape, seed) for engine in ENGINES for shape in SHAPES for seed in range(2)]
    with ThreadPoolExecutor(8) as pool:   # concurrent, as clients are
        answers = list(pool.map(lambda r: _post(f"{base}/{r[0]}", {
            name: t.tolist() for name, t in zip(("input_ids", "attention_mask"), example_inputs(*r[1], seed=r[2]))
        }), requests))
    errors = [(r, a) for r, a in zip(requests, answers) if a[0] != 200]
    assert not errors, errors
    with torch.inference_mode():
        for (engine, shape, seed), (_, body) in zip(requests, answers):
            want = reference(*example_inputs(*shape, seed=seed))
            got = torch.tensor(body["logits"])
            assert body["engine"] == engine and got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=lambda m: f"{engine} {shape}: {m}")


def test_bad_requests_get_a_400_saying_why(server: tuple[str, Prepared]) -> None:
    base, _ = server
    ids, mask = example_inputs(8, 256)
    status, body = _post(f"{base}/artifact", {"input_ids": ids.tolist(), "attention_mask": mask.tolist()})
    assert status == 400 and "larger than every bucket" in str(body)
    status, body = _post(f"{base}/eager", {"input_ids": [[1, 2, 3]]})
    assert status == 400 and "attention_mask" in str(body)
    for engine in ENGINES:   # refused before any engine runs (the artifact would abort the replica)
        status, body = _post(f"{base}/{engine}", {"input_ids": [[1, SMALL.vocab_size]], "attention_mask": [[1, 1]]})
        assert status == 400 and f"token ids must lie in [0, {SMALL.vocab_size})" in str(body), (engine, body)
    # The replica is still serving.
    ids, mask = example_inputs(1, 32)
    assert _post(f"{base}/artifact", {"input_ids": ids.tolist(), "attention_mask": mask.tolist()})[0] == 200
