def _library():
    # the recorded speculators comparison the lesson prints (speculators_trainer.recorded()), not a per-profile result
    from speclab.train import speculators_trainer
    return {name: row["acceptance_length"] for name, row in speculators_trainer.recorded()["acceptance"].items()}


def _shipped_beats_both_by_more_than_trainers_differ(r):
    a = _library()
    trainers = abs(a["speculators"] - a["speclab"])
    return a["speclab, shipped"] - max(a["speculators"], a["speclab"]) > trainers


CONCLUSIONS = [
    ("11_train_your_own_drafter", "the head accepts almost nothing in vLLM",
     lambda r: not r["full"] and r["vllm_acceptance_length"] < 1.2),
    ("11_train_your_own_drafter", "The greedy outputs still match the baseline up to near-ties",
     lambda r: r["vllm_greedy_ok"] is True),
    ("11_train_your_own_drafter", "the rates never rise from one position to the next",
     lambda r: all(a >= b for a, b in zip(r["vllm_per_position_rates"], r["vllm_per_position_rates"][1:]))),
    # the recorded library run (data/drafters/speculators_eagle3.json): the same record on every profile
    ("11_train_your_own_drafter", "On the same rows, speculators' head accepts more than ours",
     lambda r: _library()["speculators"] > _library()["speclab"]),
    ("11_train_your_own_drafter", "accepts more than both, by a wider margin than the trainers differ",
     _shipped_beats_both_by_more_than_trainers_differ),
]
