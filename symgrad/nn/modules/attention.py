"""``nn.MultiheadAttention`` as PyTorch's: packed (``in_proj_weight``) or separate
(``kdim`` / ``vdim``) input projections, ``bias``, ``add_bias_kv``, ``add_zero_attn``,
``batch_first``, dropout on the weights, PyTorch's initialisation order (the output
projection is drawn first, then Xavier for the input projections) and repr.  The
computation is :func:`symgrad.nn.attention.multi_head_attention_forward`."""
from __future__ import annotations

from ...device import check_device
from ...functions.creation import empty
from ...graph import dtypes
from .. import attention as A
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear`` under another name (PyTorch's output projection of attention)."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features.

    >>> import symgrad as torch
    >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = torch.randn(3, 5, 8)
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    (torch.Size([3, 5, 8]), torch.Size([3, 5, 5]))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError("embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        check_device(device)
        dt = dtypes.as_dtype(dtype) if dtype is not None else None
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), dtype=dt))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), dtype=dt))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), dtype=dt))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), dtype=dt))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), dtype=dt))
            self.bias_v = Parameter(empty((1, 1, embed_dim), dtype=dt))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        batched = query.dim() == 3
        key_padding_mask = A.canonical_mask(key_padding_mask, "key_padding_mask",
                                            None if attn_mask is None else attn_mask.dtype,
                                            "attn_mask", query.dtype)
        attn_mask = A.canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
        if self.batch_first and batched:
            query, key, value = _transposed(query, key, value)
        separate = dict(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                        k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight) \
            if not self._qkv_same_embed_dim else {}
        out, weights = A.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            average_attn_weights=average_attn_weights, is_causal=is_causal, **separate)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """The one mask (and its type: 1 key padding, 2 attention) PyTorch's fused kernel
        would take for ``attn_mask`` and ``key_padding_mask``."""
        mask_type, merged = None, None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch, seq, _ = query.shape
            mask_type = 2
            merged = (attn_mask.reshape(batch, -1, seq, seq) if attn_mask.dim() == 3 else
                      attn_mask.reshape(1, 1, seq, seq).expand(batch, self.num_heads, -1, -1))
            if key_padding_mask is not None:
                merged = merged + key_padding_mask.reshape(batch, 1, 1, seq) \
                    .expand(-1, self.num_heads, -1, -1)
        return merged, mask_type


def _transposed(query, key, value):
    """(query, key, value) sequence-first, the same tensor staying one object (``query is
    key`` picks the packed projection's shortcut, as in PyTorch)."""
    seen: dict = {}
    return tuple(seen.setdefault(id(x), x.transpose(1, 0)) for x in (query, key, value))

