"""A checkpoint's chat template is foreign code (sharpo_train/models/chat_template.py): a
syntax error, ``raise_exception``, a sandbox violation or an error of its expressions is
one line naming the setting, and a template that loops without end is stopped by the time
limit (issue 47: each was a traceback or a hang of `sharpo eval` on main)."""
import shutil
import signal
import time

import pytest

from sharpo_train.cli import main
from sharpo_train.errors import UsageError
from sharpo_train.models import chat_template as CT
from sharpo_train.models.tokenizer import build_tokenizer

from train.commands.test_cli_errors import one_line_error
from train.commands.test_cli_input_errors import FAST, SMOKE, no_hang

HOSTILE = {
    "syntax": ("{% if %}", "TemplateSyntaxError"),
    "raise_exception": ("{{ raise_exception('no such role') }}", "no such role"),
    "sandbox": ("{{ ''.__class__.__mro__ }}", "SecurityError"),
    "expression": ("{{ 1 // 0 }}", "ZeroDivisionError"),
    "loop": ("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
             "took over 0.5 s"),
}


@pytest.fixture
def fast_limit(monkeypatch):
    monkeypatch.setattr(CT, "TEMPLATE_SECONDS", 0.5)


def tokenizer_dir(tmp_path, template: str):
    """The shipped tokenizer saved with ``template`` as its chat template."""
    folder = tmp_path / "tok"
    build_tokenizer().save_pretrained(str(folder))
    (folder / "chat_template.jinja").write_text(template)
    return folder


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_template_is_refused_when_loaded(tmp_path, fast_limit, name):
    template, needle = HOSTILE[name]
    folder = tokenizer_dir(tmp_path, template)
    with no_hang(60), pytest.raises(UsageError, match="model.tokenizer_path") as e:
        build_tokenizer(folder)
    assert needle in str(e.value) and str(folder) in str(e.value)


@pytest.mark.parametrize("name", ["syntax", "sandbox", "loop"])
def test_eval_of_a_received_model_with_a_hostile_template_is_one_line(
        done_run, tmp_path, capsys, fast_limit, name):
    template, needle = HOSTILE[name]
    model = tmp_path / "model"
    shutil.copytree(done_run / "checkpoints" / "step_000001" / "policy", model)
    (model / "chat_template.jinja").write_text(template)
    with no_hang(120):
        err = one_line_error(capsys, ["eval", "--model", str(model), "--config", SMOKE,
                                      "--out", str(tmp_path / "e.json"), "eval.num_tasks=1"],
                             "chat template", needle)
    assert err.count(str(model)) == 1          # named once, not "m: the template of m"
    assert not (tmp_path / "e.json").exists()


def test_train_with_a_hostile_tokenizer_makes_no_run_folder(tmp_path, capsys, fast_limit):
    folder = tokenizer_dir(tmp_path, HOSTILE["loop"][0])
    with no_hang(120):
        one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                                f"model.tokenizer_path={folder}", *FAST],
                       "model.tokenizer_path", "took over")
    assert not (tmp_path / "r").exists()


def test_every_later_render_is_bounded_and_names_the_source(tmp_path, fast_limit):
    """A template that passes the probe but loops on one conversation (a user turn that
    says so) is stopped too, at the render that loops."""
    loop = HOSTILE["loop"][0]
    folder = tokenizer_dir(tmp_path, "{% if messages[-1]['content'] == 'x' %}" + loop +
                           "{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    tok = build_tokenizer(folder)
    assert CT.render_chat(tok, [{"role": "user", "content": "y"}], tokenize=False) == "y"
    with no_hang(60), pytest.raises(UsageError, match="model.tokenizer_path: the chat "
                                                      "template of .*tok took over"):
        CT.render_chat(tok, [{"role": "user", "content": "x"}], tokenize=False)
    from sharpo_train.step.rollout import chat_prompt_ids
    with no_hang(60), pytest.raises(UsageError, match="took over"):
        chat_prompt_ids(tok, "x")


def test_the_shipped_template_renders_and_an_outer_alarm_is_kept():
    tok = build_tokenizer()
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        text = CT.render_chat(tok, CT.PROBE, tokenize=False, add_generation_prompt=True)
        assert "<|im_start|>assistant" in text
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 0.3                  # the outer timer runs on where it was
        time.sleep(0.5)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
