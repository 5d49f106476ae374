#!/usr/bin/env bash
# SHARPO on ALFWorld with verl-agent (GPU recipe; NOT RUN HERE: this project has no GPU.
# What is tested on CPU, against verl-agent's own code: docs/integrations.md, "verl-agent").
#
# verl-agent's ALFWorld GRPO setting (Qwen2.5-1.5B-Instruct, 16 tasks x groups of 8
# episodes, at most 50 steps, one row per step, invalid-action penalty 0.1) with the
# advantage estimator switched to sharpo. Made for verl-agent commit 796ed310 (2026-02-27).
#
# Once, in verl-agent's own environment (its verl fork stays; sharpo adds no dependency
# that is not already there, so --no-deps keeps every pin of verl-agent's install):
#   cd /path/to/verl-agent && git apply /path/to/sharpo/configs/verl_agent/ray_trainer.patch
#   pip install --no-deps /path/to/sharpo      # builds sharpo_kernels' native module
#   pip install gymnasium==0.29.1 stable-baselines3==2.6.0 alfworld && alfworld-download -f
# Then, from anywhere:
#   VERL_AGENT_DIR=/path/to/verl-agent bash /path/to/sharpo/configs/verl_agent/run_alfworld_sharpo.sh
# Extra arguments are Hydra overrides (e.g. +algorithm.sharpo.lam=0.3, algorithm.sharpo.base=gigpo,
# trainer.total_epochs=10). One that names a key this script sets replaces the script's value,
# whatever its prefix (key=, +key=, ++key=); a new algorithm.sharpo.* key is added (+key=),
# any other override is appended as given.
set -euo pipefail
VERL_AGENT_DIR=${VERL_AGENT_DIR:-$PWD}
ENGINE=${ENGINE:-vllm}
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
train_data_size=16
val_data_size=128
group_size=8

cd "$VERL_AGENT_DIR"
if ! grep -q 'SHARPO = "sharpo"' verl/trainer/ppo/ray_trainer.py 2>/dev/null; then
    echo "error: $VERL_AGENT_DIR is not a verl-agent checkout with configs/verl_agent/ray_trainer.patch applied" >&2
    exit 2
fi
# success_threshold 5: verl-agent's ALFWorld reward is 10 x won (text mode)
# the run's overrides; the user's replace those with the same key (see the header)
ARGS=(
    algorithm.adv_estimator=sharpo
    +algorithm.sharpo.lam=0.2
    +algorithm.sharpo.alpha=0.5
    +algorithm.sharpo.tau=1.0
    +algorithm.sharpo.max_hint_tokens=512
    +algorithm.sharpo.success_threshold=5.0
    algorithm.use_kl_in_reward=False
    +ray_init.runtime_env.worker_process_setup_hook=sharpo_train.integrations.verl.register
    data.train_files="$HOME/data/verl-agent/text/train.parquet"
    data.val_files="$HOME/data/verl-agent/text/test.parquet"
    data.train_batch_size=$train_data_size
    data.val_batch_size=$val_data_size
    data.max_prompt_length=2048
    data.max_response_length=512
    data.filter_overlong_prompts=True
    data.truncation=error
    data.return_raw_chat=True
    actor_rollout_ref.model.path="$MODEL"
    actor_rollout_ref.model.use_remove_padding=True
    actor_rollout_ref.model.enable_gradient_checkpointing=True
    actor_rollout_ref.actor.optim.lr=1e-6
    actor_rollout_ref.actor.ppo_mini_batch_size=256
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.01
    actor_rollout_ref.actor.kl_loss_type=low_var_kl
    actor_rollout_ref.actor.fsdp_config.param_offload=False
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
    actor_rollout_ref.actor.use_invalid_action_penalty=True
    actor_rollout_ref.actor.invalid_action_penalty_coef=0.1
    actor_rollout_ref.rollout.name="$ENGINE"
    actor_rollout_ref.rollout.tensor_model_parallel_size=2
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32
    actor_rollout_ref.rollout.enable_chunked_prefill=False
    actor_rollout_ref.rollout.enforce_eager=False
    actor_rollout_ref.rollout.free_cache_engine=False
    actor_rollout_ref.rollout.val_kwargs.temperature=0.4
    actor_rollout_ref.rollout.val_kwargs.do_sample=True
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32
    actor_rollout_ref.ref.fsdp_config.param_offload=True
    env.env_name=alfworld/AlfredTWEnv
    env.seed=0
    env.max_steps=50
    env.rollout.n=$group_size
    env.resources_per_worker.num_cpus=0.1
    trainer.critic_warmup=0
    trainer.logger="['console']"
    trainer.project_name=sharpo_alfworld
    trainer.experiment_name=sharpo_qwen2.5_1.5b
    trainer.n_gpus_per_node=2
    trainer.nnodes=1
    trainer.save_freq=-1
    trainer.test_freq=5
    trainer.total_epochs=150
    trainer.val_before_train=True
)
key_of() { local k=${1#+}; k=${k#+}; printf '%s' "${k%%=*}"; }
for arg in "$@"; do
    replaced=0
    for i in "${!ARGS[@]}"; do
        if [ "$(key_of "${ARGS[$i]}")" = "$(key_of "$arg")" ]; then
            prefix=${ARGS[$i]%%[!+]*}      # the script's own prefix: + for a key verl-agent lacks
            ARGS[$i]="$prefix$(key_of "$arg")=${arg#*=}"
            replaced=1
        fi
    done
    if [ "$replaced" = 0 ]; then
        case "$(key_of "$arg")" in       # verl-agent's config has no algorithm.sharpo: Hydra adds with +
            algorithm.sharpo.*) ARGS+=("+$(key_of "$arg")=${arg#*=}") ;;
            *) ARGS+=("$arg") ;;
        esac
    fi
done

# sharpo's settings, checked here in a second, before the data step, Ray and any model
# (sharpo_train/integrations/engine_settings.py; RayPPOTrainer.__init__ checks them again)
python3 -c "import sharpo_train.integrations.engine_settings" 2>/dev/null || {
    echo "error: sharpo is not importable here: pip install --no-deps /path/to/sharpo" >&2; exit 2; }
python3 -c "import sys; from sharpo_train.integrations.engine_settings import main; sys.exit(main())" \
    --engine verl-agent "${ARGS[@]}" || exit 2
python3 -c "import sharpo_train.integrations.verl_agent" || {
    echo "error: sharpo_train.integrations.verl_agent does not import with this verl" >&2; exit 2; }

# verl-agent's data step: downloads hiyouga/geometry3k from the Hugging Face Hub once; the
# parquet files it writes under ~/data/verl-agent/text/ only set the modality and the batch
# counts (the tasks come from the ALFWorld environment)
python3 -m examples.data_preprocess.prepare --mode text \
    --train_data_size "$train_data_size" --val_data_size "$val_data_size"

python3 -m verl.trainer.main_ppo "${ARGS[@]}"
