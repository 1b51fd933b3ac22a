CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("12_speedup_surface", "the fitted `t_fixed` exceeds a plain step at every batch size",
     lambda r: all(c["t_fixed_ms"] > c["t_target_ms"] for c in r["cost_model"].values())),
    ("12_speedup_surface", "each draft token costs more as the batch grows",
     lambda r: all(a < b for a, b in zip(*(lambda ts: (ts, ts[1:]))(
         [r["cost_model"][b]["t_draft_ms"] for b in sorted(r["cost_model"], key=int)])))),
    ("12_speedup_surface", "the cost model comes within tolerance on more runs than the plain formula",
     lambda r: r["share_within_tolerance"]["cost_model"] > r["share_within_tolerance"]["plain_formula"]),
    ("12_speedup_surface", "the break-even acceptance rises with the batch",
     lambda r: all(all(a <= b for a, b in zip(vals, vals[1:]))
                   for vals in ([r["break_even_a"][b][k] for b in sorted(r["break_even_a"], key=int)]
                                for k in next(iter(r["break_even_a"].values()))))),
    ("12_speedup_surface", "the fuller the batch, the higher the acceptance it needs to pay",
     lambda r: all(all(a <= b for a, b in zip(vals, vals[1:]))
                   for vals in ([r["break_even_a"][b][k] for b in sorted(r["break_even_a"], key=int)]
                                for k in next(iter(r["break_even_a"].values()))))),
]
