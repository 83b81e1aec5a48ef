"""``torch.backends.quantized``: no quantized engine here (torch's ``"none"``)."""

engine = "none"
supported_engines = ["none"]
