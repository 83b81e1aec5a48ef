"""The rest of torch's runtime namespaces a script touches: ``torch.cuda`` without a GPU, ``torch.backends``'
flags, ``torch.amp``'s decorators, ``torch.autograd``'s and ``torch.func``'s remaining names,
``torch.utils.checkpoint``'s helpers and ``torch.serialization``'s settings, against torch's own behaviour on
this CPU-only build; and every public name of those namespaces is here (present or refused) but for the
submodules listed as out of scope."""

import importlib
import warnings
from types import ModuleType

import numpy as np
import pytest
import torch

import tinyattn.compat as tc
from tinyattn.compat.refusals import is_refused

BACKENDS = ["cpu", "cuda", "cudnn", "cusparselt", "kleidiai", "mha", "miopen", "mkl", "mkldnn", "mps", "nnpack",
            "openmp", "opt_einsum", "quantized"]
OUT_OF_SCOPE = {
    "torch.cuda": {"graphs", "jiterator", "memory", "nccl", "nvtx", "profiler", "random", "sparse", "streams",
                   "tunable"},
    "torch.backends": {"m", "python_native"},
}


@pytest.mark.parametrize("name", ["torch.cuda", "torch.backends", "torch.amp", "torch.autograd", "torch.func",
                                  "torch.utils.checkpoint", "torch.serialization"])
def test_every_public_name_is_here_or_out_of_scope(name):
    theirs = importlib.import_module(name)
    ours = importlib.import_module(name.replace("torch", "tinyattn.compat", 1))
    names = getattr(theirs, "__all__", None)
    if names is None:  # dir() lists the submodules other code has imported too: torch.backends' own, then
        names = [n for n in dir(theirs) if not n.startswith("_") and not isinstance(getattr(theirs, n), ModuleType)]
        names += BACKENDS if name == "torch.backends" else []
    missing = [n for n in names if not hasattr(ours, n) and n not in OUT_OF_SCOPE.get(name, ())]
    assert not missing, missing


needs_no_gpu = pytest.mark.skipif(tc.cuda.is_available(), reason="the values torch gives without CUDA")


@needs_no_gpu
@pytest.mark.parametrize("name", ["memory_allocated", "memory_reserved", "max_memory_allocated",
                                  "max_memory_reserved", "memory_stats", "memory_stats_as_nested_dict",
                                  "host_memory_stats", "host_memory_stats_as_nested_dict", "get_arch_list",
                                  "get_gencode_flags", "is_initialized", "is_tf32_supported", "get_rng_state_all",
                                  "seed", "seed_all"])
def test_cuda_without_a_gpu_answers_as_torch_does(name):
    assert getattr(tc.cuda, name)() == getattr(torch.cuda, name)()


@needs_no_gpu
def test_cuda_calls_that_need_a_gpu_say_so_and_the_rest_is_refused():
    for name in ("init", "mem_get_info", "get_device_properties", "get_device_capability", "initial_seed"):
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            getattr(tc.cuda, name)()
    with pytest.raises(RuntimeError, match="no CUDA GPU"), tc.cuda.device(0):
        pass
    with tc.cuda.device(None), tc.cuda.device_of(tc.ones(1)):  # nothing to switch
        pass
    for name in ("Stream", "Event", "CUDAGraph", "FloatTensor", "memory_summary", "MemPool", "utilization",
                 "get_rng_state"):
        assert is_refused(getattr(tc.cuda, name)), name
    with pytest.raises(NotImplementedError, match="CuPy's current stream"):
        tc.cuda.Event(enable_timing=True)
    tc.cuda.reset_peak_memory_stats()
    assert tc.cuda.has_half is torch.cuda.has_half and tc.cuda.has_magma is torch.cuda.has_magma
    assert issubclass(tc.cuda.CudaError, RuntimeError) and tc.cuda.is_current_stream_capturing() is False


def test_backends_flags():
    b, tb = tc.backends, torch.backends
    assert b.cpu.get_cpu_capability() == tb.cpu.get_cpu_capability()
    assert (b.cusparselt.is_available(), b.cusparselt.version()) == (tb.cusparselt.is_available(),
                                                                      tb.cusparselt.version())
    assert b.kleidiai.is_available() == tb.kleidiai.is_available()
    assert b.miopen.immediate == tb.miopen.immediate
    assert (b.opt_einsum.is_available(), b.opt_einsum.enabled) == (False, False)
    for library in (b.mkl, b.mkldnn, b.openmp, b.nnpack):  # torch's CPU build has them; compat calls none
        assert library.is_available() is False
    assert b.mha.get_fastpath_enabled() == tb.mha.get_fastpath_enabled()
    b.mha.set_fastpath_enabled(False)
    assert b.mha.get_fastpath_enabled() is False
    b.mha.set_fastpath_enabled(True)
    with b.nnpack.flags(enabled=True):
        assert b.nnpack.enabled is True
    assert b.nnpack.enabled is False and b.quantized.engine == "none"
    with b.mkl.verbose(b.mkl.VERBOSE_ON):
        pass


@pytest.mark.parametrize("lib", [torch, tc], ids=["torch", "compat"])
def test_amp_custom_fwd_and_bwd_leave_a_function_as_written(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu")
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    Cube.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]
    with pytest.raises(TypeError, match="device_type"):
        lib.amp.custom_fwd(lambda ctx, x: x)


def test_autograd_names():
    from tinyattn.compat.autograd.grad_mode import no_grad, set_multithreading_enabled
    from tinyattn.compat.autograd.variable import Variable

    assert no_grad is tc.no_grad and Variable is tc.autograd.Variable
    x = tc.tensor([2.0], requires_grad=True)
    with set_multithreading_enabled(False), tc.autograd.enforce_grad_layout_policy(False):
        (x * x).sum().backward()
    assert x.grad.tolist() == [4.0]
    assert is_refused(tc.autograd.NestedIOFunction)


def test_func_linearize_matches_torch():
    x = np.array([0.3, -1.2, 2.0])
    out, jvp_fn = tc.func.linearize(lambda t: t.sin() * t, tc.tensor(x))
    out_t, jvp_fn_t = torch.func.linearize(lambda t: t.sin() * t, torch.tensor(x))
    tangent = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(out.numpy(), out_t.numpy(), rtol=1e-12)
    np.testing.assert_allclose(jvp_fn(tc.tensor(tangent)).numpy(), jvp_fn_t(torch.tensor(tangent)).numpy(), rtol=1e-12)


def test_func_stack_module_state_matches_torch():
    ours = [tc.nn.Linear(3, 2).double() for _ in range(3)]
    theirs = [torch.nn.Linear(3, 2).double() for _ in range(3)]
    for a, b in zip(ours, theirs):
        for name, p in b.named_parameters():
            getattr(a, name).data.copy_(tc.tensor(p.detach().numpy()))
    params, buffers = tc.func.stack_module_state(ours)
    params_t, buffers_t = torch.func.stack_module_state(theirs)
    assert sorted(params) == sorted(params_t) and buffers == buffers_t == {}
    for name in params:
        np.testing.assert_array_equal(params[name].numpy(), params_t[name].detach().numpy())
        assert params[name].requires_grad and params[name].grad_fn is None
    ours[1].bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="same .requires_grad"):
        tc.func.stack_module_state(ours)
    with pytest.raises(RuntimeError, match="same class"):
        tc.func.stack_module_state([tc.nn.Linear(3, 2), tc.nn.ReLU()])


def test_func_functionalize_keeps_results_and_writes():
    def f(t):
        y = t.clone()
        y.mul_(2)
        t.add_(1)
        return y

    x, x_t = tc.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert tc.func.functionalize(f)(x).tolist() == torch.func.functionalize(f)(x_t).tolist()
    assert x.tolist() == x_t.tolist() == [2.0, 3.0]
    for name in ("debug_unwrap", "rearrange", "replace_all_batch_norm_modules_"):
        assert is_refused(getattr(tc.func, name))


def test_checkpoint_helpers_match_torch():
    C, TC = tc.utils.checkpoint, torch.utils.checkpoint
    assert [p.name for p in C.CheckpointPolicy] == [p.name for p in TC.CheckpointPolicy]
    assert issubclass(C.CheckpointError, RuntimeError)
    for module, lib in ((C, tc), (TC, torch)):
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            module.check_backward_validity([lib.ones(1)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            module.check_backward_validity([lib.ones(1, requires_grad=True)])
        a, b = module.detach_variable((lib.ones(1, requires_grad=True) * 2, 3))
        assert a.requires_grad and a.is_leaf and b == 3
        assert module.get_device_states(lib.ones(1)) == ([], [])
        module.set_device_states([], [])
        first, second = module.noop_context_fn()
        with first, second, module.set_checkpoint_debug_enabled(True), module.set_checkpoint_early_stop(False):
            pass
    assert is_refused(C.create_selective_checkpoint_contexts) and is_refused(C.CheckpointFunction)


def test_serialization_settings_and_helpers_match_torch():
    S, TS = tc.serialization, torch.serialization
    assert [e.name for e in S.LoadEndianness] == [e.name for e in TS.LoadEndianness]
    assert S.get_crc32_options() == TS.get_crc32_options()
    assert S.get_default_load_endianness() == TS.get_default_load_endianness()
    S.set_default_load_endianness(S.LoadEndianness.LITTLE)
    assert S.get_default_load_endianness() is S.LoadEndianness.LITTLE
    S.set_default_load_endianness(None)
    with pytest.raises(TypeError):
        S.set_default_load_endianness("little")
    for required in [(1, 0), (99,), (int(np.__version__.split(".")[0]), 0)]:
        assert S.check_module_version_greater_or_equal(np, required) == \
            TS.check_module_version_greater_or_equal(np, required)

    class Odd:
        __name__, __version__ = "odd", "x.y"

    for module in (S, TS):
        with pytest.raises(RuntimeError, match="malformed"):
            module.check_module_version_greater_or_equal(Odd, (1, 0))
    with S.mkdtemp() as path:
        import os

        assert os.path.isdir(path)
    assert not os.path.exists(path)
    assert issubclass(S.SourceChangeWarning, Warning)
    assert is_refused(S.get_unsafe_globals_in_checkpoint) and is_refused(S.StorageType)
