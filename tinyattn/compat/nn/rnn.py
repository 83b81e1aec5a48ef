"""``nn.RNN``, ``nn.LSTM`` and ``nn.GRU``: torch's recurrent layers, their parameters, initialisation and
equations, written over the native differentiable operations (a Python loop over time steps).

For each layer ``l`` and direction (suffix ``""``, or ``"_reverse"`` when bidirectional) the
parameters are torch's: ``weight_ih_l{l}`` ``(G·H, input)``, ``weight_hh_l{l}`` ``(G·H, H)``,
``bias_ih_l{l}``, ``bias_hh_l{l}`` ``(G·H,)``, with ``G`` = 1 (RNN), 4 (LSTM: gates i, f, g, o) or
3 (GRU: r, z, n), every one uniform in ``±1/√H``. So torch's ``state_dict`` loads as it is.

Inputs are sequence-first ``(L, B, input_size)`` unless ``batch_first``, or unbatched ``(L, input_size)``;
``forward(input, hx=None)`` returns ``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) with
``output`` ``(L, B, D·H)`` and ``h_n`` ``(D·num_layers, B, H)``. A ``PackedSequence`` input gives a
``PackedSequence`` output: at step ``t`` only the ``batch_sizes[t]`` sequences still running update their state, so
each sequence's ``h_n`` is its state at its own last step (its first, in the reverse direction's run).
``proj_size`` is not supported; ``flatten_parameters()`` (a cuDNN memory layout) has nothing to do here.

``RNNCell``, ``LSTMCell`` and ``GRUCell`` are one step of the same equations, with torch's parameters
``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``.

>>> import tinyattn.compat as torch
>>> lstm = torch.nn.LSTM(3, 4, num_layers=2)
>>> output, (h_n, c_n) = lstm(torch.randn(5, 2, 3))
>>> output.shape, h_n.shape, c_n.shape
((5, 2, 4), (2, 2, 4), (2, 2, 4))
>>> [name for name, _ in lstm.named_parameters()][:4]
['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0']
>>> from tinyattn.compat.nn.utils.rnn import pack_padded_sequence
>>> packed = pack_padded_sequence(torch.randn(5, 2, 3), [5, 2])
>>> output, (h_n, c_n) = lstm(packed)
>>> output.data.shape, output.batch_sizes
((7, 4), tensor([2, 2, 1, 1, 1]))
"""

import math

from ... import ops
from ...creation import empty, zeros
from ...nn import functional as F
from ..core.tensor import Parameter
from .module import Module
from .utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence


class RNNBase:
    """The parameters and the layer/direction loop shared by ``RNN``, ``LSTM`` and ``GRU`` (a mixin
    before compat's ``Module``); each subclass's ``cell`` is its equation for one time step."""

    gates = 1

    def _build(self, mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
               proj_size, device, dtype):
        if proj_size:
            raise NotImplementedError(f"{type(self).__name__}(proj_size={proj_size}) is not supported by "
                                      "tinyattn.compat")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        self._names = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:directions]:
                layer_input = input_size if layer == 0 else hidden_size * directions
                shapes = [("weight_ih", (self.gates * hidden_size, layer_input)),
                          ("weight_hh", (self.gates * hidden_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (self.gates * hidden_size,)), ("bias_hh", (self.gates * hidden_size,))]
                names = []
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(*shape, device=device, dtype=dtype)))
                    names.append(name)
                self._names.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        """torch's: every weight and bias uniform in ``±1/√hidden_size``."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            p.data.uniform_(-bound, bound)

    def flatten_parameters(self):
        """cuDNN's packing of the weights into one buffer: nothing to do here."""

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text

    def _initial(self, input, hx, batch):
        directions = 2 if self.bidirectional else 1
        expected = (self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            return zeros(*expected, dtype=input.dtype, device=input.device)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.shape)}")
        return hx

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if not hasattr(input, "ndim") or input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{getattr(input, 'ndim', type(input).__name__)}D instead")
        self._check_input_size(input)
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)  # (L, B, I)
        states = self._unbatched_states(hx) if unbatched and hx is not None else hx
        output, h_n, c_n = self._layers(x, states, None)
        output = output.transpose(0, 1) if self.batch_first and not unbatched else output
        if unbatched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        return output, h_n if self.gates != 4 else (h_n, c_n)

    def _check_input_size(self, input):
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _forward_packed(self, input, hx):
        """The layers over a ``PackedSequence``: padded (sorted, ``(T, B, I)``), run with ``batch_sizes``, packed
        again; ``hx`` and ``h_n`` are in the batch's own order, as torch's (sorted inside, unsorted outside)."""
        self._check_input_size(input.data)
        x, lengths = pad_packed_sequence(PackedSequence(input.data, input.batch_sizes))  # (T, B, I), sorted order
        order, unorder = input.sorted_indices, input.unsorted_indices
        if hx is not None and order is not None:
            hx = tuple(h[:, order] for h in hx) if isinstance(hx, tuple) else hx[:, order]
        output, h_n, c_n = self._layers(x, hx, [int(b) for b in input.batch_sizes.tolist()])
        if unorder is not None:
            h_n, c_n = h_n[:, unorder], None if c_n is None else c_n[:, unorder]
        data = pack_padded_sequence(output, lengths).data  # (Σ lengths, D·H)
        packed = PackedSequence(data, input.batch_sizes, order, unorder)
        return packed, h_n if self.gates != 4 else (h_n, c_n)

    def _layers(self, x, states, batch_sizes):
        """Every layer and direction over ``x`` ``(L, B, I)``: ``(output (L, B, D·H), h_n, c_n or None)``, each
        state ``(D·num_layers, B, H)``."""
        batch = x.shape[1]
        if self.gates == 4:  # LSTM: (h_0, c_0)
            h0, c0 = (None, None) if states is None else states
            h0, c0 = self._initial(x, h0, batch), self._initial(x, c0, batch)
        else:
            h0, c0 = self._initial(x, states, batch), None
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                parameters = [getattr(self, name) for name in self._names[k]]
                out, h, c = self._run(x, parameters, h0[k], None if c0 is None else c0[k], direction == 1,
                                      batch_sizes)
                outputs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outputs[0] if directions == 1 else ops.cat(outputs, dim=2)  # (L, B, D·H)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        return x, ops.stack(h_n, dim=0), None if c0 is None else ops.stack(c_n, dim=0)  # (D·num_layers, B, H)

    def _unbatched_states(self, hx):
        if isinstance(hx, tuple):
            return tuple(h.unsqueeze(1) for h in hx)
        return hx.unsqueeze(1)

    def _run(self, x, parameters, h, c, reverse, batch_sizes=None):
        """One layer in one direction over the sequence ``x`` ``(L, B, I)``: ``(output (L, B, H), h_L, c_L)``.

        With ``batch_sizes`` (a packed batch, longest first), step ``t`` updates the first ``batch_sizes[t]`` rows
        of the state only; the other sequences have ended (or, in reverse, not yet begun) and keep theirs."""
        w_ih, w_hh = parameters[0], parameters[1]
        b_ih, b_hh = (parameters[2], parameters[3]) if self.bias else (None, None)
        x_gates = F.linear(x, w_ih, b_ih)  # (L, B, G·H): the input's part of every gate, for all steps at once
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        batch = x.shape[1]
        outputs = [None] * x.shape[0]
        for t in steps:
            running = batch if batch_sizes is None else batch_sizes[t]
            if running == batch:
                h_gates = F.linear(h, w_hh, b_hh)  # (B, G·H)
                h, c = self.cell(x_gates[t], h_gates, h, c)
            else:  # the first `running` rows step, the rest keep their state
                h_gates = F.linear(h[:running], w_hh, b_hh)  # (b, G·H)
                h_new, c_new = self.cell(x_gates[t, :running], h_gates, h[:running],
                                         None if c is None else c[:running])
                h = ops.cat([h_new, h[running:]], dim=0)  # (B, H)
                c = None if c is None else ops.cat([c_new, c[running:]], dim=0)
            outputs[t] = h
        return ops.stack(outputs, dim=0), h, c


class RNN(RNNBase, Module):
    """``RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        Module.__init__(self)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        self._build("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers, bias, batch_first,
                    dropout, bidirectional, 0, device, dtype)

    def cell(self, x_gates, h_gates, h, c):
        """``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or ``relu``)."""
        pre = x_gates + h_gates  # (B, H)
        return (pre.tanh() if self.nonlinearity == "tanh" else pre.relu()), None


class LSTM(RNNBase, Module):
    """``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``."""

    gates = 4

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        Module.__init__(self)
        self._build("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                    proj_size, device, dtype)

    def cell(self, x_gates, h_gates, h, c):
        """``i, f, g, o`` = σ, σ, tanh, σ of the gates; ``c' = f·c + i·g``, ``h' = o·tanh(c')``."""
        i, f, g, o = (x_gates + h_gates).chunk(4, dim=-1)  # (B, H) each
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c


class GRU(RNNBase, Module):
    """``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``."""

    gates = 3

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        Module.__init__(self)
        self._build("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                    device, dtype)

    def cell(self, x_gates, h_gates, h, c):
        """``r, z = σ(…)``, ``n = tanh(W_in x + b_in + r·(W_hn h + b_hn))``, ``h' = (1 - z)·n + z·h``."""
        x_r, x_z, x_n = x_gates.chunk(3, dim=-1)  # (B, H) each
        h_r, h_z, h_n = h_gates.chunk(3, dim=-1)
        r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
        n = (x_n + r * h_n).tanh()
        return (1 - z) * n + z * h, None


class RNNCellBase(Module):
    """The parameters of one recurrent step, torch's: ``weight_ih`` ``(G·H, input_size)``, ``weight_hh``
    ``(G·H, H)``, ``bias_ih``, ``bias_hh`` ``(G·H,)``, every one uniform in ``±1/√H``; ``forward(input, hx=None)``
    on ``(B, input_size)`` or unbatched ``(input_size,)``, the state zeros unless given."""

    gates = 1

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        factory = dict(device=device, dtype=dtype)
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, **factory))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, **factory))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **factory))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text

    def _step(self, input, states):
        """The checked step: ``(input (B, I), states, unbatched)`` → the cell's ``(h', c')``, unbatched again."""
        name = type(self).__name__
        if not hasattr(input, "ndim") or input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got "
                             f"{getattr(input, 'ndim', type(input).__name__)}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected "
                               f"{self.input_size}")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input  # (B, I)
        shape = (x.shape[0], self.hidden_size)
        states = [zeros(*shape, dtype=x.dtype, device=x.device) if s is None else (s.unsqueeze(0) if unbatched else s)
                  for s in states]
        for s in states:
            if tuple(s.shape) != shape:
                raise RuntimeError(f"{name}: Expected hidden size {shape}, got {tuple(s.shape)}")
        h, c = states[0], (states[1] if len(states) > 1 else None)
        h, c = self.cell(F.linear(x, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh), h, c)
        if unbatched:
            h, c = h.squeeze(0), None if c is None else c.squeeze(0)
        return h, c


class RNNCell(RNNCellBase):
    """``RNNCell(input_size, hidden_size, bias=True, nonlinearity="tanh")``: ``h' = tanh(W_ih x + b_ih + W_hh h +
    b_hh)`` (or ``relu``); ``forward(input, hx=None)`` → ``h'``.

    >>> import tinyattn.compat as torch
    >>> cell = torch.nn.RNNCell(3, 4)
    >>> cell(torch.randn(2, 3)).shape
    (2, 4)
    """

    cell = RNN.cell

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, [hx])[0]


class LSTMCell(RNNCellBase):
    """``LSTMCell(input_size, hidden_size, bias=True)``: one step of ``LSTM``'s equations;
    ``forward(input, hx=None)`` with ``hx = (h, c)`` → ``(h', c')``.

    >>> import tinyattn.compat as torch
    >>> h, c = torch.nn.LSTMCell(3, 4)(torch.randn(2, 3))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """

    cell = LSTM.cell

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, [None, None] if hx is None else list(hx))


class GRUCell(RNNCellBase):
    """``GRUCell(input_size, hidden_size, bias=True)``: one step of ``GRU``'s equations; ``forward(input, hx=None)``
    → ``h'``.

    >>> import tinyattn.compat as torch
    >>> torch.nn.GRUCell(3, 4)(torch.randn(3)).shape
    (4,)
    """

    cell = GRU.cell

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, [hx])[0]
