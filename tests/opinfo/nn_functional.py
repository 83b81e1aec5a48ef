"""OpInfo entries in scope: ``torch.nn.functional``'s activations, losses, normalisation, distances, convolution and
pooling (``nn/``)."""

ENTRIES = [
    "nn.functional.relu", "nn.functional.relu6", "nn.functional.leaky_relu", "nn.functional.elu",
    "nn.functional.celu", "nn.functional.selu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.mish",
    "nn.functional.hardswish", "nn.functional.hardsigmoid", "nn.functional.hardtanh", "nn.functional.hardshrink",
    "nn.functional.softshrink", "nn.functional.tanhshrink", "nn.functional.threshold", "nn.functional.logsigmoid",
    "nn.functional.softsign", "nn.functional.softplus", "nn.functional.glu", "nn.functional.prelu", "softmax",
    "softmax.with_dtype", "log_softmax", "log_softmax.with_dtype", "nn.functional.softmin",
    "nn.functional.softmin.with_dtype", "nn.functional.cross_entropy", "nn.functional.nll_loss",
    "nn.functional.mse_loss", "nn.functional.l1_loss", "nn.functional.smooth_l1_loss", "nn.functional.huber_loss",
    "nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy_with_logits", "nn.functional.kl_div",
    "nn.functional.soft_margin_loss", "nn.functional.margin_ranking_loss", "nn.functional.hinge_embedding_loss",
    "nn.functional.cosine_embedding_loss", "nn.functional.poisson_nll_loss", "nn.functional.gaussian_nll_loss",
    "nn.functional.multilabel_soft_margin_loss", "nn.functional.multi_margin_loss",
    "nn.functional.multilabel_margin_loss", "nn.functional.triplet_margin_loss",
    "nn.functional.triplet_margin_with_distance_loss", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.group_norm", "nn.functional.batch_norm", "nn.functional.batch_norm.without_cudnn",
    "nn.functional.instance_norm", "nn.functional.normalize", "constant_pad_nd", "nn.functional.pad.constant",
    "nn.functional.pad.reflect", "nn.functional.pad.replicate", "nn.functional.pad.replicate_negative",
    "nn.functional.pad.circular", "nn.functional.one_hot", "nn.functional.cosine_similarity",
    "nn.functional.pairwise_distance", "nn.functional.pdist", "cdist", "nn.functional.embedding",
    "nn.functional.linear", "nn.functional.bilinear", "nn.functional.scaled_dot_product_attention",
    "nn.functional.dropout",
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d", "nn.functional.unfold",
    "nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.avg_pool1d",
    "nn.functional.avg_pool2d", "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d", "nn.functional.max_unpool1d",
    "nn.functional.max_unpool2d", "nn.functional.max_unpool3d", "nn.functional.embedding_bag",
    "nn.functional.local_response_norm", "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact",
    "nn.functional.interpolate.linear", "nn.functional.interpolate.bilinear", "nn.functional.interpolate.bicubic",
    "nn.functional.interpolate.trilinear", "nn.functional.upsample_bilinear", "nn.functional.upsample_nearest",
    "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle", "nn.functional.channel_shuffle",
]

_TARGET_JUMP = ("harness: the samples' targets are ±1 and require grad; a finite difference moves them off ±1, where "
                "the loss switches branch (PyTorch's own definition jumps there too), so the difference is not "
                "the derivative")

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ("nn.functional.cosine_embedding_loss", "fd"): _TARGET_JUMP,
    ("nn.functional.hinge_embedding_loss", "fd"): _TARGET_JUMP,
    ("nn.functional.scaled_dot_product_attention", "gradgrad"): (
        "harness: torch has no second derivative of its CPU flash attention "
        "(_scaled_dot_product_flash_attention_for_cpu_backward)"),
    ("nn.functional.embedding", "vmap"): (
        "harness: max_norm renormalises the weight's rows in place (torch's too), so the two torch calls the vmap "
        "check stacks, and the batch it hands to vmap, see the weight at different moments"),
}

_REPEATED_INDEX = (
    "harness: the sample repeats an index with different values (max_pool's indices repeat only with equal values); "
    "torch writes one of them, unspecified which, and sends the gradient to every one, so no function has torch's "
    "gradient: its finite differences, tangents and batch of reversed values differ there")
KNOWN.update({
    **{(f"nn.functional.max_unpool{d}d", check): _REPEATED_INDEX for d in (1, 2, 3) for check in ("fd", "jvp", "vmap")},
    ("nn.functional.conv_transpose3d", "float16"): (
        "torch's float16 transposed convolution on the CPU is the less accurate one: on sample 0, against the float64 "
        "result, torch's largest error is 0.32 and ours (float32 accumulation) 0.085, so the two differ beyond "
        "float16's tolerance on 4 of 648 elements"),
})

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
    # scaling each row's gradient by its count in the batch changes the backward alone: no composition gives it
    "nn.functional.embedding": (NotImplementedError, "scale_grad_by_freq=True is not supported"),
    "nn.functional.embedding_bag": (NotImplementedError, "scale_grad_by_freq=True is not supported"),
    # torch.func.vmap refuses these too: the running statistics are not batched, so there is no one update
    "nn.functional.batch_norm": (RuntimeError, "running statistics cannot be updated in place inside vmap"),
    "nn.functional.batch_norm.without_cudnn": (RuntimeError,
                                               "running statistics cannot be updated in place inside vmap"),
    "nn.functional.instance_norm": (RuntimeError, "running statistics cannot be updated in place inside vmap"),
}
