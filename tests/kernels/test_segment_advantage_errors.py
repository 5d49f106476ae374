"""Bad input to segment_advantage (docs/api.md): each case raises ValueError/TypeError
whose message names the argument, on every backend, and leaves the inputs unmodified."""
import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import _backend
from sharpo_kernels.testing import refusal

BACKENDS = _backend.usable_backends(torch.device("cpu"), ("torch", "cpp", "triton"))


def good():
    """A valid batch: B=3, L=6."""
    g = torch.Generator().manual_seed(0)
    return dict(
        teacher_logp=-torch.rand(3, 6, generator=g),
        student_logp=-torch.rand(3, 6, generator=g),
        segment_ids=torch.tensor([[0, 0, -1, 1, 1, -1], [-1, 0, 1, 1, 2, -1], [-1] * 6]),
        advantages=torch.tensor([1.0, -0.5, 0.2]),
        has_teacher=torch.tensor([True, True, False]),
        response_mask=torch.ones(3, 6, dtype=torch.int64),
        traj_index=torch.tensor([0, 1, 1]),
    )


def _set(batch, name, index, value):
    x = batch[name].clone()
    x[index] = value
    batch[name] = x


def bad_cases():
    """(id, argument named in the message, exception type, function editing a good batch)."""
    ids = lambda rows: torch.tensor(rows)  # noqa: E731
    cases = [
        # types, shapes, dtypes, devices
        ("teacher-not-tensor", "teacher_logp", TypeError,
         lambda b: b.update(teacher_logp=b["teacher_logp"].tolist())),
        ("teacher-1d", "teacher_logp", ValueError, lambda b: b.update(teacher_logp=b["teacher_logp"][0])),
        ("teacher-float64", "teacher_logp", ValueError,
         lambda b: b.update(teacher_logp=b["teacher_logp"].double(), student_logp=b["student_logp"].double())),
        ("teacher-int", "teacher_logp", ValueError,
         lambda b: b.update(teacher_logp=b["teacher_logp"].long(), student_logp=b["student_logp"].long())),
        ("student-shape", "student_logp", ValueError, lambda b: b.update(student_logp=b["student_logp"][:, :5])),
        ("student-dtype", "student_logp", ValueError, lambda b: b.update(student_logp=b["student_logp"].half())),
        ("ids-shape", "segment_ids", ValueError, lambda b: b.update(segment_ids=b["segment_ids"][:2])),
        ("ids-float", "segment_ids", ValueError, lambda b: b.update(segment_ids=b["segment_ids"].float())),
        ("ids-bool", "segment_ids", ValueError, lambda b: b.update(segment_ids=b["segment_ids"] >= 0)),
        ("ids-device", "segment_ids", ValueError, lambda b: b.update(segment_ids=b["segment_ids"].to("meta"))),
        ("adv-shape", "advantages", ValueError, lambda b: b.update(advantages=b["advantages"][None])),
        ("adv-int", "advantages", ValueError, lambda b: b.update(advantages=b["advantages"].long())),
        ("adv-not-tensor", "advantages", TypeError, lambda b: b.update(advantages=[1.0, 2.0, 3.0])),
        ("teacher-flag-dtype", "has_teacher", ValueError, lambda b: b.update(has_teacher=b["has_teacher"].long())),
        ("teacher-flag-shape", "has_teacher", ValueError, lambda b: b.update(has_teacher=b["has_teacher"][:2])),
        ("mask-shape", "response_mask", ValueError, lambda b: b.update(response_mask=b["response_mask"].t())),
        ("traj-shape", "traj_index", ValueError, lambda b: b.update(traj_index=b["traj_index"][:1])),
        ("traj-float", "traj_index", ValueError, lambda b: b.update(traj_index=b["traj_index"].float())),
        ("all-meta", "teacher_logp", ValueError,      # no data to read
         lambda b: b.update({k: v.to("meta") for k, v in b.items() if isinstance(v, torch.Tensor)})),
        # data rules
        ("ids-below-minus-one", "segment_ids", ValueError, lambda b: _set(b, "segment_ids", (0, 2), -2)),
        ("ids-split-run", "segment_ids", ValueError,
         lambda b: b.update(segment_ids=ids([[0, 0, -1, 0, 1, -1], [-1] * 6, [-1] * 6]))),
        ("ids-out-of-order", "segment_ids", ValueError,
         lambda b: b.update(segment_ids=ids([[1, 1, -1, 0, 0, -1], [-1] * 6, [-1] * 6]))),
        ("ids-start-at-one", "segment_ids", ValueError,
         lambda b: b.update(segment_ids=ids([[-1] * 6, [1, 1, 2, 2, -1, -1], [-1] * 6]))),
        ("ids-skip", "segment_ids", ValueError,
         lambda b: b.update(segment_ids=ids([[0, 0, 2, 2, -1, -1], [-1] * 6, [-1] * 6]))),
        ("ids-adjacent-repeat", "segment_ids", ValueError,
         lambda b: b.update(segment_ids=ids([[0, 1, 0, -1, -1, -1], [-1] * 6, [-1] * 6]))),
        ("mask-value-int64", "response_mask", ValueError, lambda b: _set(b, "response_mask", (1, 3), 2)),
        ("mask-value-negative", "response_mask", ValueError, lambda b: _set(b, "response_mask", (2, 0), -1)),
        ("mask-value-float", "response_mask", ValueError,
         lambda b: (b.update(response_mask=b["response_mask"].float()), _set(b, "response_mask", (0, 5), 0.5))),
        ("mask-value-int32", "response_mask", ValueError,
         lambda b: (b.update(response_mask=b["response_mask"].int()), _set(b, "response_mask", (0, 5), 3))),
        ("mask-value-uint8", "response_mask", ValueError,
         lambda b: (b.update(response_mask=b["response_mask"].to(torch.uint8)), _set(b, "response_mask", (0, 1), 7))),
        ("mask-empties-segment", "response_mask", ValueError,
         lambda b: (_set(b, "response_mask", (1, 2), 0), _set(b, "response_mask", (1, 3), 0))),
        ("teacher-nan-in-segment", "teacher_logp", ValueError, lambda b: _set(b, "teacher_logp", (0, 1), float("nan"))),
        ("teacher-inf-in-segment", "teacher_logp", ValueError, lambda b: _set(b, "teacher_logp", (1, 4), -float("inf"))),
        ("student-nan-in-segment", "student_logp", ValueError, lambda b: _set(b, "student_logp", (1, 1), float("nan"))),
        ("student-inf-in-segment", "student_logp", ValueError, lambda b: _set(b, "student_logp", (0, 3), float("inf"))),
        ("advantage-nan", "advantages", ValueError, lambda b: _set(b, "advantages", 1, float("nan"))),
        ("advantage-inf", "advantages", ValueError, lambda b: _set(b, "advantages", 0, float("inf"))),
    ]
    params = [
        ("lam", -0.1), ("lam", 1.5), ("lam", float("nan")), ("alpha", 0.0), ("alpha", 1.0),
        ("alpha", -0.2), ("tau", 0.0), ("tau", -1.0), ("tau", float("inf")), ("rho_min", 0.0),
        ("rho_min", -1.0), ("rho_max", 0.1),
    ]
    for name, value in params:
        cases.append((f"{name}={value}", name, ValueError, lambda b, n=name, v=value: b.update({n: v})))
    cases += [
        ("lam-bool", "lam", TypeError, lambda b: b.update(lam=True)),
        ("tau-str", "tau", TypeError, lambda b: b.update(tau="1.0")),
        ("backend-unknown", "backend", ValueError, lambda b: b.update(backend="fortran")),
        ("backend-cuda-on-cpu", "backend", ValueError, lambda b: b.update(backend="cuda")),
        ("backend-type", "backend", TypeError, lambda b: b.update(backend=3)),
    ]
    return cases


CASES = bad_cases()


def _snapshot(batch):
    return {k: v.clone() for k, v in batch.items() if isinstance(v, torch.Tensor) and v.device.type != "meta"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_good_batch_passes(backend):
    res = sk.segment_advantage(**good(), backend=backend)
    assert res.num_segments.tolist() == [2, 3, 0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case,arg,exc,edit", CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_argument(backend, case, arg, exc, edit):
    batch = good()
    batch["backend"] = backend
    edit(batch)
    before = _snapshot(batch)
    with pytest.raises(exc) as info:
        sk.segment_advantage(**batch)
    msg = str(info.value)
    assert msg.startswith(arg + ":") or f"{arg}:" in msg, msg
    for k, v in before.items():      # nothing written into the inputs
        assert torch.equal(v.nan_to_num(1e9), batch[k].nan_to_num(1e9)), k


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_nonfinite_values_are_allowed(backend):
    """NaN/inf log-probs outside segments, at masked segment positions, or in rows without a
    teacher are ignored (documented choice)."""
    b = good()
    b["teacher_logp"][0, 2] = float("nan")          # outside any segment
    b["student_logp"][1, 5] = float("inf")          # outside any segment
    b["response_mask"][0, 4] = 0                    # masked position inside segment 1 ...
    b["teacher_logp"][0, 4] = float("nan")          # ... may hold NaN
    b["teacher_logp"][2] = float("nan")             # row without a teacher
    b["has_teacher"][1] = False
    b["teacher_logp"][1] = float("nan")             # now row 1 has no teacher either
    res = sk.segment_advantage(**b, backend=backend)
    assert torch.isfinite(res.advantages).all()
    assert res.advantages[0, 4] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_location_is_reported(backend):
    b = good()
    b["student_logp"][1, 3] = float("nan")
    with pytest.raises(ValueError, match=r"student_logp: .*row 1, position 3"):
        sk.segment_advantage(**b, backend=backend)


def _message(batch, backend):
    return refusal(sk.segment_advantage, **batch, backend=backend)


@pytest.mark.parametrize("case,arg,exc,edit", CASES, ids=[c[0] for c in CASES])
def test_same_message_on_every_backend(case, arg, exc, edit):
    """The message (not only the argument named) is the same on every backend."""
    batch = good()
    edit(batch)
    if case.startswith("backend-"):
        pytest.skip("the backend argument itself")
    msgs = {b: _message(dict(batch), b) for b in BACKENDS}
    assert len(set(msgs.values())) == 1, msgs


def _broken(seed):
    """A random batch with several broken rules at random places (ids, mask values,
    non-finite and too-large log-probs, advantages): the rules' priority decides which
    error is reported."""
    from sharpo_kernels.testing import random_batch
    g = torch.Generator().manual_seed(seed)
    b = random_batch(5, 23, segments=(1, 5), seed=seed)
    b["traj_index"] = None
    b["response_mask"] = b["response_mask"].to((torch.float32, torch.int32)[seed % 2])
    for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
        kind = int(torch.randint(0, 7, (1,), generator=g))
        r, p = int(torch.randint(0, 5, (1,), generator=g)), int(torch.randint(0, 23, (1,), generator=g))
        if kind == 0:
            b["segment_ids"][r, p] = -3
        elif kind == 1:
            b["segment_ids"][r, p] = 9
        elif kind == 2:
            b["response_mask"][r, p] = 0.5 if seed % 2 == 0 else 3
        elif kind == 3:
            b["teacher_logp"][r, p] = float("nan")
        elif kind == 4:
            b["student_logp"][r, p] = 1e37
        elif kind == 5:
            b["advantages"][r] = float("inf")
        else:
            b["response_mask"][r] = 0.0          # may empty a segment
    return b


@pytest.mark.parametrize("seed", range(12))
def test_priority_between_rules_is_the_same(seed):
    """Several broken rules at once: every backend reports the same one."""
    b = _broken(seed)
    msgs = {be: _message(dict(b), be) for be in BACKENDS}
    assert len(set(msgs.values())) == 1, msgs


def test_refusal_helper_reports_what_it_caught():
    """The messages compared above come from sharpo_kernels.testing.refusal: a refusal that
    always said "no error" would make those comparisons pass without checking anything."""
    assert refusal(int, "x") == "ValueError: invalid literal for int() with base 10: 'x'"
    assert refusal(sk.segment_advantage, **good(), backend=1).startswith("TypeError: backend")
    assert refusal(int, "3") == "no error"
    with pytest.raises(KeyError):
        refusal({}.__getitem__, "k")
