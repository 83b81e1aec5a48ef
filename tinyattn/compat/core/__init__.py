"""What compat's modules and subpackages share, in leaf modules that import nothing of ``tinyattn.compat``
above them (so ``compat.nn``, ``compat.autograd``, ``compat.utils``… reach them without importing the
package that gathers them):

    tensor      compat's ``Tensor`` and ``Parameter`` (``.data`` and ``.grad`` as tensors), ``as_compat``
    methods     torch's everyday tensor methods the native tensor does not carry, attached to ``Tensor``
    random      ``torch.Generator`` and the draws made with one
    devices     whether a GPU is here (``torch.cuda`` and ``torch.amp`` both ask)
"""
