"""SharpoConfig validation and per-turn segment ids (no training)."""
import pytest

from integrations.trl_support import needs_trl

pytestmark = needs_trl


@pytest.mark.parametrize("kw,name", [({"lam": 1.5}, "lam"), ({"alpha": 1.0}, "alpha"), ({"tau": 0.0}, "tau"),
                                     ({"rho_min": 2.0, "rho_max": 1.0}, "rho_min"),
                                     ({"segmenter": "words"}, "segmenter"), ({"max_hint_tokens": 2}, "max_hint_tokens"),
                                     ({"hint_template": "no slot"}, "hint_template")])
def test_config_rejects_bad_values_by_name(tmp_path, kw, name):
    from sharpo_train.integrations.trl import SharpoConfig

    with pytest.raises(ValueError, match=name):
        SharpoConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **kw)


def test_segments_per_turn_and_whole_completion():
    from sharpo_train.integrations.trl import completion_segment_ids
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    t1 = tok("<think>a</think><action>open door</action>", add_special_tokens=False)["input_ids"]
    env = tok("The door is open.", add_special_tokens=False)["input_ids"]
    t2 = tok("<action>leave</action>", add_special_tokens=False)["input_ids"]
    ids = t1 + env + t2
    mask = [1] * len(t1) + [0] * len(env) + [1] * len(t2)
    seg = completion_segment_ids(tok, ids, mask)
    assert set(seg[:len(t1)]) == {0, 1} and seg[:len(t1)] == sorted(seg[:len(t1)])
    assert set(seg[len(t1):len(t1) + len(env)]) == {-1}
    assert set(seg[len(t1) + len(env):]) == {2}
    plain = tok("no tags here", add_special_tokens=False)["input_ids"]
    assert completion_segment_ids(tok, plain, [1] * len(plain)) == [0] * len(plain)
    assert completion_segment_ids(tok, ids, mask, "completion") == [0] * len(ids)
