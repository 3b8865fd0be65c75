"""``nn.Transformer``, ``TransformerEncoder(Layer)``, ``TransformerDecoder(Layer)`` as
PyTorch's: post- or pre-norm (``norm_first``), relu / gelu / any callable activation,
``batch_first``, masks and key padding masks (boolean or additive), causal-mask
detection, ``generate_square_subsequent_mask``, Xavier initialisation of every matrix of
a ``Transformer``, PyTorch's reprs and warnings.

PyTorch's inference fast path (eval mode, no gradient, batch-first, a left-aligned
``src_key_padding_mask``) runs an encoder over the unpadded tokens only and returns
zeros at the padded positions before the final norm; :class:`TransformerEncoder` does
the same there, so its outputs equal PyTorch's in every mode."""
from __future__ import annotations

import copy
import warnings
from typing import Callable

from ...autograd import grad_mode
from ...functions.creation import full
from ...functions.elementwise import where
from ...graph import dtypes
from .. import attention as A
from .. import functional as F
from .. import init
from .activation import GELU, ReLU
from .attention import MultiheadAttention
from .container import ModuleList
from .linear import Linear
from .misc import Dropout, LayerNorm
from .module import Module

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    dt = dtypes.as_dtype(dtype) if dtype is not None else None
    return full((sz, sz), float("-inf"), dtype=dt).triu(1)


def _activation(activation) -> Callable:
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _seq_len(src, batch_first: bool) -> int:
    return int(src.shape[0] if src.dim() == 2 else src.shape[1 if batch_first else 0])


def _detect_is_causal_mask(mask, is_causal, size) -> bool:
    """Whether ``mask`` is the causal mask (when ``is_causal`` is None).  The answer is
    a hint only (the mask gives the same result): a mask traced by ``symgrad.compile``,
    whose values are not known, is used as a mask."""
    if is_causal is None and mask is not None and mask._data is None:
        return False
    if is_causal is None and mask is not None:
        causal = _generate_square_subsequent_mask(size if size is not None else mask.shape[-2],
                                                  dtype=mask.dtype)
        if tuple(mask.shape) != tuple(causal.shape):
            return False
        return bool((mask == causal).all())
    return is_causal is True


def _factory(device, dtype) -> dict:
    return {"device": device, "dtype": dtype}


def _feed_forward_and_norms(layer: Module, blocks: int, d_model: int, dim_feedforward: int,
                            dropout: float, eps: float, norm_first: bool, bias: bool,
                            kw: dict) -> None:
    """A layer's feed-forward block and, for each of its ``blocks`` residual blocks, a
    LayerNorm and a Dropout, registered in PyTorch's order."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
    layer.norm_first = norm_first
    for i in range(1, blocks + 1):
        setattr(layer, f"norm{i}", LayerNorm(d_model, eps=eps, bias=bias, **kw))
    for i in range(1, blocks + 1):
        setattr(layer, f"dropout{i}", Dropout(dropout))


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and a
    LayerNorm (after, or before with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        kw = _factory(device, dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        _feed_forward_and_norms(self, 2, d_model, dim_feedforward, dropout, layer_norm_eps,
                                norm_first, bias, kw)
        activation = _activation(activation)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        src_key_padding_mask = A.canonical_mask(
            src_key_padding_mask, "src_key_padding_mask",
            None if src_mask is None else src_mask.dtype, "src_mask", src.dtype)
        src_mask = A.canonical_mask(src_mask, "src_mask", None, "", src.dtype, False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's ``memory`` and a feed-forward block,
    each with a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        kw = _factory(device, dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **kw)
        _feed_forward_and_norms(self, 3, d_model, dim_feedforward, dropout, layer_norm_eps,
                                norm_first, bias, kw)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _why_no_nested_tensor(layer) -> str:
    """Why PyTorch's encoder will not use nested tensors with ``layer`` ('' if it will)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    attn = layer.self_attn
    checks = ((layer.norm_first, f"{name}.norm_first was True"),
              (not attn.batch_first, f"{name}.self_attn.batch_first was not True(use "
                                     "batch_first for better inference performance)"),
              (not attn._qkv_same_embed_dim,
               f"{name}.self_attn._qkv_same_embed_dim was not True"),
              (attn.in_proj_bias is None, f"{name}.self_attn was passed bias=False"),
              (not layer.activation_relu_or_gelu,
               f"{name}.activation_relu_or_gelu was not True"),
              (layer.norm1.eps != layer.norm2.eps,
               f"{name}.norm1.eps was not equal to {name}.norm2.eps"),
              (attn.num_heads % 2 == 1, f"{name}.self_attn.num_heads is odd"))
    return next((why for failed, why in checks if failed), "")


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` and an optional final ``norm``.

    >>> import symgrad as torch
    >>> layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    >>> torch.nn.TransformerEncoder(layer, 2)(torch.randn(3, 5, 8)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor = self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_no_nested_tensor(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn("enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = A.canonical_mask(
            src_key_padding_mask, "src_key_padding_mask",
            None if mask is None else mask.dtype, "mask", src.dtype)
        mask = A.canonical_mask(mask, "mask", None, "", src.dtype, False)
        first = self.layers[0]
        is_causal = _detect_is_causal_mask(mask, is_causal,
                                           _seq_len(src, first.self_attn.batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if self._runs_nested(src, mask, src_key_padding_mask):
            padded = (src_key_padding_mask != 0).unsqueeze(-1)
            output = where(padded, 0.0, output)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _runs_nested(self, src, mask, key_padding_mask) -> bool:
        """Whether PyTorch's encoder would run this call on nested tensors (then the
        padded positions come out as zeros)."""
        first = self.layers[0]
        if (not getattr(self, "use_nested_tensor", False) or first.training or src.dim() != 3
                or key_padding_mask is None or mask is not None):
            return False
        if grad_mode.is_grad_enabled() and (src.requires_grad or any(
                p.requires_grad for p in first.parameters())):
            return False
        if getattr(self, "mask_check", True):
            keep = (key_padding_mask == 0).to(dtypes.int64)
            # left-aligned: each row's kept positions come first
            if not bool((keep[:, 1:] <= keep[:, :-1]).all()):
                return False
        return True


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` and an optional final ``norm``."""

    def __init__(self, decoder_layer, num_layers: int, norm=None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        output = tgt
        tgt_is_causal = _detect_is_causal_mask(
            tgt_mask, tgt_is_causal, _seq_len(tgt, self.layers[0].self_attn.batch_first))
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder transformer (``d_model`` features, ``nhead`` heads), every
    matrix Xavier-uniform initialised.

    >>> import symgrad as torch
    >>> model = torch.nn.Transformer(8, 2, 1, 1, 16)
    >>> model(torch.randn(4, 2, 8), torch.randn(3, 2, 8)).shape
    torch.Size([3, 2, 8])
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = _factory(device, dtype)
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias)

        def stack(layer_cls, stack_cls, n):
            layer = layer_cls(*args, **kw)
            return stack_cls(layer, n, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.encoder = custom_encoder if custom_encoder is not None else \
            stack(TransformerEncoderLayer, TransformerEncoder, num_encoder_layers)
        self.decoder = custom_decoder if custom_decoder is not None else \
            stack(TransformerDecoderLayer, TransformerDecoder, num_decoder_layers)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        if src.dim() == 3 and src.shape[0 if self.batch_first else 1] != \
                tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A (sz, sz) float mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
