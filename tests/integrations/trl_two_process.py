"""Run by test_trl_two_process.py: ``python trl_two_process.py OUT`` (one process) or under
``torch.distributed.run --nproc_per_node 2`` (two processes, gloo on CPU). Trains
SharpoGRPOTrainer for 2 steps on the same 2 groups of 4 completions either way (8 per step
in one process, 4 per process in two), the sampling scripted by prompt so both layouts
generate the same completions, and writes what each process saw to OUT/rank<r>.json:
each step's rows (prompt, completion, reward, peer, has_teacher, advantages) and the
logged metrics."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))       # tests/: integrations.*

from integrations.trl_support import config, force_generation, tiny_policy  # noqa: E402

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"
NOTAG = "I am not sure what to do"
G = 4


def scripted_by_prompt(model, tok):
    """``model.generate`` emits, for the k-th row of room i in one call, a text fixed by
    (i, k): the same completions whichever process generates the group."""
    def text_for(prompt: str, k: int) -> str:
        room = int(prompt.split("Room ")[1].split(":")[0])   # room r: 1 + r % 3 successes of 4
        return SUCCESS if k < 1 + room % 3 else (FAIL if k % 2 else NOTAG)

    def texts_for(ids):
        seen: dict = {}
        texts = []
        for row in ids:
            prompt = tok.decode(row, skip_special_tokens=True)
            k = seen[prompt] = seen.get(prompt, -1) + 1
            texts.append(text_for(prompt, k))
        return texts

    force_generation(model, tok, texts_for)


def main(out: Path) -> None:
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    model, tok = tiny_policy()
    scripted_by_prompt(model, tok)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(8)])

    def reward_open(completions, **kw):
        return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]

    args = config(out / "trainer", max_steps=2, per_device_train_batch_size=2 * G // world, num_generations=G,
                  learning_rate=1e-2)
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=args, train_dataset=data,
                                processing_class=tok)
    steps = []
    inner = trainer._sharpo_finish

    def finish(pending):
        adv = inner(pending)
        last = trainer.sharpo_last
        steps.append([{"prompt": tok.decode(p), "completion": tok.decode(c), "reward": float(r),
                       "peer": last["peers"][b], "has_teacher": bool(last["has_teacher"][b]),
                       "advantages": last["advantages"][b, :len(c)].tolist()}
                      for b, (p, c, r) in enumerate(zip(last["prompts"], last["completions"], last["rewards"]))])
        return adv

    trainer._sharpo_finish = finish
    trainer.train()
    logged = [{k: v for k, v in h.items() if k.startswith("sharpo/")} for h in trainer.state.log_history
              if "sharpo/teacher_coverage" in h]
    (out / f"rank{rank}.json").write_text(json.dumps({"world": world, "steps": steps, "logged": logged}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    # Leave without the interpreter's teardown: a gloo worker thread still joinable at exit
    # aborted a rank once ("terminate called without an active exception") after its work
    # was written, which the launcher reports as a failed run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
