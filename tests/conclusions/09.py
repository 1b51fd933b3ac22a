# Lesson 09 measures nothing: these check the deterministic figures its "What you should see" describes.
CONCLUSIONS = [
    ("09_memory_planning", "the pair holds only one 8k-token sequence at a time",
     lambda r: r["worked_24gib"]["max_concurrent"] == 1 and r["worked_24gib"]["fits"]),
    ("09_memory_planning", "on the A10G it does not fit at all",
     lambda r: r["worked_a10g"]["fits"] is False and r["worked_a10g"]["max_concurrent"] == 0),
    ("09_memory_planning", "the cache grows far faster than the card",
     lambda r: all(b["kv_tokens"] / a["kv_tokens"] > b["gpu_gib"] / a["gpu_gib"]
                   for a, b in zip(r["by_gpu"], r["by_gpu"][1:]))),
    ("09_memory_planning", "the draft model adds a whole model's layers to every token",
     lambda r: r["kv_bytes_per_token"] > 131072),
]
