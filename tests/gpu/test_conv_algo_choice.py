"""How the CUDA backend chooses cuDNN convolution algorithms, checked on the host (no GPU needed):
the determinism setting (hpcnn.config.set_deterministic), the workspace limit, the order in which
algorithms are tried when one fails at run time, the re-plan rule when the limit grows, and the
refusals' messages. The same decision function runs on a GPU (csrc/ops/conv_algo_choice.h); the
GPU tests of the plans themselves are in test_gpu_contract.py."""
import pytest

import hpcnn
from hpcnn import _core, config

MiB = 1 << 20


def offer(name, deterministic, workspace, usable=True):
    return dict(name=name, deterministic=deterministic, workspace=workspace, usable=usable)


# cuDNN's order (its fastest first), as the heuristics return it for a backward-filter pass.
OFFERS = [
    offer("BWD_FILTER_ALGO_0", False, 0),            # fastest, non-deterministic
    offer("BWD_FILTER_ALGO_FFT", True, 300 * MiB),   # deterministic, a big workspace
    offer("BWD_FILTER_ALGO_1", True, 2 * MiB),       # deterministic, small
    offer("BWD_FILTER_ALGO_3", False, 1 * MiB),
    offer("BWD_FILTER_ALGO_WINOGRAD", True, 0, usable=False),  # not supported for this geometry
]


def choose(mode, limit, failed=(), offers=OFFERS):
    return _core.cuda_choose_conv_algorithms(offers, mode, limit, list(failed))


@pytest.fixture
def restore_determinism():
    before = _core.cuda_get_determinism()
    yield
    _core.cuda_set_determinism(before)


def test_deterministic_by_default_only_deterministic_algorithms_in_cudnns_order():
    assert _core.cuda_get_determinism() == "required" and config.deterministic() is True
    c = choose("required", 1 << 30)
    assert c["order"] == [1, 2] and c["refusal"] == "" and c["replan_at"] is None


def test_a_preferred_algorithm_too_big_for_the_limit_is_skipped_and_replanned_when_it_fits():
    c = choose("required", 100 * MiB)
    assert c["order"] == [2]
    assert c["replan_at"] == 300 * MiB  # the limit at which FFT (preferred: earlier in cuDNN's order) fits
    # below that limit nothing changes; at it, the choice is FFT again
    assert choose("required", 300 * MiB - 1)["order"] == [2]
    assert choose("required", 300 * MiB)["order"][0] == 1


def test_warn_puts_non_deterministic_algorithms_after_the_deterministic_ones():
    assert choose("warn", 1 << 30)["order"] == [1, 2, 0, 3]
    assert choose("warn", 100 * MiB)["order"] == [2, 0, 3]


def test_any_keeps_cudnns_order():
    assert choose("any", 1 << 30)["order"] == [0, 1, 2, 3]
    assert choose("any", 1 * MiB)["order"] == [0, 3]


def test_failed_algorithms_are_never_chosen_again():
    assert choose("required", 1 << 30, failed=[1])["order"] == [2]
    assert choose("any", 1 << 30, failed=[0, 1])["order"] == [2, 3]
    # the re-plan rule ignores failed ones: a failed FFT is no reason to plan again
    assert choose("required", 100 * MiB, failed=[1])["replan_at"] is None


def test_only_non_deterministic_algorithms_fit_required_refuses_warn_and_any_take_them():
    pressure = [offer("ALGO_0", False, 0), offer("ALGO_1", True, 64 * MiB)]
    c = choose("required", 8 * MiB, offers=pressure)
    assert c["order"] == [] and c["refusal_is_memory"]
    msg = c["refusal"]
    assert "deterministic algorithms need at least 67108864 bytes (64.0 MiB)" in msg
    assert "8388608 bytes (8.0 MiB) may be used" in msg
    assert "smaller batch_size" in msg and "set_deterministic('warn')" in msg
    w = choose("warn", 8 * MiB, offers=pressure)
    assert w["order"] == [0] and w["replan_at"] == 64 * MiB  # and deterministic again once it fits
    assert choose("any", 8 * MiB, offers=pressure)["order"] == [0]


def test_no_deterministic_algorithm_at_all_is_a_policy_refusal():
    c = choose("required", 1 << 30, offers=[offer("ALGO_0", False, 0), offer("ALGO_1", True, 0, usable=False)])
    assert c["order"] == [] and not c["refusal_is_memory"]
    assert "no deterministic algorithm" in c["refusal"] and "set_deterministic" in c["refusal"]


# What cuDNN may answer for the backward-filter pass of a convolution over 1 to 3 input channels: no
# deterministic algorithm that can run (fabricated, as the heuristics' results would read).
FEW_CHANNELS_OFFERS = [
    dict(name="CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0", deterministic=False, workspace=0, math_name="CUDNN_FMA_MATH"),
    dict(name="CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3", deterministic=False, workspace=4096,
         math_name="CUDNN_FMA_MATH"),
    dict(name="CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", deterministic=True, workspace=0, math_name="CUDNN_FMA_MATH",
         usable=False, status="CUDNN_STATUS_NOT_SUPPORTED (3000)"),
    dict(name="CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT", deterministic=True, workspace=0,
         math_name="CUDNN_TENSOR_OP_MATH", usable=False,
         status="its math type CUDNN_TENSOR_OP_MATH is not allowed with TF32 off"),
]


def test_a_refusal_for_want_of_a_deterministic_algorithm_names_the_layer_the_shapes_and_the_offers():
    what = "conv2d backward (filter) of input 8x32x32x3, kernel 3x3x3x16, strides 1x1, padding 1x1"
    c = choose("required", 1 << 30, offers=FEW_CHANNELS_OFFERS)
    assert c["order"] == [] and not c["refusal_is_memory"]
    c = _core.cuda_choose_conv_algorithms(FEW_CHANNELS_OFFERS, "required", 1 << 30, [], what, "layer 0 (Conv2D)")
    msg = c["message"]
    assert msg.startswith(f"layer 0 (Conv2D): {what}: cuDNN offers no deterministic algorithm for it"), msg
    assert "set_deterministic('warn')" in msg
    # every offer, with its math, its determinism and, where it cannot run, what cuDNN said
    assert "cuDNN offered 4: " in msg
    assert "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 (CUDNN_FMA_MATH, non-deterministic, 0 bytes of workspace)" in msg
    assert "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 (CUDNN_FMA_MATH, non-deterministic, 4096 bytes of workspace)" in msg
    assert ("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 (CUDNN_FMA_MATH, deterministic, not usable: "
            "CUDNN_STATUS_NOT_SUPPORTED (3000))") in msg
    assert ("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT (CUDNN_TENSOR_OP_MATH, deterministic, not usable: its math type "
            "CUDNN_TENSOR_OP_MATH is not allowed with TF32 off)") in msg
    # outside a layer (an op called directly) the message starts with the pass and the shapes
    assert _core.cuda_choose_conv_algorithms(FEW_CHANNELS_OFFERS, "required", 1 << 30, [], what)["message"].startswith(
        f"{what}: cuDNN offers no deterministic algorithm")
    # what may run has no message; warn takes the non-deterministic ones
    assert _core.cuda_choose_conv_algorithms(FEW_CHANNELS_OFFERS, "warn", 1 << 30, [], what)["message"] == ""


def test_an_empty_answer_of_cudnn_is_named_too():
    c = _core.cuda_choose_conv_algorithms([], "required", 1 << 30, [], "conv2d forward", "layer 2 (Conv2D)")
    assert c["message"] == ("layer 2 (Conv2D): conv2d forward: cuDNN offers no algorithm that can run it. "
                            "cuDNN offered no algorithm at all")


def test_nothing_fits_names_the_smallest_need_and_nothing_runs_names_the_failures():
    c = choose("any", 1000, failed=[0])  # ALGO_0 needs no workspace but failed before
    assert c["order"] == [] and c["refusal_is_memory"]
    assert "1000 bytes" in c["refusal"] and "smallest needs 1048576 bytes" in c["refusal"]
    c = choose("any", 1 << 30, failed=[0, 1, 2, 3])
    assert c["order"] == [] and not c["refusal_is_memory"]
    assert "failed at run time" in c["refusal"]
    for name in ("BWD_FILTER_ALGO_0", "BWD_FILTER_ALGO_FFT", "BWD_FILTER_ALGO_1", "BWD_FILTER_ALGO_3"):
        assert name in c["refusal"]


def test_bad_determinism_names_are_refused():
    with pytest.raises(ValueError, match="'required', 'warn' or 'any'"):
        choose("sometimes", 0)
    with pytest.raises(ValueError, match="'required', 'warn' or 'any'"):
        _core.cuda_set_determinism("yes")


def test_set_deterministic_round_trip_and_tensorflows_name(restore_determinism):
    config.set_deterministic("warn")
    assert config.deterministic() == "warn" and _core.cuda_get_determinism() == "warn"
    config.set_deterministic(False)
    assert config.deterministic() is False and _core.cuda_get_determinism() == "any"
    config.enable_op_determinism()
    assert config.deterministic() is True and _core.cuda_get_determinism() == "required"
    for bad in ("yes", 1, None, "True"):
        with pytest.raises(ValueError, match="True, False or 'warn'"):
            config.set_deterministic(bad)
    assert config.deterministic() is True


def test_no_plans_without_a_gpu_run():
    if not _core.cuda_unavailable_reason():
        pytest.skip("a GPU is usable here: test_gpu_contract.py checks the plans")
    assert config.cudnn_algorithms() == []
    assert config.cudnn_algorithms(device="cpu") == []
    m = hpcnn.Sequential([hpcnn.layers.InputLayer(input_shape=[4, 4, 1]), hpcnn.layers.Conv2D(2, 3),
                          hpcnn.layers.Flatten(), hpcnn.layers.Dense(2, activation="softmax")])
    assert config.cudnn_algorithms(m) == []  # a CPU model has no cuDNN plans
    _core.cuda_clear_conv_plans()  # harmless without plans
    _core.cuda_force_conv_failures([], False)
    assert _core.cuda_primary_context_active(0) is False


def test_the_host_self_test_checks_the_decisions():
    names = [n for n, _, _ in _core.cuda_kernel_selftest()]
    for part in ("cuDNN algorithm choice", "cuDNN re-plan", "cuDNN run-time fallback",
                 "cuDNN statuses that move a plan to its next algorithm, misaligned pointers included"):
        assert any(n.startswith(part) for n in names), names
