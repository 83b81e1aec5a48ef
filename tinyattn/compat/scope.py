"""What compat leaves out on purpose, and why: torch's names that this package does not and will not provide.

Each entry is a pattern over torch's qualified names (``fnmatch``: ``*`` matches anything) and the reason. Asking
compat for such a name raises an ``AttributeError`` that gives the reason; the inventory
(``tests/compat/inventory.py``) counts these names as *out of scope*.

>>> from tinyattn.compat.scope import out_of_scope
>>> out_of_scope("torch.quantize_per_tensor")
'quantization: tinyattn computes in floating point only'
>>> out_of_scope("torch.nn.Linear") is None
True
>>> import tinyattn.compat as torch
>>> torch.fft
Traceback (most recent call last):
...
AttributeError: tinyattn.compat has no `fft`: out of scope (spectral ops (FFT, STFT, signal windows): ...)
"""

from fnmatch import fnmatchcase

_JIT = "TorchScript's and the dispatcher's internals: tinyattn runs Python and never traces or scripts a model"
_QUANT = "quantization: tinyattn computes in floating point only"
_SPARSE = "sparse layouts: tinyattn's arrays are dense (NumPy's)"
_COMPLEX = "complex numbers: tinyattn's ops and gradients are written for real tensors"
_STORAGE = "storages: a tinyattn tensor is a NumPy array, whose memory NumPy owns"
_KERNELS = "one backend's kernel (cuDNN, MIOpen, oneDNN, FBGEMM) or ATen's internal form of an op: call the op itself"
_COPIES = "the `_copy` forms that functionalization uses: the view op, then `.clone()`, gives the same"
_SYMBOLIC = "symbolic shapes for torch.export and torch.compile's tracing: compat's shapes are Python ints"
_DTYPES = "a dtype NumPy has no arithmetic for (sub-byte, float8, packed bits)"
_DECOMP = ("a linear-algebra decomposition or solver: tinyattn differentiates the products and norms attention uses; "
           "numpy.linalg gives the values without gradients")
_SPECTRAL = "spectral ops (FFT, STFT, signal windows): NumPy's numpy.fft gives the values without gradients"
_SPECIAL = "special functions beyond the op set (gamma family, Bessel): scipy.special gives the values"
_DEVICE = "an accelerator or device runtime other than CUDA (XPU, MTIA, MPS, IPU, Vulkan, XLA, MAIA)"
_SUBSYSTEM = "a torch subsystem that is not about training a model in one Python process"
_GLOBAL_HOOKS = ("hooks on every module of the process: a process-wide switch every call would read (tinyattn keeps "
                 "none); register the hook on the modules themselves (register_forward_hook…)")

OUT_OF_SCOPE = [
    # TorchScript, the dispatcher and torch's C++ types
    *[(f"torch.{n}", _JIT) for n in (
        "*Type", "Script*", "Graph", "GraphExecutorState", "Node", "Block", "Value", "Use", "Code",
        "CompilationUnit", "ConcreteModuleType*", "FunctionSchema", "Argument", "ArgumentSpec", "CompleteArgumentSpec",
        "AliasDb", "FileCheck", "ErrorReport", "JITException", "CallStack", "Gradient", "ExecutionPlan",
        "IODescriptor", "InferredType", "LiteScriptModule", "StaticModule", "TracingState", "DeepCopyMemoTable",
        "DeserializationStorageContext", "SerializationStorageContext", "PyTorchFileReader", "PyTorchFileWriter",
        "import_ir_module*", "parse_ir", "parse_schema", "parse_type_comment", "merge_type_from_type_comment",
        "unify_type_list", "fork", "wait", "Future", "Capsule", "OperatorInfo", "Tag", "DispatchKey*",
        "ExcludeDispatchKeyGuard", "DisableTorchFunction*", "AggregationType", "AVG", "SUM", "BenchmarkConfig",
        "BenchmarkExecutionStats", "ThroughputBenchmark", "LockingLogger", "NoopLogger", "cpp", "classes", "ops",
        "library", "fx", "export", "compiler", "package", "overrides", "return_types",
        "Tensor.__torch_dispatch__", "Tensor.__torch_function__", "Tensor.as_subclass", "Tensor.module_load",
        "Tensor.output_nr", "Tensor.name", "Tensor.grad_dtype", "Tensor.volatile", "Tensor.reinforce",
        "nn.functional.boolean_dispatch", "nn.functional.handle_torch_function", "nn.functional.has_torch_function*",
        "nn.functional.BroadcastingList*", "nn.functional.assert_int_or_pair", "nn.functional.DType",
        "nn.functional.TYPE_CHECKING", "nn.functional.*_notes", "nn.functional.Tensor",
        "func.debug_unwrap", "func.functionalize", "autograd.enforce_grad_layout_policy")],
    # quantization
    *[(f"torch.{n}", _QUANT) for n in (
        "quantiz*", "dequantize", "fake_quantize*", "q_*", "qint*", "quint*", "qscheme", "int_repr", "choose_qparams*",
        "empty_quantized", "ao", "Tensor.q_*", "Tensor.dequantize", "Tensor.int_repr", "Tensor.qscheme",
        "Tensor.is_quantized", "nn.quantiz*", "nn.qat", "nn.intrinsic", "nn.functional.scaled_*mm",
        "nn.functional.grouped_mm", "nn.functional.ScalingType", "nn.functional.SwizzleType")],
    # sparse layouts
    *[(f"torch.{n}", _SPARSE) for n in (
        "sparse*", "*indices_copy", "values_copy", "smm", "hsmm", "dsmm", "spmm", "sspaddmm", "saddmm", "hspmm",
        "resize_as_sparse_", "Tensor.to_sparse*", "Tensor.is_sparse*", "Tensor.coalesce", "Tensor.is_coalesced",
        "Tensor.indices", "Tensor.values", "Tensor.*indices", "Tensor.sparse_*", "Tensor.dense_dim", "Tensor.to_dense",
        "Tensor.smm", "Tensor.sspaddmm", "Tensor.resize_as_sparse_")],
    # complex numbers
    *[(f"torch.{n}", _COMPLEX) for n in (
        "complex*", "cfloat", "cdouble", "chalf", "polar", "view_as_complex*", "view_as_real*", "conj*",
        "resolve_conj", "resolve_neg", "is_conj", "is_neg", "angle", "imag", "real", "Tensor.__complex__",
        "Tensor.cfloat", "Tensor.cdouble", "Tensor.chalf", "Tensor.conj*", "Tensor.resolve_*", "Tensor.is_conj",
        "Tensor.is_neg", "Tensor.angle", "Tensor.imag", "Tensor.real", "Tensor.H", "Tensor.mH", "Tensor.adjoint",
        "adjoint")],
    # storages
    *[(f"torch.{n}", _STORAGE) for n in (
        "*Storage", "storage", "is_storage", "from_file", "Tensor.storage*", "Tensor.untyped_storage",
        "Tensor.data_ptr", "Tensor.const_data_ptr", "Tensor.set_", "Tensor.is_set_to", "Tensor.share_memory_",
        "Tensor.is_shared", "Tensor.record_stream", "Tensor.__cuda_array_interface__", "Tensor.__dlpack*",
        "Tensor.resize*", "Tensor.new_empty_strided", "empty_strided", "empty_permuted", "Tensor.dim_order")],
    # backend kernels and ATen internals
    *[(f"torch.{n}", _KERNELS) for n in (
        "cudnn_*", "miopen_*", "mkldnn_*", "fbgemm_*", "native_*", "batch_norm_*", "conv_tbc", "convolution",
        "affine_grid_generator", "grid_sampler*", "embedding_renorm_", "rnn_relu*", "rnn_tanh*", "lstm", "lstm_cell",
        "gru", "gru_cell", "quantized_*", "feature_dropout*",
        "Tensor.to_mkldnn", "Tensor.is_mkldnn", "nn.functional.native_channel_shuffle", "nn.functional.conv_tbc",
        "hash_tensor", "Tensor.hash_tensor", "thread_safe_generator")],
    (r"torch.*_copy", _COPIES), ("torch.Tensor.narrow_copy", _COPIES),
    # symbolic shapes
    *[(f"torch.{n}", _SYMBOLIC) for n in ("Sym*", "sym_*", "cond")],
    # dtypes NumPy cannot compute in
    *[(f"torch.{n}", _DTYPES) for n in ("float8_*", "float4_*", "bits*", "bit", "int1", "int2", "int3", "int4",
                                        "int5", "int6", "int7", "uint1", "uint2", "uint3", "uint4", "uint5",
                                        "uint6", "uint7")],
    # decompositions and solvers
    *[(f"torch.{n}", _DECOMP) for n in (
        "svd", "qr", "cholesky*", "det", "slogdet", "logdet", "inverse", "pinverse", "lu*", "triangular_solve",
        "lobpcg", "geqrf", "orgqr", "ormqr", "matrix_exp", "Tensor.svd", "Tensor.qr", "Tensor.cholesky*",
        "Tensor.det", "Tensor.slogdet", "Tensor.logdet", "Tensor.inverse", "Tensor.pinverse", "Tensor.lu*",
        "Tensor.triangular_solve", "Tensor.geqrf", "Tensor.orgqr", "Tensor.ormqr", "Tensor.matrix_exp",
        "Tensor.eig", "Tensor.symeig", "Tensor.lstsq", "Tensor.solve", "linalg.LinAlgError", "linalg.cholesky*",
        "linalg.cond", "linalg.det", "linalg.eig*", "linalg.householder_product", "linalg.inv*", "linalg.ldl_*",
        "linalg.lstsq", "linalg.lu*", "linalg.matrix_exp", "linalg.matrix_rank", "linalg.pinv", "linalg.qr",
        "linalg.slogdet", "linalg.solve*", "linalg.svd*", "linalg.tensorinv", "linalg.tensorsolve",
        "linalg.common_notes")],
    # spectral
    *[(f"torch.{n}", _SPECTRAL) for n in ("fft", "signal", "stft", "istft", "*_window", "Tensor.stft",
                                         "Tensor.istft")],
    # special functions
    *[(f"torch.{n}", _SPECIAL) for n in ("special", "i0*", "igamma*", "polygamma", "mvlgamma", "digamma",
                                        "Tensor.i0*", "Tensor.igamma*", "Tensor.polygamma*", "Tensor.mvlgamma*",
                                        "Tensor.digamma*")],
    # other devices
    *[(f"torch.{n}", _DEVICE) for n in ("xpu", "mtia", "mps", "is_vulkan_available", "Tensor.xpu", "Tensor.ipu",
                                       "Tensor.mtia", "Tensor.is_xpu", "Tensor.is_ipu", "Tensor.is_mtia",
                                       "Tensor.is_maia", "Tensor.is_mps", "Tensor.is_vulkan", "Tensor.is_xla",
                                       "Tensor.is_meta", "accelerator", "AcceleratorError", "Stream", "Event")],
    ("torch.nn.modules.module.register_module_*", _GLOBAL_HOOKS),
    # nn's remaining corners
    *[(f"torch.{n}", "speech recognition's alignment loss (CTC's forward-backward recursion): not built; tinyattn's "
       "models and examples are text and sequence models")
      for n in ("nn.CTCLoss", "nn.modules.CTCLoss", "nn.modules.loss.CTCLoss", "nn.functional.ctc_loss")],
    *[(f"torch.{n}", "Lua Torch's cross-map local response norm: nn.LocalResponseNorm is the same normalisation")
      for n in ("nn.CrossMapLRN2d", "nn.modules.CrossMapLRN2d", "nn.modules.normalization.CrossMapLRN2d")],
    *[(f"torch.{n}", "torch's fused linear-and-cross-entropy (new in 2.13): nn.Linear then F.cross_entropy computes "
       "the same") for n in ("nn.LinearCrossEntropy*", "nn.modules.LinearCrossEntropy*",
                             "nn.modules.loss.LinearCrossEntropy*", "nn.modules.linear_cross_entropy_options.*",
                             "nn.functional.linear_cross_entropy")],
    *[(f"torch.{n}", "torch's uninitialised-tensor machinery for lazy modules: tinyattn's lazy layers (LazyLinear, "
       "the lazy convolutions and norms) size their parameters at the first call without it")
      for n in ("nn.UninitializedParameter", "nn.UninitializedBuffer", "nn.modules.lazy.LazyModuleMixin")],
    *[(f"torch.{n}", "spatial transformer networks' sampling grids (vision): not built")
      for n in ("nn.functional.affine_grid", "nn.functional.grid_sample", "nn.functional.GRID_SAMPLE_*")],
    # the distributions and transforms not built (the families language models and RL toys sample from are)
    *[(f"torch.distributions.{n}", "a distribution family not built: the ones language models and "
       "reinforcement-learning toys sample from are (Categorical, Normal, Bernoulli, MultivariateNormal, Beta…)")
      for n in ("Wishart", "LKJCholesky", "LowRankMultivariateNormal", "LogisticNormal", "ContinuousBernoulli",
                "Kumaraswamy", "Pareto", "Weibull", "VonMises", "InverseGamma", "GeneralizedPareto", "FisherSnedecor",
                "NegativeBinomial", "ExponentialFamily", "HalfCauchy")],
    *[(f"torch.distributions.{n}", "a transform (or constraint registry) for the families not built: the "
       "elementwise transforms (Exp, Affine, Sigmoid, Tanh, Softplus, Power, Abs) and their composition are")
      for n in ("CatTransform", "StackTransform", "ReshapeTransform", "IndependentTransform", "SoftmaxTransform",
                "StickBreakingTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
                "CorrCholeskyTransform", "CumulativeDistributionTransform", "biject_to", "transform_to")],
    *[(f"torch.distributed.{n}", "torch.distributed's machinery beyond what a one-process script touches (its "
       "queries and enums are here; initialisation and the collectives are refused)")
      for n in ("GroupName", "algorithms", "autograd", "c10d_logger", "config", "constants", "device_mesh",
                "distributed_c10d", "get_default_backend_for_device", "log", "logging_handlers", "remote_device",
                "rpc", "timedelta", "utils", "argparse_util", "checkpoint", "collective_utils", "debug", "elastic",
                "flight_recorder", "fsdp", "launch", "launcher", "nn", "optim", "pipelining", "run", "tensor")],
    *[(f"torch.cuda.{n}", "a CUDA runtime submodule (graphs, streams, NCCL, NVTX, kernels compiled at run time): "
       "tinyattn reaches GPUs through CuPy's arrays, not torch's runtime")
      for n in ("graphs", "jiterator", "memory", "nccl", "nvtx", "profiler", "random", "sparse", "streams", "tunable")],
    ("torch.utils.tensorboard.FileWriter", "tensorboard's low-level event writer: SummaryWriter writes the events"),
    # torch's top level: ATen's bindings of nn.functional, autocast's process-wide state, statistics helpers
    *[(f"torch.{n}", "the ATen binding of an nn.functional function, in ATen's argument order (reductions as "
       "integer enums, cuDNN flags): call torch.nn.functional's")
      for n in ("batch_norm", "instance_norm", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
                "hinge_embedding_loss", "kl_div", "margin_ranking_loss", "poisson_nll_loss", "triplet_margin_loss",
                "embedding", "embedding_bag", "ctc_loss", "rrelu", "rrelu_")],
    *[(f"torch.{n}", "torch's process-wide autocast state: compat's autocast context manager never casts, and "
       "torch.is_autocast_enabled() says so") for n in ("autocast_*", "clear_autocast_cache", "set_autocast_*",
                                                        "is_autocast_*_enabled", "is_autocast_cache_enabled",
                                                        "get_autocast_*_dtype")],
    *[(f"torch.{n}", "a statistics or numerical-calculus helper outside the op set: NumPy's bincount, histogram, "
       "cov, corrcoef, trapezoid and gradient give the values")
      for n in ("bincount", "histc", "histogram", "histogramdd", "corrcoef", "cov", "trapz", "trapezoid",
                "cumulative_trapezoid", "vander", "gradient", "renorm", "Tensor.bincount", "Tensor.histc",
                "Tensor.histogram", "Tensor.corrcoef", "Tensor.cov", "Tensor.renorm", "Tensor.renorm_")],
    *[(f"torch.{n}", "views by raw strides over the storage: tinyattn's views are NumPy's (reshape, permute, "
       "slicing, narrow, unfold)") for n in ("as_strided*", "slice_inverse", "Tensor.as_strided*",
                                             "Tensor.slice_inverse")],
    *[(f"torch.{n}", "torch's prototype index_reduce: scatter_reduce reduces along an index tensor the same way")
      for n in ("index_reduce", "Tensor.index_reduce", "Tensor.index_reduce_")],
    *[(f"torch.{n}", "a deprecated ATen norm: torch.linalg.norm, vector_norm and matrix_norm are the norms")
      for n in ("frobenius_norm", "nuclear_norm")],
    *[(f"torch.{n}", _JIT) for n in ("BufferDict", "ModuleDict", "ParameterDict", "FatalError", "types",
                                    "Tensor.index")],
    *[(f"torch.{n}", _SPECTRAL) for n in ("windows",)],
    ("torch.fused_moving_avg_obs_fake_quant", _QUANT),
    ("torch.memory_format", "memory formats (channels_last): a NumPy array's strides are NumPy's own"),
    ("torch.frombuffer", "tensors over a foreign buffer: torch.from_numpy(numpy.frombuffer(...)) does it"),
    *[(f"torch.Tensor.{n}", "NumPy's and pickle's protocols beyond __array__: compat converts with numpy.asarray(t) "
       "and saves with torch.save, never pickle") for n in ("__array_priority__", "__array_wrap__", "__setstate__")],
    ("torch.Tensor.register_post_accumulate_grad_hook", "a hook after accumulation needs the engine's walk to call "
     "it; register_hook runs a hook on the gradient as it arrives"),
    *[(f"torch.{n}", _SUBSYSTEM) for n in ("contrib", "nativert", "numa")],
    *[(f"torch.nn.{n}", _JIT) for n in ("backends", "cpp")],
    *[(f"torch.backends.{n}", "a CPU kernel library torch can call (XNNPACK, Xeon launch settings): compat calls "
       "none, NumPy's BLAS does the work") for n in ("xeon", "xnnpack")],
    ("torch.nn.common_types", "type aliases for annotations (_size_2_t…): nothing runs them"),
    ("torch.nn.factory_kwargs", "torch's internal helper for device/dtype keyword arguments"),
    ("torch.nn.grad", "the convolutions' hand-written input and weight gradients: autograd gives them"),
    ("torch.backends.python_native", "torch's registry of Python-native kernel overrides: tinyattn's ops are Python"),
    ("torch.utils.data._DatasetKind", "a private name torch lists in __all__"),
    # torch's other subsystems
    *[(f"torch.{n}", _SUBSYSTEM) for n in ("hub", "profiler", "monitor", "testing", "masked", "nested",
                                          "quasirandom", "multiprocessing", "futures", "torch_version",
                                          "Tensor.is_nested", "Tensor.to_padded_tensor", "Tensor.map_",
                                          "Tensor.map2_", "Tensor.apply_")],
]


def out_of_scope(qualified_name):
    """The reason ``qualified_name`` (``"torch.fft"``, ``"torch.Tensor.to_sparse"``) is out of scope, or ``None``."""
    for pattern, reason in OUT_OF_SCOPE:
        if fnmatchcase(qualified_name, pattern):
            return reason
    return None


def missing(module_name, name):
    """The ``AttributeError`` for a name compat's module ``module_name`` (``"tinyattn.compat.nn"``) lacks: with the
    reason where torch's name is out of scope, else saying it is not there yet."""
    torch_name = "torch" + module_name[len("tinyattn.compat"):] + "." + name
    reason = out_of_scope(torch_name)
    if reason is not None:
        return AttributeError(f"{module_name} has no `{name}`: out of scope ({reason})", name=name)
    return AttributeError(f"{module_name} has no `{name}` yet", name=name)
