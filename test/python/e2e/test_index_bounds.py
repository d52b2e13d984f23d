"""Integer inputs that index a table (embedding ids, index_select / gather
indices): the compiled gather asserts its index is in range, and a failed
assert aborts the process. Every caller checks them first and raises: the
in-process compiled function, the Python loader, the C loader."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.runtime import artifact

from .test_artifact import REPO_ROOT, _build_c


class Tagger(torch.nn.Module):
    """ids -> embedding -> sparse linear; tags -> index_select of a second table (by tags.flatten())."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.classes = torch.nn.Parameter(torch.randn(30, 8))
        self.head = torch.nn.Linear(16, 8)

    def forward(self, ids: torch.Tensor, tags: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        hidden = self.head(self.embed(ids))
        return hidden + self.classes.index_select(0, tags.flatten()).sum(0) + x


@pytest.fixture(scope="module")
def compiled() -> tuple[torch.nn.Module, sm.CompiledModule, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    model = Tagger().eval()
    ids, tags, x = torch.randint(0, 50, (2, 5)), torch.randint(0, 30, (3,), dtype=torch.int32), torch.randn(2, 5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"head.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7))}, (ids, tags, x),
                        mode="graph")
    return model, fn, (ids, tags, x)


def test_in_process_out_of_range_ids_raise(compiled) -> None:
    model, fn, (ids, tags, x) = compiled
    edge = ids.clone()
    edge[0, 0], edge[0, 1] = 49, 0   # the ends of the range run
    pruned = Tagger().eval()
    pruned.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    with torch.no_grad():
        torch.testing.assert_close(fn(edge, tags, x), pruned(edge, tags, x), rtol=1e-4, atol=1e-5)
    bad = ids.clone()
    bad[1, 2] = 50   # the embedding has 50 rows
    with pytest.raises(sm.SpecError, match=r"input 0: its values index the embedding of 'embed.weight' \(dim 0 of "
                                           r"size 50\): expected values in \[0, 50\), got max 50"):
        fn(bad, tags, x)
    bad[1, 2] = -1
    with pytest.raises(sm.SpecError, match=r"input 0: .* got min -1"):
        fn(bad, tags, x)
    bad_tags = tags.clone()
    bad_tags[2] = 30
    with pytest.raises(sm.SpecError, match=r"input 1: its values index the index_select of 'classes' \(dim 0 of "
                                           r"size 30\): expected values in \[0, 30\), got max 30"):
        fn(ids, bad_tags, x)


def test_loaded_artifacts_check_the_bounds(compiled, tmp_path: Path) -> None:
    _, fn, (ids, tags, x) = compiled
    path = fn.export(tmp_path / "tagger")
    loaded = sm.load(path)
    assert [i.get("values_below") for i in loaded.manifest["signature"]["inputs"]] == [50, 30, None]
    torch.testing.assert_close(loaded(ids, tags, x), fn(ids, tags, x), rtol=0, atol=0)
    bad = tags.clone()
    bad[0] = 41
    with pytest.raises(sm.SpecError, match=r"input 1: its values index the index_select of 'classes'"):
        loaded(ids, bad, x)
    # The C loader, through the example program, in a subprocess: a clear error, not an abort.
    runner = _build_c(tmp_path, [REPO_ROOT / "examples" / "c" / "run_model.c",
                                 artifact.c_dir() / "sparse_mlir_runtime.c"], "run_model")
    for values, ok in ((tags, True), (bad, False)):
        files = [tmp_path / f"{name}.bin" for name in ("ids", "tags", "x")]
        for file, tensor in zip(files, (ids, values, x)):
            tensor.numpy().tofile(file)
        done = subprocess.run([str(runner), str(path), *map(str, files), str(tmp_path / "y.bin")],
                              capture_output=True, text=True, timeout=120)
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
            y = np.fromfile(tmp_path / "y.bin", np.float32).reshape(2, 5, 8)
            assert np.array_equal(y, fn(ids, tags, x).numpy())
        else:
            assert done.returncode == 1, (done.returncode, done.stdout + done.stderr)
            assert "input 1: its values index a table of size 30: expected values in [0, 30), got 41" in done.stderr


def test_bert_bounds_only_the_token_ids_by_the_vocabulary() -> None:
    # HF BERT also gathers token types and positions from lifted buffers
    # (placeholders of their own): those are no inputs and bound nothing.
    from sparse_mlir.compiler.importers.torch_fx import import_model
    from sparse_mlir.compiler.index_bounds import index_bounds
    from sparse_mlir.testing import import_transformers

    transformers = import_transformers()
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)

    class Hidden(torch.nn.Module):   # (whole-graph imports return one tensor)
        def __init__(self) -> None:
            super().__init__()
            self.bert = transformers.BertModel(config)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids, mask = torch.randint(0, 99, (1, 8)), torch.ones(1, 8, dtype=torch.int64)
    bounds = index_bounds(import_model(Hidden().eval(), (ids, mask)), (ids, mask))
    assert bounds == {0: (99, "embedding of 'bert.embeddings.word_embeddings.weight' (dim 0 of size 99)")}


def test_a_bound_on_a_float_input_is_refused(compiled, tmp_path: Path) -> None:
    from .crafting import rewrite_record

    _, fn, _ = compiled
    path = fn.export(tmp_path / "tagger")
    rewrite_record(path, 3, offset=7)   # records: the result, then inputs 0-2; input 2 is x (float32)
    with pytest.raises(artifact.ArtifactError, match=r"record of input 2: a values bound of 7 for a float32 input "
                                                     r"\(bounds are for integer inputs\)"):
        sm.load(path)
    runner = _build_c(tmp_path, [REPO_ROOT / "examples" / "c" / "run_model.c",
                                 artifact.c_dir() / "sparse_mlir_runtime.c"], "run_model")
    done = subprocess.run([str(runner), str(path), *["unused"] * 3, str(tmp_path / "y.bin")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "record of input 2: a values bound of 7 for a float32 input (bounds are for integer inputs)" in done.stderr
