import torch
import attention_lib as al

def _c1(logits, targets):
    asked = targets != al.MQAR_IGNORE
    right = (logits.argmax(-1) == targets) & asked
    return right.sum().item() / asked.sum().item()

def _c2(logits, targets):
    # flatten and loop
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_t = targets.reshape(-1)
    n = good = 0
    for row, t in zip(flat_logits, flat_t.tolist()):
        if t == al.MQAR_IGNORE:
            continue
        n += 1
        good += int(int(torch.argmax(row)) == t)
    return good / n

def _w_all_positions(logits, targets):
    return (logits.argmax(-1) == targets).float().mean().item()

def _w_argmax_dim1(logits, targets):
    pred = torch.max(logits, dim=-1)[0]  # the max values, not the indices
    asked = targets != al.MQAR_IGNORE
    return ((pred == targets) & asked).sum().item() / asked.sum().item()

def _w_per_row_mean(logits, targets):
    asked = targets != al.MQAR_IGNORE
    right = ((logits.argmax(-1) == targets) & asked).float()
    return (right.sum(1) / asked.sum(1).clamp(min=1)).mean().item()

def _w_positive_targets(logits, targets):
    asked = targets > 0
    right = (logits.argmax(-1) == targets) & asked
    return right.sum().item() / asked.sum().item()

def _w_shift(logits, targets):
    # shifts as for next-token loss, though targets are already aligned
    pred = logits[:, :-1].argmax(-1)
    t = targets[:, 1:]
    asked = t != al.MQAR_IGNORE
    return ((pred == t) & asked).sum().item() / max(asked.sum().item(), 1)

def _w_prob_threshold(logits, targets):
    asked = targets != al.MQAR_IGNORE
    p = torch.softmax(logits, -1)
    pt = p.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return ((pt > 0.5) & asked).sum().item() / asked.sum().item()

SOLUTIONS = [
    dict(name="mask_sum_ratio", correct=True, mistake="", family="", fn=_c1),
    dict(name="flat_loop", correct=True, mistake="", family="", fn=_c2),
    dict(name="counts_ignored", correct=False, mistake="Averages over all positions, including those marked MQAR_IGNORE.", family="missing-mask", fn=_w_all_positions),
    dict(name="max_values_not_indices", correct=False, mistake="Uses torch.max(...)[0], the largest logit values, instead of the argmax indices as the predicted tokens.", family="values-vs-indices", fn=_w_argmax_dim1),
    dict(name="mean_of_row_means", correct=False, mistake="Averages each sequence's accuracy and then the sequences, which weighs positions unequally when rows ask different numbers of questions.", family="wrong-normaliser", fn=_w_per_row_mean),
    dict(name="targets_gt_zero", correct=False, mistake="Treats targets > 0 as asked, so a real target of token 0 is dropped.", family="mask-convention", fn=_w_positive_targets),
    dict(name="next_token_shift", correct=False, mistake="Shifts logits and targets by one as for a language-model loss, though the targets are already aligned with the logits.", family="off-by-one", fn=_w_shift),
    dict(name="prob_over_half", correct=False, mistake="Counts a position right when the target's probability exceeds 0.5 rather than when it is the most likely token.", family="wrong-criterion", fn=_w_prob_threshold),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'counts_ignored': {'counts-ignored'},
    'max_values_not_indices': set(),
    'mean_of_row_means': {'mean-of-rows'},
    'targets_gt_zero': {'ignore-value-zero'},
    'next_token_shift': {'shifted'},
    'prob_over_half': {'probability-threshold'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
