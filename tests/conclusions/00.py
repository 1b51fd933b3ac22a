CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("00_setup", "Its acceptance length stays at 1",
     lambda r: abs(r["acceptance_length"] - 1.0) < 1e-9),
    ("00_setup", "`suffix` stays missing until `arctic-inference` is installed",
     lambda r: "suffix" not in r["methods_available"]),
]
