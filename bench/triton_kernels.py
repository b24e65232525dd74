"""The write-up's Triton kernels for rungs 1-3, as the README and assets/text/*.md describe them, BLOCK_SIZE
a count of elements per program (Triton spreads it over num_warps x 32 threads; num_warps left at Triton's
default). Imported by bench/triton_peers.py only after it has checked that triton is there.

The write-up's source text is not in this repository: these are written from what the README and the
assets' texts say the kernels do, in the form of Triton's own tutorials (01-vector-add, 02-fused-softmax,
04-low-memory-dropout, whose keep rule `random > p` this follows; the project's kernels keep u >= p).

  vector add     program pid: offsets pid*BLOCK_SIZE + arange(BLOCK_SIZE), mask offsets < n, out = x + y
  relu+dropout   one load, relu, the keep decision from tl.rand(seed, offsets) (Philox word 0 at counter i,
                 not this project's mask, assets/text/relu_dropout.md), survivors scaled by 1/(1-p), one store
  softmax        one program per row: load the row masked by col < n_cols (other = -inf), subtract the row
                 max, exponentiate, divide by the sum, store. BLOCK_SIZE = 1024 is the write-up's bug (rows
                 wider than 1024 half written); the timed kernel is the fix, next_power_of_2(n_cols).
"""
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def relu_dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x = tl.maximum(x, 0.0)
    random = tl.rand(seed, offsets)
    keep = random > p
    out = tl.where(keep, x / (1 - p), 0.0)
    tl.store(out_ptr + offsets, out, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def vector_add(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)


def relu_dropout(x, out, p, seed):
    n = x.numel()
    relu_dropout_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, p, seed, BLOCK_SIZE=BLOCK_SIZE)


def softmax(x, out, num_warps=None):
    """The fixed kernel: BLOCK_SIZE = next_power_of_2(n_cols). num_warps None: Triton's default (4)."""
    rows, n_cols = x.shape
    extra = {} if num_warps is None else {"num_warps": num_warps}
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                            BLOCK_SIZE=triton.next_power_of_2(n_cols), **extra)


def tutorial_num_warps(n_cols):
    """The Triton fused-softmax tutorial's rule (a second, labelled row; not the write-up's kernel call)."""
    block = triton.next_power_of_2(n_cols)
    return 16 if block >= 4096 else 8 if block >= 2048 else 4
