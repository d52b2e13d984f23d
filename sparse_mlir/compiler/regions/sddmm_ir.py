"""The SDDMM row kernel's IR: no horizontal reduction per entry, and b's
rows kept in L1 where rows share columns.

values[j] = (a[i, :] . b[col_j, :]) (* mask value) for the stored entries j
of each row i of a CSR mask; b read by rows (attention's k). The per-entry
form (row_kernels.py, `group = 1`: a D-lane product and a D-lane
`vector.reduction` per entry) spends as many shuffles and adds on each
reduction as on the product, and streams a 256-byte b row from L2 per entry.

    parallel over batch entries and tiles of TILE_ROWS rows:
      the tile's column span (its rows' first and last columns); where the tile
      reads each column of the span MIN_REUSE+ times (local / banded masks),
      column blocks of b that fit L1, each read by every row of the tile
      before the next; else one block
      for each block, each row i of the tile (a cursor per row):
        a_i = a[i, :] as ceil(D / W) vectors of W lanes (in registers)
        G entries at a time while the G-th is in the block:
          acc_g = sum over chunks of a_i[c] * b[col_g][c]   (FMA, W lanes;
                                                             a chunk past D reads zeros)
          the G accumulators summed lane-wise by a transpose tree (log2 G
          levels of two shuffles and one add per pair): one vector<G> holds
          the G dot products; times the G mask values; one store
        then one entry at a time while in the block (a W-lane reduction)
      (unblocked tiles prefetch b's rows PREFETCH groups ahead: they come from
      L2 / L3 in random order; measured 5-10% at S = 4096, random masks)

W = 16 with AVX-512 (else 8); G = 8. Measured on a Zen 5 at D = 64, S = 4096,
one thread: 1.2x (random mask) to 1.7x (banded) the per-entry form
(benchmarks/sparse_attention.py has the op's figures).
"""

from __future__ import annotations

from typing import Callable

TILE_ROWS = 32          # rows of a sharing column blocks of b
L1_BUDGET = 32 * 1024   # bytes of b one column block may take (of a 48 KB L1)
MIN_REUSE = 8           # a tile blocks b's columns where it reads each this often
PREFETCH = 2            # groups ahead whose b rows are prefetched where b is not blocked


def _shuffle_levels(names: list[str], lanes: int, fresh: Callable[[], str]) -> tuple[list[str], list[str]]:
    """IR lines summing G = len(names) vector<lanes> accumulators into one
    vector<lanes> whose lane l holds a partial sum of accumulator l mod G."""
    lines = []
    block = 1
    vt = f"vector<{lanes}xf32>"
    while len(names) > 1:
        lo_idx, hi_idx = [], []
        for g in range(0, lanes, 2 * block):
            lo_idx += list(range(g, g + block)) + list(range(lanes + g, lanes + g + block))
            hi_idx += list(range(g + block, g + 2 * block)) + list(range(lanes + g + block, lanes + g + 2 * block))
        merged = []
        for x, y in zip(names[0::2], names[1::2]):
            lo, hi, out = fresh(), fresh(), fresh()
            lines.append(f"{lo} = vector.shuffle {x}, {y} {lo_idx} : {vt}, {vt}")
            lines.append(f"{hi} = vector.shuffle {x}, {y} {hi_idx} : {vt}, {vt}")
            lines.append(f"{out} = arith.addf {lo}, {hi} fastmath<reassoc,contract> : {vt}")
            merged.append(out)
        names = merged
        block *= 2
    return lines, names


class GroupedDots:
    """IR text for dot products of one row of a (D floats as ceil(D / W)
    vectors `%a0 ..`, loaded by `load_row`) with b's rows at G columns at a
    time, summed into one vector<G> (`group_sums`). `%h` names the batch
    entry, `%zero` an f32 0 and `%off0 ..` the chunks' offsets
    (`constants`) in the function using it."""

    def __init__(self, dim: int, lanes: int, group: int) -> None:
        assert group & (group - 1) == 0 and 1 < group <= lanes and lanes & (lanes - 1) == 0, (group, lanes)
        self.d, self.W, self.group = dim, lanes, group
        self.chunks = -(-dim // lanes)
        self.vt = f"vector<{lanes}xf32>"
        self._counter = 0

    def fresh(self) -> str:
        self._counter += 1
        return f"%t{self._counter}"

    def constants(self) -> list[str]:
        return [f"  %off{k} = arith.constant {k * self.W} : index" for k in range(self.chunks)]

    def chunk_load(self, memref: str, extent: int, row: str, chunk: int, indent: str, lines: list[str],
                   name: str = "") -> str:
        name = name or self.fresh()
        mtype = f"memref<?x{extent}x{self.d}xf32>"
        if (chunk + 1) * self.W <= self.d:
            lines.append(f"{indent}{name} = vector.load {memref}[%h, {row}, %off{chunk}] : {mtype}, {self.vt}")
        else:   # past D: zeros (a masked read, no out-of-bounds access)
            lines.append(f"{indent}{name} = vector.transfer_read {memref}[%h, {row}, %off{chunk}], %zero "
                         f"{{in_bounds = [false]}} : {mtype}, {self.vt}")
        return name

    def load_row(self, memref: str, extent: int, row: str, indent: str, lines: list[str]) -> None:
        """%a0 .. = memref[%h, row, :] in chunks."""
        for k in range(self.chunks):
            self.chunk_load(memref, extent, row, k, indent, lines, name=f"%a{k}")

    def dot(self, memref: str, extent: int, col: str, indent: str, lines: list[str]) -> str:
        """W-lane partial sums of a_i . b[col] (two FMA chains: half the latency)."""
        chains: list[str | None] = [None, None]
        for k in range(self.chunks):
            bv = self.chunk_load(memref, extent, col, k, indent, lines)
            which = k % 2
            out = self.fresh()
            if chains[which] is None:
                lines.append(f"{indent}{out} = arith.mulf %a{k}, {bv} fastmath<contract> : {self.vt}")
            else:
                lines.append(f"{indent}{out} = vector.fma %a{k}, {bv}, {chains[which]} : {self.vt}")
            chains[which] = out
        if chains[1] is None:
            return chains[0]
        total = self.fresh()
        # (no reassoc here: LLVM would fold the two chains back into one)
        lines.append(f"{indent}{total} = arith.addf {chains[0]}, {chains[1]} : {self.vt}")
        return total

    def group_sums(self, memref: str, extent: int, cols: list[str], indent: str, lines: list[str]) -> str:
        """vector<G>: the dot products with b's rows at `cols` (G of them)."""
        accs = [self.dot(memref, extent, col, indent, lines) for col in cols]
        tree, (merged,) = _shuffle_levels(accs, self.W, self.fresh)
        lines += [indent + line for line in tree]
        width = self.W
        while width > self.group:   # lane l and l + G hold parts of the same entry
            half = width // 2
            lo, hi, out = self.fresh(), self.fresh(), self.fresh()
            lines.append(f"{indent}{lo} = vector.extract_strided_slice {merged} {{offsets = [0], sizes = [{half}], "
                         f"strides = [1]}} : vector<{width}xf32> to vector<{half}xf32>")
            lines.append(f"{indent}{hi} = vector.extract_strided_slice {merged} {{offsets = [{half}], "
                         f"sizes = [{half}], strides = [1]}} : vector<{width}xf32> to vector<{half}xf32>")
            lines.append(f"{indent}{out} = arith.addf {lo}, {hi} fastmath<reassoc,contract> : vector<{half}xf32>")
            merged, width = out, half
        return merged


def grouped_sddmm_ir(rows: int, cols: int, dim: int, group: int, lanes: int, scaled: bool, pattern: str,
                     pos_t: str, crd_t: str) -> str:
    """`@main(mask, a [B, rows, dim], b [B, cols, dim], out [B, nnz])`: the
    values written into `out` (the caller's; runtime/sddmm_call.py);
    `lanes` (W): 16 with AVX-512, else 8; `group` (G): a power of two <= W."""
    dots = GroupedDots(dim, lanes, group)
    fresh = dots.fresh
    W = lanes
    r, c, d = rows, cols, dim
    tile_rows, min_reuse = TILE_ROWS, MIN_REUSE
    block_cols = max(16, L1_BUDGET // (4 * d))
    vt = f"vector<{W}xf32>"
    gt = f"vector<{group}xf32>"

    head = ["  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index",
            f"  %cg = arith.constant {group} : index", f"  %glast = arith.constant {group - 1} : index",
            f"  %rows = arith.constant {r} : index",
            "  %zero = arith.constant 0.0 : f32"]
    head += dots.constants()
    head += [f"  %pf{g} = arith.constant {PREFETCH * group + g} : index" for g in range(group)]

    row = []
    ind = "        "
    dots.load_row("%ab", r, "%i", ind, row)
    def group_loop(prefetching: bool, indent: str) -> list[str]:
        """The while loop over the segment's groups of G entries, yielding
        where they end; `prefetching`: b's rows PREFETCH groups ahead are
        prefetched (where b is not blocked: its rows come from L2 / L3)."""
        body: list[str] = []
        ind2 = indent + "  "
        cols_full = []
        for g in range(group):
            j = fresh()
            body.append(f"{ind2}{j} = arith.addi %j0, %g{g} : index")
            col_raw, col = fresh(), fresh()
            body.append(f"{ind2}{col_raw} = memref.load %crd[{j}] : memref<?x{crd_t}>")
            body.append(f"{ind2}{col} = arith.index_cast {col_raw} : {crd_t} to index")
            cols_full.append(col)
        if prefetching:   # (past the last entry: the last entry's row)
            for g in range(group):
                j, jc, raw, col = fresh(), fresh(), fresh(), fresh()
                body.append(f"{ind2}{j} = arith.addi %j0, %pf{g} : index")
                body.append(f"{ind2}{jc} = arith.minui {j}, %nnzlast : index")
                body.append(f"{ind2}{raw} = memref.load %crd[{jc}] : memref<?x{crd_t}>")
                body.append(f"{ind2}{col} = arith.index_cast {raw} : {crd_t} to index")
                for k in range(dots.chunks):
                    body.append(f"{ind2}memref.prefetch %bb[%h, {col}, %off{k}], read, locality<3>, data "
                                f": memref<?x{c}x{d}xf32>")
        merged = dots.group_sums("%bb", c, cols_full, ind2, body)
        if scaled:
            mv, out = fresh(), fresh()
            body.append(f"{ind2}{mv} = vector.load %val[%j0] : memref<?xf32>, {gt}")
            body.append(f"{ind2}{out} = arith.mulf {merged}, {mv} : {gt}")
            merged = out
        body.append(f"{ind2}vector.store {merged}, %out[%h, %j0] : memref<?x?xf32>, {gt}")
        result, jl, inside, go, cl, lt, jn = (fresh() for _ in range(7))
        return [
            f"{indent}{result} = scf.while (%jw = %jstart) : (index) -> index {{",
            f"{indent}  {jl} = arith.addi %jw, %glast : index",
            f"{indent}  {inside} = arith.cmpi ult, {jl}, %hi : index",
            f"{indent}  {go} = scf.if {inside} -> (i1) {{",
            f"{indent}    {cl} = memref.load %crd[{jl}] : memref<?x{crd_t}>",
            f"{indent}    {lt} = arith.cmpi slt, {cl}, %cend : {crd_t}",
            f"{indent}    scf.yield {lt} : i1",
            f"{indent}  }} else {{",
            f"{indent}    scf.yield %false : i1",
            f"{indent}  }}",
            f"{indent}  scf.condition({go}) %jw : index",
            f"{indent}}} do {{",
            f"{indent}^bb0(%j0: index):",
            *body,
            f"{ind2}{jn} = arith.addi %j0, %cg : index",
            f"{ind2}scf.yield {jn} : index",
            f"{indent}}}",
            f"{indent}scf.yield {result} : index"]

    groups = ["        %jg = scf.if %reused -> (index) {", *group_loop(False, "          "), "        } else {",
              *group_loop(True, "          "), "        }"]
    head += [f"  %g{g} = arith.constant {g} : index" for g in range(group)]

    # The row's last entries in the block, one at a time.
    ind2 = "          "
    tail: list[str] = []
    col_raw, col = fresh(), fresh()
    tail.append(f"{ind2}{col_raw} = memref.load %crd[%j] : memref<?x{crd_t}>")
    tail.append(f"{ind2}{col} = arith.index_cast {col_raw} : {crd_t} to index")
    acc = dots.dot("%bb", c, col, ind2, tail)
    total = fresh()
    tail.append(f"{ind2}{total} = vector.reduction <add>, {acc} fastmath<reassoc> : {vt} into f32")
    if scaled:
        m, out = fresh(), fresh()
        tail.append(f"{ind2}{m} = memref.load %val[%j] : memref<?xf32>")
        tail.append(f"{ind2}{out} = arith.mulf {total}, {m} : f32")
        total = out
    tail.append(f"{ind2}memref.store {total}, %out[%h, %j] : memref<?x?xf32>")

    nl = "\n"
    ctype = crd_t
    return f"""
func.func @main(%s: {pattern}, %a: tensor<?x{r}x{d}xf32>, %b: tensor<?x{c}x{d}xf32>, %out: memref<?x?xf32>)
    attributes {{llvm.emit_c_interface}} {{
{nl.join(head)}
  %ctile = arith.constant {tile_rows} : index
  %cblock = arith.constant {block_cols} : index
  %cols = arith.constant {c} : index
  %false = arith.constant false
  %pos = sparse_tensor.positions %s {{level = 1 : index}} : {pattern} to memref<?x{pos_t}>
  %crd = sparse_tensor.coordinates %s {{level = 1 : index}} : {pattern} to memref<?x{crd_t}>
  %val = sparse_tensor.values %s : {pattern} to memref<?xf32>
  %last = memref.load %pos[%rows] : memref<?x{pos_t}>
  %nnz = arith.index_cast %last : {pos_t} to index
  %nnzlast = arith.subi %nnz, %c1 : index
  %ab = bufferization.to_buffer %a read_only : tensor<?x{r}x{d}xf32> to memref<?x{r}x{d}xf32>
  %bb = bufferization.to_buffer %b read_only : tensor<?x{c}x{d}xf32> to memref<?x{c}x{d}xf32>
  %nb = memref.dim %ab, %c0 : memref<?x{r}x{d}xf32>
  %ntiles = arith.constant {-(-r // tile_rows)} : index
  %creuse = arith.constant {min_reuse} : index
  %cmax = arith.constant {c} : index
  scf.parallel (%h, %t) = (%c0, %c0) to (%nb, %ntiles) step (%c1, %c1) {{
    %cur = memref.alloca() : memref<{tile_rows}xindex>
    %i0 = arith.muli %t, %ctile : index
    %iend0 = arith.addi %i0, %ctile : index
    %iend = arith.minui %iend0, %rows : index
    %nr = arith.subi %iend, %i0 : index
    // The tile's column span: its rows' first and last stored columns.
    %span:2 = scf.for %r = %c0 to %nr step %c1 iter_args(%mn = %cmax, %mx = %c0) -> (index, index) {{
      %ir = arith.addi %i0, %r : index
      %ir1 = arith.addi %ir, %c1 : index
      %p = memref.load %pos[%ir] : memref<?x{pos_t}>
      %pi = arith.index_cast %p : {pos_t} to index
      %q = memref.load %pos[%ir1] : memref<?x{pos_t}>
      %qi = arith.index_cast %q : {pos_t} to index
      memref.store %pi, %cur[%r] : memref<{tile_rows}xindex>
      %some = arith.cmpi ult, %pi, %qi : index
      %mnx:2 = scf.if %some -> (index, index) {{
        %first = memref.load %crd[%pi] : memref<?x{crd_t}>
        %fi = arith.index_cast %first : {crd_t} to index
        %ql = arith.subi %qi, %c1 : index
        %lastc = memref.load %crd[%ql] : memref<?x{crd_t}>
        %li1 = arith.index_cast %lastc : {crd_t} to index
        %li = arith.addi %li1, %c1 : index
        %mn2 = arith.minui %mn, %fi : index
        %mx2 = arith.maxui %mx, %li : index
        scf.yield %mn2, %mx2 : index, index
      }} else {{
        scf.yield %mn, %mx : index, index
      }}
      scf.yield %mnx#0, %mnx#1 : index, index
    }}
    // Column blocks of b (kept in L1 while the tile's rows read them) where
    // the tile reads each column of its span {min_reuse}+ times on average
    // (local / banded masks); else one block (the rows read b as stored).
    %tlo_raw = memref.load %pos[%i0] : memref<?x{pos_t}>
    %thi_raw = memref.load %pos[%iend] : memref<?x{pos_t}>
    %tlo = arith.index_cast %tlo_raw : {pos_t} to index
    %thi = arith.index_cast %thi_raw : {pos_t} to index
    %tn = arith.subi %thi, %tlo : index
    %width = arith.subi %span#1, %span#0 : index
    %need = arith.muli %width, %creuse : index
    %reused = arith.cmpi uge, %tn, %need : index
    %block = arith.select %reused, %cblock, %cols : index
    scf.for %cb = %span#0 to %span#1 step %block {{
      %cend0 = arith.addi %cb, %block : index
      %cend1 = arith.minui %cend0, %cols : index
      %cend = arith.index_cast %cend1 : index to {ctype}
      scf.for %r = %c0 to %nr step %c1 {{
        %i = arith.addi %i0, %r : index
        %i1 = arith.addi %i, %c1 : index
        %hi_raw = memref.load %pos[%i1] : memref<?x{pos_t}>
        %hi = arith.index_cast %hi_raw : {pos_t} to index
        %jstart = memref.load %cur[%r] : memref<{tile_rows}xindex>
{nl.join(row)}
{nl.join(groups)}
        %je = scf.while (%jw = %jg) : (index) -> index {{
          %in = arith.cmpi ult, %jw, %hi : index
          %go = scf.if %in -> (i1) {{
            %cl = memref.load %crd[%jw] : memref<?x{crd_t}>
            %lt = arith.cmpi slt, %cl, %cend : {ctype}
            scf.yield %lt : i1
          }} else {{
            scf.yield %false : i1
          }}
          scf.condition(%go) %jw : index
        }} do {{
        ^bb0(%j: index):
{nl.join(tail)}
          %jn = arith.addi %j, %c1 : index
          scf.yield %jn : index
        }}
        memref.store %je, %cur[%r] : memref<{tile_rows}xindex>
      }}
    }}
    scf.reduce
  }}
  return
}}
"""
