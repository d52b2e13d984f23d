"""Mixture-of-experts blocks in mode="regions": the experts' sparse linears
see another token count every call (0 included) and must neither compile
nor time then; results against eager on the same pruned weights."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm
from sparse_mlir.compiler.regions import kernels, moe
from sparse_mlir.compiler.regions.routing import SIZES, RoutedTokens
from sparse_mlir.errors import SpecError


class Expert(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.w1 = torch.nn.Linear(hidden, ffn, bias=False)
        self.w2 = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)))


class MoE(torch.nn.Module):
    """Router linear -> topk -> softmax over the k -> per expert: index_select
    its tokens, the expert FFN, index_add back weighted."""

    def __init__(self, hidden: int = 32, ffn: int = 64, experts: int = 4, k: int = 2,
                 experts_attr: str = "experts") -> None:
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(hidden, experts, bias=False)
        self.experts_attr = experts_attr   # another name: the name heuristic does not see experts
        setattr(self, experts_attr, torch.nn.ModuleList(Expert(hidden, ffn) for _ in range(experts)))

    @property
    def expert_list(self) -> torch.nn.ModuleList:
        return getattr(self, self.experts_attr)

    def routes(self, x: torch.Tensor) -> torch.Tensor:
        return torch.topk(self.router(x), self.k, dim=-1).indices

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top, chosen = torch.topk(self.router(x), self.k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        out = torch.zeros_like(x)
        for index, expert in enumerate(self.expert_list):
            tokens, slot = torch.where(chosen == index)
            y = expert(torch.index_select(x, 0, tokens)) * weights[tokens, slot, None]
            out = out.index_add(0, tokens, y)
        return out


FORMATS = {"csr90": sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": sm.NM(2, 4)}
EXAMPLE_TOKENS = 12


def _compile(model: MoE, encoding: sm.Encoding, **options) -> tuple[torch.nn.Module, MoE]:
    """fn, and a twin of `model` holding fn's effective weights (eager on the same masks)."""
    encodings = {name: encoding for name, _ in model.named_parameters() if name.startswith("experts.")}
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)   # every expert linear is a region
        fn = sm.compile(model, encodings, example_args=(torch.randn(EXAMPLE_TOKENS, 32),), **options)
    twin = MoE(k=model.k)
    twin.load_state_dict(model.state_dict())
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    return fn, twin.eval()


def _counts(model: MoE, x: torch.Tensor) -> list[int]:
    chosen = model.routes(x)
    return [int((chosen == e).sum()) for e in range(len(model.expert_list))]


@pytest.fixture
def compiles(monkeypatch) -> list[int]:
    """How many kernels were built or loaded (kernels.compile_linear calls) since it was made."""
    calls = [0]
    original = kernels.compile_linear

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(kernels, "compile_linear", counting)
    return calls


@pytest.mark.parametrize("k", [1, 2], ids=["top1", "top2"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_dynamic_routing_matches_eager_without_compiling(fmt: str, k: int, compiles: list[int]) -> None:
    torch.manual_seed(0)
    model = MoE(k=k).eval()
    fn, twin = _compile(model, FORMATS[fmt], cost_model=False)   # our kernels at every count
    routed = [r for r in fn.regions() if r.routing is not None]
    assert {r.name for r in routed} == {f"experts.{e}.w{i}.weight" for e in range(4) for i in (1, 2)}
    built, decided = compiles[0], sum(r.decide_ms for r in fn.regions())
    seen: set[tuple[int, ...]] = set()
    for tokens in (EXAMPLE_TOKENS, 7, 11, 1, 3, 12, 9, 5):
        x = torch.randn(tokens, 32)
        seen.add(tuple(_counts(model, x)))
        with torch.no_grad():
            torch.testing.assert_close(fn(x), twin(x), rtol=1e-5, atol=1e-5)
    assert len(seen) == 8   # the experts' counts changed every call
    assert compiles[0] == built, "a call built a kernel"
    assert sum(r.decide_ms for r in fn.regions()) == decided, "a call made a cost-model choice"
    assert all(c.kernel is not None for r in routed for c in r.choices.values())
    # One choice per prepared size, not per count.
    assert all(len(r.choices) == len(r.routing.prepared_sizes()) for r in routed)


def test_an_expert_given_no_token_runs_nothing(compiles: list[int]) -> None:
    torch.manual_seed(1)
    model = MoE(k=1).eval()
    fn, twin = _compile(model, FORMATS["csr90"], cost_model=False)
    built = compiles[0]
    x = torch.randn(10, 32)
    with torch.no_grad():   # expert 3 never wins the router: its row is far below the others
        for m in (fn.model, model, twin):
            m.router.weight[3] = -m.router.weight[3].sign() * 10
        x = x.abs() * torch.sign(model.router.weight[3]).neg()
    counts = _counts(model, x)
    assert counts[3] == 0 and sum(counts) == 10
    with torch.no_grad():
        torch.testing.assert_close(fn(x), twin(x), rtol=1e-5, atol=1e-5)
    region = next(r for r in fn.regions() if r.name == "experts.3.w1.weight")
    assert region(torch.empty(0, 32), region.buffers, None).shape == (0, 64)
    assert compiles[0] == built


def test_cost_model_choices_are_made_at_compile_time(compiles: list[int], one_thread) -> None:
    torch.manual_seed(2)
    model = MoE().eval()
    fn, twin = _compile(model, FORMATS["csr90"])
    built, decided = compiles[0], sum(r.decide_ms for r in fn.regions())
    for tokens in (4, 12, 2, 9):
        x = torch.randn(tokens, 32)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), twin(x), rtol=1e-5, atol=1e-5)
    assert compiles[0] == built and sum(r.decide_ms for r in fn.regions()) == decided
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert "an MoE expert (routed)" in plan["experts.0.w1.weight"].applied
    assert "index_select / index_add" in plan["experts.0.w1.weight"].applied


def test_training_through_the_experts_matches_eager() -> None:
    torch.manual_seed(3)
    model = MoE()
    fn, twin = _compile(model, FORMATS["2:4"], cost_model=False)
    fn.train()
    twin.train()
    for tokens in (12, 5, 9):
        x = torch.randn(tokens, 32)
        ours_x, eager_x = x.clone().requires_grad_(), x.clone().requires_grad_()
        fn.zero_grad()
        twin.zero_grad()
        ours, expected = fn(ours_x), twin(eager_x)
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
        ours.square().sum().backward()
        expected.square().sum().backward()
        torch.testing.assert_close(ours_x.grad, eager_x.grad, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(fn.model.router.weight.grad, twin.router.weight.grad, rtol=1e-4, atol=1e-5)
        for region in fn.regions():
            layer = region.name.rsplit(".", 1)[0]
            torch.testing.assert_close(fn.model.get_submodule(layer).weight_values.grad,
                                       twin.get_parameter(region.name).grad[region._rows, region._cols],
                                       rtol=1e-4, atol=1e-5)


def test_experts_of_different_formats_each_run_their_own() -> None:
    torch.manual_seed(4)
    model = MoE().eval()
    encodings = {name: (FORMATS["2:4"] if ".1." in name else FORMATS["csr90"])
                 for name, _ in model.named_parameters() if name.startswith("experts.")}
    fn = sm.compile(model, encodings, example_args=(torch.randn(EXAMPLE_TOKENS, 32),), cost_model=False)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    formats = {r.name: r.encoding.format_name for r in fn.regions()}
    assert formats["experts.1.w1.weight"] != formats["experts.0.w1.weight"]
    x = torch.randn(7, 32)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_bad_input_names_the_expert_weight() -> None:
    torch.manual_seed(5)
    model = MoE(ffn=66).eval()   # w2 reads 66 features: not a multiple of 4
    with pytest.raises(SpecError, match=r"experts\.0\.w2\.weight"):
        sm.compile(model, {"experts.0.w2.weight": sm.NM(2, 4)}, example_args=(torch.randn(8, 32),))
    fn, _ = _compile(MoE().eval(), FORMATS["csr90"], cost_model=False)
    region = next(r for r in fn.regions() if r.name == "experts.2.w1.weight")
    with pytest.raises(SpecError, match=r"experts\.2\.w1\.weight .*last dim is 32, got shape \(3, 31\)"):
        region(torch.randn(3, 31), region.buffers, None)
    with pytest.raises(SpecError, match=r"experts\.2\.w1\.weight.*floating-point"):
        region(torch.ones(3, 32, dtype=torch.int64), region.buffers, None)


def test_routed_experts_names_the_experts_explicitly(compiles: list[int]) -> None:
    torch.manual_seed(6)
    model = MoE(k=2, experts_attr="ffns").eval()   # no module named like an expert
    encodings = {name: FORMATS["csr90"] for name, _ in model.named_parameters() if name.startswith("ffns.")}
    example = (torch.randn(EXAMPLE_TOKENS, 32),)
    unrouted = sm.compile(model, encodings, example_args=example, cost_model=False)
    assert not [r for r in unrouted.regions() if r.routing is not None]   # the name heuristic misses them
    fn = sm.compile(model, encodings, example_args=example, cost_model=False, routed_experts=["ffns.*"])
    assert {r.name for r in fn.regions() if r.routing is not None} == set(encodings)
    assert "an MoE expert (routed)" in {e.name: e for e in fn.sparsity_plan()}["ffns.2.w2.weight"].applied
    twin = MoE(k=2, experts_attr="ffns")
    twin.load_state_dict(model.state_dict())
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    built = compiles[0]
    for tokens in (5, 12, 1, 9):
        x = torch.randn(tokens, 32)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), twin.eval()(x), rtol=1e-5, atol=1e-5)
    assert compiles[0] == built, "a routed expert's call built a kernel"
    # A plain name (a str is one pattern); [] routes nothing (even where names say "expert").
    one = sm.compile(model, encodings, example_args=example, cost_model=False,
                     routed_experts="ffns.0.w1.weight")
    assert [r.name for r in one.regions() if r.routing is not None] == ["ffns.0.w1.weight"]
    named = MoE().eval()
    plain = sm.compile(named, {n: FORMATS["csr90"] for n, _ in named.named_parameters() if n.startswith("experts.")},
                       example_args=example, cost_model=False, routed_experts=[])
    assert not [r for r in plain.regions() if r.routing is not None]


def test_routed_experts_bad_input_is_a_clear_error() -> None:
    model = MoE(experts_attr="ffns").eval()
    encodings = {"ffns.0.w1.weight": FORMATS["csr90"]}
    example = (torch.randn(EXAMPLE_TOKENS, 32),)
    with pytest.raises(SpecError, match=r"routed_experts: 'experts\.\*' matches no encoded weight "
                                        r"\(encoded: ffns\.0\.w1\.weight\)"):
        sm.compile(model, encodings, example_args=example, routed_experts=["experts.*"])
    with pytest.raises(SpecError, match=r"routed_experts: expected weight names or fnmatch patterns \(str\), got 3"):
        sm.compile(model, encodings, example_args=example, routed_experts=["ffns.*", 3])
    with pytest.raises(SpecError, match=r"routed_experts .* needs mode='regions'"):
        sm.compile(model, encodings, example_args=example, mode="graph", routed_experts=["ffns.*"])


def test_routed_plan_pads_to_a_bounded_set_of_sizes() -> None:
    routing = RoutedTokens(100)
    assert routing.prepared_sizes() == tuple(s for s in SIZES if s <= 128)
    for tokens in range(1, 2049):
        (piece,) = routing.plan(tokens)
        assert piece.rows == tokens and piece.size in SIZES and piece.size - tokens <= piece.size / 3
    assert sum(p.rows for p in routing.plan(5000)) == 5000
    with pytest.raises(ValueError):
        RoutedTokens(0)
    assert moe.is_expert("block_sparse_moe.experts.3.w1.weight") and moe.is_expert("mlp.experts.expert_5.wi.weight")
    assert not moe.is_expert("encoder.layer.0.output.dense.weight") and not moe.is_expert("experts")
    assert moe.example_tokens((torch.zeros(2, 8, dtype=torch.int64),), {}) == 16
    assert moe.example_tokens((torch.zeros(3, 5, 32),), {"mask": torch.ones(3, 5)}) == 15


class DenseDispatch(torch.nn.Module):
    """Static shapes: every expert on every token, the gates scattered from topk."""

    def __init__(self) -> None:
        super().__init__()
        self.router = torch.nn.Linear(32, 4, bias=False)
        self.experts = torch.nn.ModuleList(Expert(32, 64) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top, chosen = torch.topk(self.router(x), 2, dim=-1)
        gates = torch.zeros(x.shape[0], 4).scatter(1, chosen, torch.softmax(top, -1))
        return sum(gates[:, e:e + 1] * expert(x) for e, expert in enumerate(self.experts))


def test_graph_mode_names_the_routing_ops_and_points_to_regions() -> None:
    """mode="graph" (one static-shape linalg function) refuses MoE routing,
    naming the torch op: a data-dependent size (torch.where of the routes),
    or ops torch-mlir lowers to tm_tensor (topk, scatter)."""
    torch.manual_seed(6)
    encoding = {"experts.0.w1.weight": FORMATS["csr90"]}
    with pytest.raises(sm.SparseMLIRError, match=r"aten\.where\.default \(fx node 'where'\).*static shapes: use "
                                                  r"mode='regions'"):
        sm.compile(MoE().eval(), encoding, example_args=(torch.randn(8, 32),), mode="graph")
    with pytest.raises(sm.SparseMLIRError, match=r"tm_tensor\.sort \(fx node 'topk', aten\.topk\.default\), "
                                                  r"tm_tensor\.scatter \(fx node 'scatter', aten\.scatter\.src\).*"
                                                  r"use mode='regions'"):
        sm.compile(DenseDispatch().eval(), encoding, example_args=(torch.randn(8, 32),), mode="graph")


def _tiny_hf(kind: str) -> torch.nn.Module:
    from sparse_mlir.testing import import_transformers

    transformers = import_transformers()
    common = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  num_experts_per_tok=2, vocab_size=100)
    if kind == "mixtral":
        return transformers.MixtralForCausalLM(transformers.MixtralConfig(intermediate_size=64, num_local_experts=4,
                                                                          **common))
    return transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        intermediate_size=64, moe_intermediate_size=64, shared_expert_intermediate_size=64, num_experts=4, **common))


@pytest.mark.parametrize("kind", ["mixtral", "qwen2-moe"])
def test_transformers_stacked_experts_unstacked_and_compiled(kind: str, compiles: list[int]) -> None:
    import copy

    torch.manual_seed(7)
    stacked = _tiny_hf(kind).eval()
    ids = torch.randint(0, 100, (2, 6))
    with pytest.raises(SpecError, match=r"model\.layers\.0\.mlp\.experts\.gate_up_proj: a stack of 4 expert weights "
                                        r"\[4, 128, 32\].*sm\.unstack_experts\(model\).*"
                                        r"'model\.layers\.0\.mlp\.experts\.gate_up\.<e>\.weight'"):
        sm.compile(stacked, {"model.layers.0.mlp.experts.gate_up_proj": FORMATS["csr90"]}, example_args=(ids,))
    model = sm.unstack_experts(copy.deepcopy(stacked))
    with torch.no_grad():   # the same function as transformers' stacked experts
        torch.testing.assert_close(model(ids).logits, stacked(ids).logits, rtol=1e-5, atol=1e-5)
    encodings = {name: FORMATS["csr90"] for name, _ in model.named_parameters()
                 if ".experts.gate_up." in name or ".experts.down." in name}
    assert len(encodings) == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=(ids,), cost_model=False)
    assert sum(r.routing is not None for r in fn.regions()) == 8
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    built = compiles[0]
    for shape in [(2, 6), (1, 5), (3, 4), (1, 1)]:
        other = torch.randint(0, 100, shape)
        with torch.no_grad():
            torch.testing.assert_close(fn(other).logits, model(other).logits, rtol=1e-4, atol=1e-5)
    assert compiles[0] == built
    with pytest.raises(SpecError, match="holds no stacked experts"):
        sm.unstack_experts(MoE())
