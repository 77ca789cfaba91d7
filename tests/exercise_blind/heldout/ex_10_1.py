import math
import torch

def _c1(q, keys, values, block_size):
    D = q.shape[-1]
    m = torch.tensor(float("-inf"), dtype=q.dtype)
    l = torch.zeros((), dtype=q.dtype)
    acc = torch.zeros(values.shape[-1], dtype=values.dtype)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start:start + block_size] @ q / math.sqrt(D)
        m_new = torch.maximum(m, s.max())
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = alpha * l + p.sum()
        acc = alpha * acc + p @ values[start:start + block_size]
        m = m_new
    return acc / l

def _c2(q, keys, values, block_size):
    # keeps the running log-sum-exp and a normalised output instead of (m, l)
    scale = q.shape[-1] ** -0.5
    lse = None
    out = None
    for k, v in zip(keys.split(block_size), values.split(block_size)):
        s = (k @ q) * scale
        blk_lse = torch.logsumexp(s, 0)
        blk_out = torch.softmax(s, 0) @ v
        if lse is None:
            lse, out = blk_lse, blk_out
        else:
            new = torch.logaddexp(lse, blk_lse)
            out = torch.exp(lse - new) * out + torch.exp(blk_lse - new) * blk_out
            lse = new
    return out

def _blocks(q, keys, values, block_size):
    for start in range(0, keys.shape[0], block_size):
        yield keys[start:start + block_size] @ q / math.sqrt(q.shape[-1]), values[start:start + block_size]

def _w_no_rescale_acc(q, keys, values, block_size):
    m, l, acc = float("-inf"), 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for s, v in _blocks(q, keys, values, block_size):
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        l = l * math.exp(m - m_new) + p.sum()
        acc = acc + p @ v
        m = m_new
    return acc / l

def _w_no_rescale_sum(q, keys, values, block_size):
    m, l, acc = float("-inf"), 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for s, v in _blocks(q, keys, values, block_size):
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        acc = acc * math.exp(m - m_new) + p @ v
        l = l + p.sum()
        m = m_new
    return acc / l

def _w_inverted_factor(q, keys, values, block_size):
    m, l, acc = float("-inf"), 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for s, v in _blocks(q, keys, values, block_size):
        m_new = max(m, s.max().item())
        c = math.exp(m_new - m) if m != float("-inf") else 0.0
        p = torch.exp(s - m_new)
        l = l * c + p.sum()
        acc = acc * c + p @ v
        m = m_new
    return acc / l

def _w_block_max_only(q, keys, values, block_size):
    # uses each block's own max without a running maximum: blocks get different scales
    l, acc = 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for s, v in _blocks(q, keys, values, block_size):
        p = torch.exp(s - s.max())
        l = l + p.sum()
        acc = acc + p @ v
    return acc / l

def _w_no_scale(q, keys, values, block_size):
    m, l, acc = float("-inf"), 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start:start + block_size] @ q
        m_new = max(m, s.max().item())
        c = math.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * c + p.sum()
        acc = acc * c + p @ values[start:start + block_size]
        m = m_new
    return acc / l

def _w_drops_last_partial(q, keys, values, block_size):
    m, l, acc = float("-inf"), 0.0, torch.zeros(values.shape[-1], dtype=values.dtype)
    for b in range(keys.shape[0] // block_size):
        k = keys[b * block_size:(b + 1) * block_size]
        v = values[b * block_size:(b + 1) * block_size]
        s = k @ q / math.sqrt(q.shape[-1])
        m_new = max(m, s.max().item())
        c = math.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * c + p.sum()
        acc = acc * c + p @ v
        m = m_new
    return acc / l

SOLUTIONS = [
    dict(name="flash_style_m_l_acc", correct=True, mistake="", family="", fn=_c1),
    dict(name="running_lse_normalised_out", correct=True, mistake="", family="", fn=_c2),
    dict(name="acc_not_rescaled", correct=False, mistake="Rescales the running sum when the maximum grows but forgets to rescale the running output.", family="missing-rescale", fn=_w_no_rescale_acc),
    dict(name="sum_not_rescaled", correct=False, mistake="Rescales the running output but forgets to rescale the running sum.", family="missing-rescale", fn=_w_no_rescale_sum),
    dict(name="factor_inverted", correct=False, mistake="Multiplies the old statistics by exp(m_new - m_old) instead of exp(m_old - m_new).", family="sign-flip", fn=_w_inverted_factor),
    dict(name="per_block_max", correct=False, mistake="Subtracts each block's own maximum without any running maximum, so the blocks' contributions are on different scales.", family="missing-rescale", fn=_w_block_max_only),
    dict(name="no_scale", correct=False, mistake="Forgets to divide the scores by sqrt(D).", family="missing-scale", fn=_w_no_scale),
    dict(name="drops_partial_block", correct=False, mistake="Loops over K // block_size full blocks, dropping the last keys when K is not a multiple of block_size.", family="off-by-one", fn=_w_drops_last_partial),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'acc_not_rescaled': {'output-not-rescaled'},
    'sum_not_rescaled': {'sum-not-rescaled'},
    'factor_inverted': {'rescale-inverted'},
    'per_block_max': {'per-block-max'},
    'no_scale': {'no-scale'},
    'drops_partial_block': {'last-block-dropped'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
