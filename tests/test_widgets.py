"""Optional controls: headless runs build nothing; a live kernel gets one control per parameter and a Run button."""

from speclab import widgets


def test_headless_builds_nothing():
    assert widgets.controls(lambda **kw: kw, {"k": 3}, interactive=False) is None


def test_controls_call_the_run_function_with_the_chosen_values():
    calls = []

    def run(category="code", temperature=0.0, max_tokens=64, k=3):
        calls.append((category, temperature, max_tokens, k))
        return f"{category} {temperature} {max_tokens} {k}"

    box = widgets.controls(run, {"category": "code", "temperature": 0.0, "max_tokens": 64, "k": 3},
                           {"category": ["code", "chat"], "temperature": [0.0, 0.5, 1.0],
                            "max_tokens": [16, 64], "k": [1, 2, 3, 4]}, interactive=True)
    category, temperature, max_tokens, k, button, out = box.children
    assert [w.description for w in (category, temperature, max_tokens, k)] == [
        "category", "temperature", "max_tokens", "k"]
    category.value, temperature.value, k.value = "chat", 0.5, 4
    button.click()
    assert calls == [("chat", 0.5, 64, 4)]
